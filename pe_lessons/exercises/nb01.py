"""Checkers for the exercises of notebook 01 (the formula by hand)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ._feedback import (
    Feedback,
    _short,
    as_integer,
    as_number,
    attempt,
    checker,
    close,
    failed,
    is_placeholder,
    not_done,
    passed,
)

__all__ = ["check_wavelength", "check_first_slow_column", "check_offset_dot", "check_sin_only_norm"]


@checker
def check_wavelength(answer: float | None, column: int, d_model: int, base: float = 10000.0) -> Feedback:
    """Check a predicted wavelength (in positions) of ``column`` at width ``d_model``."""
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_number(answer, "a number of positions")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    i = column // 2
    want = 2 * math.pi * base ** (2 * i / d_model)
    if abs(answer - want) <= 0.05 or close(answer, want, 1e-3):  # one decimal, or 3 significant digits
        return passed(f"Column {column} (pair i = {i}) repeats every {want:.2f} positions.")
    if close(answer, want / (2 * math.pi), 1e-3):
        return failed("That is 1/ω, missing a factor 2π: one period of sin(pos·ω) is 2π/ω positions.")
    if close(answer, 2 * math.pi * base ** (2 * column / d_model), 1e-3):
        return failed(f"You used the column index {column} in the exponent; the pair index is i = {column} // 2 = {i}.")
    if close(answer, 1 / want, 1e-3) or close(answer, 2 * math.pi / base ** (2 * i / d_model), 1e-3):
        return failed("That looks like a frequency, not a wavelength: wavelength = 2π / ω_i = 2π · base^(2i/d_model).")
    if abs(answer - want) < 1:
        return failed(
            f"{answer:.4g} is close, but give the wavelength to one decimal: a period need not be a whole "
            "number of positions."
        )
    return failed(f"{answer:.4g} is off; wavelength = 2π · base^(2i/d_model) with i = column // 2.")


@checker
def check_first_slow_column(answer: int | None, length: float, d_model: int, base: float = 10000.0) -> Feedback:
    """Check the first (lowest) column whose period exceeds ``length`` positions."""
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_integer(answer, f"a column index (an integer between 0 and {d_model - 1})")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    periods = [2 * math.pi * base ** (2 * (j // 2) / d_model) for j in range(d_model)]
    want = next((j for j, p in enumerate(periods) if p > length), None)
    if want is None:
        return failed(
            f"No column of a {d_model}-wide model has a period over {length:g} positions: "
            "check the exercise's settings."
        )
    if answer == want:
        return passed(f"Column {want} is the first whose period ({periods[want]:.1f}) exceeds {length:g} positions.")
    if want is not None and answer == want + 1:
        return failed(f"Column {answer} works, but so does column {want}: both columns of a pair share one period.")
    if 0 <= answer < d_model:
        return failed(
            f"Column {answer} has period {periods[answer]:.1f}: "
            + ("not long enough." if periods[answer] <= length else "long enough, but an earlier column already is.")
        )
    return failed(f"Answer with a column index between 0 and {d_model - 1}.")


# --------------------------------------------------------------------------- exercise: derive a dot product
def _real(value: object) -> float | None:
    """``value`` as a finite float (Python, numpy or one-element torch number), else None."""
    number, problem = as_number(value)
    return None if problem is not None else number


def _offset_dot(
    k: float, d_model: int, exponent: Callable[[int], float], fn: Callable[[float], float] = math.cos
) -> float:
    return sum(fn(k / 10000 ** exponent(i)) for i in range(d_model // 2))


#: (k, d_model) pairs an answer to :func:`check_offset_dot` is tried on.
OFFSET_CASES = [(0, 8), (1, 8), (3, 8), (7, 50), (30, 50), (500, 50), (2, 2), (12, 512)]


@checker
def check_offset_dot(offset_dot: Callable[[int, int], float] | None) -> Feedback:
    """Check ``offset_dot(k, d_model) -> PE(p)·PE(p+k)``, a formula in ``k`` alone: ``Σ_i cos(k·ω_i)``.

    ``sin(a)sin(b) + cos(a)cos(b) = cos(a − b)`` turns each pair's contribution into
    ``cos(k·ω_i)``, whatever ``p`` is. The answer is tried on :data:`OFFSET_CASES`; the
    feedback names the usual slips (sines left in, each pair counted twice, the column index
    in the exponent, only the ``k = 0`` case).
    """
    if offset_dot is None or offset_dot is Ellipsis:
        return not_done()
    if not callable(offset_dot):
        return failed(f"Answer with a function offset_dot(k, d_model), got {type(offset_dot).__name__}.")
    got = []
    for k, d in OFFSET_CASES:
        value, problem = attempt(f"offset_dot({k}, {d})", offset_dot, k, d)
        if problem is not None:
            return problem
        number = _real(value)
        if number is None:
            return failed(f"offset_dot({k}, {d}) returned {_short(value)}; return one finite number (the dot product).")
        got.append(number)

    def same(
        exponent: Callable[[int, int], float], fn: Callable[[float], float] = math.cos, factor: float = 1.0
    ) -> bool:
        return all(
            close(g, factor * _offset_dot(k, d, lambda i, d=d: exponent(i, d), fn), 1e-6)  # type: ignore[misc]  # mypy cannot infer a lambda with a default
            for g, (k, d) in zip(got, OFFSET_CASES, strict=True)
        )

    pair = lambda i, d: 2 * i / d  # noqa: E731
    if same(pair):
        return passed(
            "PE(p)·PE(p+k) = Σ_i cos(k·ω_i): each pair gives sin(a)sin(b) + cos(a)cos(b) = cos(a − b) = cos(k·ω_i), "
            "so the dot product depends on the offset k only, never on p."
        )
    if all(close(g, d / 2, 1e-6) for g, (_, d) in zip(got, OFFSET_CASES, strict=True)):
        return failed(
            "d_model/2 is only the k = 0 case (a row with itself). For k ≠ 0 each pair's angles differ by k·ω_i."
        )
    if same(pair, math.sin):
        return failed(
            "A sum of sines is not it: sin(a)sin(b) + cos(a)cos(b) = cos(a − b), so each pair gives cos(k·ω_i)."
        )
    if same(pair, factor=2.0):
        return failed(
            "Each pair contributes one cos(k·ω_i), not two: the pair's sin and cos columns together give one term."
        )
    if same(lambda i, d: 4 * i / d):
        return failed("The exponent is doubled: pair i uses base^(-2i/d_model) with i = 0, 1, …, d_model/2 - 1.")
    if same(lambda i, d: 2 * (2 * i) / d) or same(lambda i, d: i / d):
        return failed("Check the exponent: ω_i = base^(-2i/d_model), where i counts pairs, not columns.")
    if not close(got[0], 4.0, 1e-6):  # (k, d) = (0, 8): a row with itself
        return failed(f"offset_dot(0, 8) = {got[0]:.4g}; at k = 0 it is |PE(p)|² = d_model/2 = 4. Start from there.")
    want = [_offset_dot(k, d, lambda i, d=d: 2 * i / d) for k, d in OFFSET_CASES]  # type: ignore[misc]  # as above
    first = next(j for j in range(len(OFFSET_CASES)) if not close(got[j], want[j], 1e-6))
    k, d = OFFSET_CASES[first]
    return failed(
        f"offset_dot({k}, {d}) = {got[first]:.6g} is off. Write PE(p)·PE(p+k) pair by pair and use "
        "sin(a)sin(b) + cos(a)cos(b) = cos(a − b)."
    )


# --------------------------------------------------------------------------- exercise: predict the sin-only row norms
#: (pos, d_model) pairs an answer to :func:`check_sin_only_norm` is tried on.
NORM_CASES = [(0, 8), (1, 8), (3, 8), (40, 8), (7, 50), (1000, 50), (5, 2), (123, 512)]


def _sin_only_norm(pos: float, d_model: int, factor: float = 2.0, fn: Callable[[float], float] = math.sin) -> float:
    return math.sqrt(factor * sum(fn(pos / 10000 ** (2 * i / d_model)) ** 2 for i in range(d_model // 2)))


@checker
def check_sin_only_norm(sin_only_norm: Callable[[int, int], float] | None) -> Feedback:
    """Check ``sin_only_norm(pos, d_model)``: the norm of row ``pos`` of the table with ``sin`` in both columns
    of every pair, ``sqrt(2·Σ_i sin²(pos·ω_i))``.

    The answer is tried on :data:`NORM_CASES` (to 1e-6, relative); the feedback names the usual slips: the
    correct table's norm, a squared norm, each pair counted once, cos instead of sin.
    """
    if is_placeholder(sin_only_norm):
        return not_done()
    if not callable(sin_only_norm):
        return failed(f"Answer with a function sin_only_norm(pos, d_model), got {_short(sin_only_norm)}.")
    got = []
    for pos, d in NORM_CASES:
        value, problem = attempt(f"sin_only_norm({pos}, {d})", sin_only_norm, pos, d)
        if problem is not None:
            return problem
        number = _real(value)
        if number is None:
            return failed(f"sin_only_norm({pos}, {d}) returned {_short(value)}; return one finite number (a norm).")
        got.append(number)

    def same(want: Callable[[float, int], float]) -> bool:
        return all(close(g, want(p, d), 1e-6) for g, (p, d) in zip(got, NORM_CASES, strict=True))

    if same(_sin_only_norm):
        return passed(
            "‖row(pos)‖ = sqrt(2·Σ_i sin²(pos·ω_i)): 0 at pos = 0, and anywhere between 0 and sqrt(d_model) as pos "
            "moves, instead of the constant sqrt(d_model/2): no sin² is paired with its cos² any more, so some "
            "positions add much more to the token embedding than others."
        )
    if same(lambda p, d: math.sqrt(d / 2)):
        return failed(
            "sqrt(d_model/2) is the norm of the correct table, where sin² + cos² = 1 in each pair. Here both "
            "columns of a pair hold the same sin: what is each pair's contribution to the squared norm?"
        )
    if same(lambda p, d: _sin_only_norm(p, d) ** 2):
        return failed("That is the squared norm, ‖row‖²; the exercise asks for the norm ‖row‖.")
    if same(lambda p, d: _sin_only_norm(p, d, factor=1.0)):
        return failed("Each pair holds its sin twice (columns 2i and 2i+1): count both columns.")
    if same(lambda p, d: _sin_only_norm(p, d, fn=math.cos)):
        return failed("Check which function fills the columns: the buggy table has sin in both, not cos.")
    if not close(got[0], 0.0, 1e-6):
        return failed(f"sin_only_norm(0, 8) = {got[0]:.4g}; at pos = 0 every angle is 0. What is sin(0)?")
    first = next(j for j, (p, d) in enumerate(NORM_CASES) if not close(got[j], _sin_only_norm(p, d), 1e-6))
    p, d = NORM_CASES[first]
    return failed(
        f"sin_only_norm({p}, {d}) = {got[first]:.6g} is off. Write the squared norm column by column: "
        "columns 2i and 2i+1 both hold sin(pos·ω_i), with ω_i = base^(-2i/d_model)."
    )
