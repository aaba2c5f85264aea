"""Checkers for the exercises of notebook 04 (heatmaps, wavelengths and the aliasing illusion)."""

from __future__ import annotations

import math
import numbers

from .._checks import check_base, check_d_model, check_int
from ..sinusoidal import wavelengths
from ._feedback import (
    Feedback,
    SetupError,
    as_integer,
    as_number,
    checker,
    close,
    failed,
    is_placeholder,
    not_done,
    passed,
)
from .nb01 import check_wavelength

__all__ = [
    "check_predicted_wavelength",
    "check_first_honest_column",
    "alias_period",
    "check_alias_period",
    "context_base",
    "check_context_base",
]


def _is_infinite(value: object) -> bool:
    """Whether ``value`` is a real number equal to +inf (a huge integer is not)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return float(value) == math.inf
    except OverflowError:
        return False


@checker
def check_predicted_wavelength(answer: float | None, column: int, d_model: int, base: float = 10000.0) -> Feedback:
    """Check a predicted wavelength (in positions) of ``column`` in a model of width ``d_model`` and ``base``."""
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_number(answer, "a number of positions")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    i = column // 2
    want = 2 * math.pi * base ** (2 * i / d_model)
    if close(answer, want):
        return passed(
            f"Column {column} (pair i = {i}) repeats every {want:,.1f} positions: 2π·{base:g}^({2 * i}/{d_model})."
        )
    if base != 10000.0 and close(answer, 2 * math.pi * 10000.0 ** (2 * i / d_model)):
        return failed(f"You used base 10000; this model uses base = {base:g}. The wavelength is 2π·base^(2i/d_model).")
    return check_wavelength(answer, column, d_model, base)  # the formula's usual slips (2π, pair index, frequency)


@checker
def check_first_honest_column(
    answer: int | None, n_positions: int, pixels: int, d_model: int, base: float = 10000.0
) -> Feedback:
    """Check the first column a picture of ``n_positions`` rows in ``pixels`` pixels can draw without aliasing.

    Each pixel stands for ``n_positions / pixels`` positions; by the Nyquist limit a
    period is only visible if it spans more than two pixels, i.e. exceeds
    ``2 · n_positions / pixels`` positions.
    """
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_integer(answer, f"a column index (an integer between 0 and {d_model - 1})")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    per_pixel = n_positions / pixels
    lam = [float(v) for v in wavelengths(d_model, base).repeat_interleave(2)]  # period of every column
    want = next((j for j, p in enumerate(lam) if p > 2 * per_pixel), None)
    one_pixel = next((j for j, p in enumerate(lam) if p > per_pixel), None)
    if want is None:
        return failed("No column of this model is slow enough for this picture: every column aliases.")
    if answer == want:
        return passed(
            f"Column {want}: period {lam[want]:,.0f} > 2 × {per_pixel:g} positions per pixel = {2 * per_pixel:g}. "
            f"Columns 0–{want - 1} alias."
        )
    if not 0 <= answer < d_model:
        return failed(f"Answer with a column index between 0 and {d_model - 1}.")
    if answer == one_pixel and one_pixel != want:
        return failed(
            f"Column {answer}'s period ({lam[answer]:,.0f}) exceeds one pixel ({per_pixel:g} positions), "
            "but Nyquist needs at least two samples per period: compare with 2 pixels' worth of positions."
        )
    if answer == want + 1:
        return failed(f"Column {answer} is fine, but column {want} is too: both columns of a pair share one period.")
    if lam[answer] <= 2 * per_pixel:
        return failed(
            f"Column {answer} has period {lam[answer]:,.1f} positions, not more than two pixels "
            f"({2 * per_pixel:g} positions): it aliases."
        )
    return failed(f"Column {answer} is drawn honestly (period {lam[answer]:,.0f}), but an earlier column already is.")


# --------------------------------------------------------------------------- exercise: predict the alias
def alias_period(column: int, d_model: int, n_positions: int, rows: int, base: float = 10000.0) -> float:
    """The period (in positions) that naive subsampling — one position every ``k = n_positions // rows`` —
    shows for ``column``: ``k·2π / |k·ω − 2π·m|`` with ``m`` the nearest integer to ``k·ω/2π``.

    Equal to the true period ``2π/ω`` when the column is slow enough (``2π/ω > 2k``, Nyquist);
    ``inf`` when ``k·ω`` is a whole number of turns (the picture shows a constant).
    """
    d_model = check_d_model(d_model)
    column = check_int("column", column, minimum=0)
    if column >= d_model:
        raise ValueError(f"column must be a column index in 0 … d_model - 1 = {d_model - 1}, got {column}")
    n_positions = check_int("n_positions", n_positions, minimum=1)
    rows = check_int("rows", rows, minimum=1)
    if rows > n_positions:
        raise ValueError(
            f"rows must be at most n_positions = {n_positions} (one position per row at least), got {rows}"
        )
    base = check_base(base)
    k = n_positions // rows
    omega = base ** (-2 * (column // 2) / d_model)
    if 2 * math.pi / omega > 2 * k:
        return 2 * math.pi / omega
    step = k * omega
    phase = abs(step - 2 * math.pi * round(step / (2 * math.pi)))
    return math.inf if phase == 0 else k * 2 * math.pi / phase


@checker
def check_alias_period(
    answer: float | None, column: int, d_model: int, n_positions: int, rows: int, base: float = 10000.0
) -> Feedback:
    """Check a predicted *apparent* period of ``column`` in a naive picture of ``n_positions`` in ``rows`` rows."""
    if answer is None or answer is Ellipsis:
        return not_done()
    try:
        want = alias_period(column, d_model, n_positions, rows, base)
    except (TypeError, ValueError) as err:  # the exercise's settings, not the student's answer
        raise SetupError(str(err)) from err
    k = n_positions // rows
    if want == math.inf and _is_infinite(answer):
        return passed("k·ω is a whole number of turns: every sample lands on one phase, the column looks constant.")
    answer, problem = as_number(answer, "a number of positions")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    i = column // 2
    true = 2 * math.pi * base ** (2 * i / d_model)
    step = k * base ** (-2 * i / d_model)
    if close(answer, want, 0.01):
        if close(want, true, 1e-9):
            return passed(f"Column {column} is slow enough (period {true:,.0f} > 2k = {2 * k}): the picture is honest.")
        return passed(
            f"The picture shows a period of {want:,.0f} positions, not the true {true:,.1f}: each row advances "
            f"k·ω = {step:.3f} rad, which modulo 2π is {step - 2 * math.pi * round(step / (2 * math.pi)):+.3f} rad — "
            "a slow wave that is not in the table."
        )
    if close(answer, true, 0.01):
        return failed(
            f"{true:,.1f} is the true period. With one sample every k = {k} positions a period under 2k = {2 * k} "
            "cannot be drawn (Nyquist): the samples trace another, slower wave. Reduce k·ω modulo 2π."
        )
    if close(answer, want / k, 0.01):
        return failed(f"That is the apparent period in rows (samples); one row is k = {k} positions.")
    rem = step % (2 * math.pi)
    if rem > 0 and close(answer, k * 2 * math.pi / rem, 0.01):
        return failed(
            f"k·ω mod 2π = {rem:.3f} rad, but a step of {rem:.3f} rad looks like a step of "
            f"{rem - 2 * math.pi:.3f} rad: take the nearest multiple of 2π, the wave can appear to turn backwards."
        )
    if column > 1 and close(answer, alias_period(2 * column, d_model, n_positions, rows, base), 0.01):
        return failed(f"You used the column index {column} in the exponent; the pair index is i = {column} // 2 = {i}.")
    return failed(
        f"Not quite. The picture samples every k = {n_positions} // {rows} = {k} positions; each sample turns pair {i} "
        "by k·ω_i. Take that angle modulo 2π (nearest multiple) — the apparent period is k·2π / |k·ω_i − 2π·m|."
    )


# --------------------------------------------------------------------------- exercise: a base for a long context
def context_base(context: float, d_model: int) -> float:
    """The base at which the slowest pair (``i = d_model/2 − 1``) makes exactly one turn over ``context`` positions:
    ``2π·base^((d_model−2)/d_model) = context``, so ``base = (context/2π)^(d_model/(d_model−2))``."""
    return (context / (2 * math.pi)) ** (d_model / (d_model - 2))


@checker
def check_context_base(answer: float | None, context: float = 1_000_000, d_model: int = 128) -> Feedback:
    """Check the base whose slowest pair has a wavelength of exactly ``context`` positions, to 3 significant digits."""
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_number(answer, "a base (a number)")
    if problem is not None:
        return problem
    assert answer is not None  # set whenever problem is None
    want = context_base(context, d_model)
    if abs(answer - want) <= 5e-3 * want:
        return passed(
            f"base ≈ {want:,.0f}: the slowest pair then turns exactly once in {context:,.0f} positions, so its angle "
            "alone tells every position of the context apart. This criterion is a floor, not a recipe: Llama 3 uses "
            f"500,000 for 131,072 positions, where it gives only {context_base(131072, 128):,.0f}."
        )
    slips = {
        context / (2 * math.pi): "That base makes pair i = d_model/2 turn once; the last pair is i = d_model/2 − 1.",
        context ** (d_model / (d_model - 2)): "The wavelength is 2π/ω, not 1/ω: the factor 2π is missing.",
        context: "With base = context the slowest pair's wavelength is 2π·base^((d_model−2)/d_model), not context.",
        (context / (2 * math.pi)) ** ((d_model - 2) / d_model): "The exponent is upside down: solve "
        "2π·base^((d_model−2)/d_model) = context for base.",
    }
    for value, message in slips.items():
        if abs(answer - value) <= 5e-3 * abs(value):
            return failed(message)
    if answer <= 1:
        return failed("A base must be above 1: the frequencies base^(-2i/d_model) then fall from 1 towards 1/base.")
    lam = 2 * math.pi * answer ** ((d_model - 2) / d_model)
    return failed(
        f"With base {answer:,.6g} the slowest pair's wavelength is {lam:,.0f} positions, not {context:,.0f} "
        "(to 3 significant digits). Write its wavelength as a function of the base and solve for it."
    )
