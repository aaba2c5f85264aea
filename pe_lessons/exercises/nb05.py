"""Checkers for the exercises of notebook 05 (the linear-offset property)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..offsets import offset_blocks, offset_matrix
from ..sinusoidal import sinusoidal_table
from . import _feedback
from ._feedback import (
    Feedback,
    as_integer,
    attempt,
    checker,
    describe_error,
    failed,
    is_placeholder,
    not_done,
    passed,
    precision,
    time_limit,
)

__all__ = ["check_pair_block", "check_concat_offset", "check_shift", "check_return_offset"]


def _as_matrix(answer: object) -> torch.Tensor | None:
    """The answer as a float64 CPU tensor, or None if it is not an array of real numbers."""
    if isinstance(answer, (str, bytes)):
        return None
    try:
        if isinstance(answer, torch.Tensor):
            if answer.is_complex() or answer.device.type == "meta":
                return None
            answer = answer.detach().cpu()
        if not isinstance(answer, torch.Tensor) and type(answer).__module__.split(".")[0] != "numpy":
            answer = torch.as_tensor(answer, dtype=torch.float64)  # a Python list: keep its float64 values
        m = torch.as_tensor(answer)
        if m.is_complex() or m.dtype == torch.bool:
            return None
        m = m.to(torch.float64)
    except Exception:  # nested lists of text, ragged lists, objects, huge ints …
        return None
    return m


def _same(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-6) -> bool:
    return a.shape == b.shape and bool((a - b).abs().max() <= tol)


@checker
def check_pair_block(answer: object, k: int = 3, i: int = 1, d_model: int = 8, base: float = 10000.0) -> Feedback:
    """Check the 2×2 block of ``M_k`` for pair ``i``: it maps ``(sin a, cos a)`` to ``(sin(a+b), cos(a+b))``, ``b = k·ω_i``."""
    if is_placeholder(answer):
        return not_done()
    m = _as_matrix(answer)
    if m is None or m.shape != (2, 2):
        shape = list(m.shape) if m is not None else type(answer).__name__
        return failed(f"Answer with a 2×2 matrix (a list of two rows of two real numbers), got {shape}.")
    if not bool(torch.isfinite(m).all()):
        return failed(
            f"Your matrix holds NaN or inf ({m.tolist()}): every entry of a rotation is a cos or sin, in [−1, 1]."
        )
    omega = base ** (-2 * i / d_model)
    b = k * omega
    want = offset_blocks(k, d_model, base)[i]
    if _same(m, want):
        return passed(
            f"That is block {i} of M_{k}: a rotation by b = k·ω_{i} = {b:.4f} rad, with cos b on the diagonal."
        )
    if _same(m, want.T):
        return failed(
            "This is the transpose, i.e. the block of M_(−k): it moves backwards. Read the first row off "
            "sin(a+b) = sin a·cos b + cos a·sin b: it is (cos b, sin b), acting on (sin a, cos a)."
        )
    c, s = m[0, 0].item(), m[0, 1].item()
    rotation_form = _same(m, torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
    if _same(m, torch.tensor([[c, s], [s, c]], dtype=torch.float64)) or _same(
        m, torch.tensor([[c, -s], [-s, c]], dtype=torch.float64)
    ):
        if abs(s) > 1e-6:
            return failed(
                "A sign is wrong: the two off-diagonal entries must be opposite (+sin b above, −sin b below), "
                "from cos(a+b) = cos a·cos b − sin a·sin b."
            )
    if _same(m, torch.tensor([[math.sin(b), math.cos(b)], [-math.cos(b), math.sin(b)]], dtype=torch.float64)):
        return failed(
            "sin and cos are swapped: cos b belongs on the diagonal (at b = 0 the block must be the identity)."
        )
    if rotation_form and abs(c * c + s * s - 1) < 1e-6:
        got = math.atan2(s, c)
        candidates = {
            "degrees": [math.radians(b), math.degrees(b)],
            "no k": [omega],
            "column index": [k * base ** (-2 * (2 * i) / d_model)],
            "pair 0": [float(k)],
            "exponent i/d": [k * base ** (-i / d_model)],
        }
        for name, angles in candidates.items():
            if any(abs(math.remainder(got - ang, 2 * math.pi)) < 1e-6 for ang in angles):
                return failed(
                    {
                        "degrees": "The angle looks converted between degrees and radians: math.cos and torch.cos work in "
                        f"radians, and b = k·ω_{i} = {b:.4f} is already in radians.",
                        "no k": f"You rotated by ω_{i} = {omega:.4f}, one position's worth: the offset is k = {k}, so b = k·ω_{i}.",
                        "column index": f"The frequency uses the column index 2i = {2 * i} in place of the pair index i = {i}: "
                        f"ω_i = base^(−2i/d_model).",
                        "pair 0": f"You rotated by k = {k} rad, the angle of pair 0 (ω_0 = 1); pair {i} turns by k·ω_{i}.",
                        "exponent i/d": "The exponent is i/d_model; the paper's is 2i/d_model.",
                    }[name]
                )
        return failed(
            f"The form is right (a rotation) but the angle is {got:.4f} rad; it should be b = k·ω_{i} = {b:.4f}."
        )
    return failed(
        f"Expected [[cos b, sin b], [−sin b, cos b]] with b = k·ω_{i} = {b:.4f}; "
        f"your top-left entry is {c:.4f} (cos b = {math.cos(b):.4f})."
    )


class _TrigCalled(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


#: What ``my_shift`` may not call, by module: sin and cos, and every way back to the angle itself.
_FORBIDDEN = {
    "math": ("sin", "cos", "atan", "atan2", "asin", "acos", "exp"),
    "cmath": ("sin", "cos", "exp", "phase", "polar", "rect", "atan", "asin", "acos", "log"),
    "torch": (
        "sin",
        "cos",
        "atan",
        "atan2",
        "arctan",
        "arctan2",
        "asin",
        "acos",
        "arcsin",
        "arccos",
        "angle",
        "polar",
        "exp",
        "log",
    ),
    "torch.Tensor": (
        "sin",
        "cos",
        "atan",
        "atan2",
        "arctan",
        "arctan2",
        "asin",
        "acos",
        "arcsin",
        "arccos",
        "angle",
        "exp",
        "log",
    ),
    "numpy": ("sin", "cos", "arctan", "arctan2", "arcsin", "arccos", "angle", "exp", "log"),
}


@contextmanager
def _no_trig() -> Iterator[None]:
    """Make sin/cos — and atan2, angle, exp, polar … (ways to recover or reuse the angle) — of math, cmath,
    torch (functions and Tensor methods) and numpy raise while a student function runs."""
    import cmath

    import numpy as np

    modules = {"math": math, "cmath": cmath, "torch": torch, "torch.Tensor": torch.Tensor, "numpy": np}

    def forbidden(label: str) -> Callable[..., object]:
        def call(*args: object, **kwargs: object) -> object:
            raise _TrigCalled(label)

        return call

    saved = [
        (modules[mod], name, getattr(modules[mod], name))
        for mod, names in _FORBIDDEN.items()
        for name in names
        if hasattr(modules[mod], name)
    ]
    try:
        for obj, name, _ in saved:
            label = f"{'x.' if obj is torch.Tensor else getattr(obj, '__name__', '') + '.'}{name}"
            setattr(obj, name, forbidden(label))
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


@checker
def check_shift(
    my_shift: Callable[[torch.Tensor, torch.Tensor], object] | None, d_models: tuple[int, ...] = (8, 2, 12, 6)
) -> Feedback:
    """Check ``my_shift(pe_pos, pe_k) -> PE(pos + k)`` on several (pos, k) and widths, without sin or cos.

    ``pe_pos`` and ``pe_k`` are float64 rows of the table. While ``my_shift`` runs, sin and cos of
    ``math``/``cmath``/``torch``/``numpy`` raise, and so do the detours through the angle (``atan2``,
    ``angle``, ``exp``, ``polar`` …), so a solution that calls them is told so.
    """
    if is_placeholder(my_shift):
        return not_done()
    if not callable(my_shift):
        return failed(f"my_shift must be a function (pe_pos, pe_k) -> row; got {type(my_shift).__name__}.")
    checked = 0
    for d_model in d_models:
        result = _check_shift_width(my_shift, d_model)
        if result is not None:
            return result
        checked += 1
    return passed(
        f"my_shift gives PE(pos + k) for 5 (pos, k) at each of {checked} widths (d_model = "
        f"{', '.join(map(str, d_models))}), using only products and sums of PE(pos) and PE(k)."
    )


def _check_shift_width(my_shift: Callable[[torch.Tensor, torch.Tensor], object], d_model: int) -> Feedback | None:
    """None when ``my_shift`` is right for every (pos, k) at this width, else the feedback."""
    table = sinusoidal_table(200, d_model, dtype=torch.float64)
    cases = [(5, 3), (17, 40), (0, 9), (120, 1), (33, 33)]
    swap = torch.arange(d_model).view(-1, 2).flip(-1).reshape(-1)
    for pos, k in cases:
        try:
            with _no_trig(), time_limit(_feedback.TIME_LIMIT):  # a loop that never ends: feedback (via @checker)
                got = my_shift(table[pos].clone(), table[k].clone())
        except _TrigCalled as called:
            if called.name.split(".")[-1] in ("sin", "cos"):
                return failed(
                    f"Your function calls {called.name}. It does not need to: PE(k) already holds sin(k·ω_i) "
                    "(column 2i) and cos(k·ω_i) (column 2i+1), the entries of M_k."
                )
            return failed(
                f"Your function calls {called.name}: it goes back to the angles (or through them), which is sin and "
                "cos in disguise. Stay with the stored numbers: angle addition needs only products and sums of "
                "the two sines and two cosines of each pair."
            )
        except (Exception, SystemExit) as err:  # show the student their own error, briefly
            return describe_error(f"my_shift(PE({pos}), PE({k}))", err)
        row = _as_matrix(got)
        if row is None:
            kind = type(got).__name__
            return failed(f"my_shift must return a row of {d_model} real numbers (tensor or list), got {kind}.")
        tol = max(1e-9, 16 * precision(got))  # a float32 row is compared at float32 precision
        got = row.reshape(-1)
        want = table[pos + k]
        if got.numel() != d_model:
            return failed(
                f"With rows of d_model = {d_model}, my_shift returned {got.numel()} numbers: it must work for any "
                "even width (take the sizes from the rows you are given)."
            )
        if not bool(torch.isfinite(got).all()):
            return failed(f"For pos = {pos}, k = {k}: your row holds NaN or inf; PE(pos + k) holds sines and cosines.")
        if _same(got, want, tol):
            continue
        where = f"For pos = {pos}, k = {k}, d_model = {d_model}: "
        if _same(got, table[pos] + table[k], tol):
            return failed(
                where + "you added the rows. Adding encodings does not add positions: PE(pos)+PE(k) is not "
                "PE(pos+k). Rotate each pair of PE(pos) by the angle stored in the same pair of PE(k)."
            )
        if _same(got, table[pos] * table[k], tol):
            return failed(
                where + "you multiplied the rows entry by entry; each new entry needs both the sin and the cos "
                "of its pair (angle addition), e.g. sin(a+b) = sin a·cos b + cos a·sin b."
            )
        if pos - k >= 0 and _same(got, table[pos - k], tol):
            return failed(where + "you got PE(pos − k): a sign is flipped (you applied M_kᵀ = M_(−k)).")
        if _same(got[swap], want, tol):
            return failed(
                where + "sin and cos are swapped in your result: column 2i is sin(a+b), column 2i+1 is cos(a+b)."
            )
        first = int((got - want).abs().argmax())
        return failed(where + f"(d_model = {d_model}) column {first} of your row is wrong.")
    return None


def _concat_permutation(d_model: int) -> torch.Tensor:
    """Column j of the concatenated table is column ``perm[j]`` of the paper's: sines first, then cosines."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


@checker
def check_concat_offset(
    my_concat_offset: Callable[..., object] | None,
    cases: tuple[tuple[int, int], ...] = ((8, 3), (2, 1), (12, -5), (6, 40)),
) -> Feedback:
    """Check ``my_concat_offset(k, d_model, base)``: the matrix ``M`` with ``PE_c(pos + k) = M PE_c(pos)`` for the
    concatenated ``[sin | cos]`` layout, i.e. ``M_k`` with rows and columns permuted (``M_k[perm][:, perm]``).

    Probed at several ``(d_model, k)`` and one other base, so a matrix written for one width fails.
    """
    if is_placeholder(my_concat_offset):
        return not_done()
    for d_model, k in (*cases, (10, 7)):
        base = 100.0 if d_model == 10 else 10000.0
        label = f"my_concat_offset({k}, {d_model}, base={base:g})"
        got, problem = attempt(label, my_concat_offset, k, d_model, base)
        if problem is not None:
            return problem
        m = _as_matrix(got)
        if m is None or m.shape != (d_model, d_model):
            shape = list(m.shape) if m is not None else type(got).__name__
            return failed(f"{label} must return a [{d_model}, {d_model}] matrix of real numbers, got {shape}.")
        if not bool(torch.isfinite(m).all()):
            return failed(f"{label} holds NaN or inf: every entry is a cos, a sin or 0.")
        perm = _concat_permutation(d_model)
        paper = offset_matrix(k, d_model, base)
        want = paper[perm][:, perm]
        if _same(m, want, 1e-9):
            continue
        table = sinusoidal_table(64, d_model, base=base, dtype=torch.float64)[:, perm]
        start, end = (table[: 64 - k], table[k:]) if k >= 0 else (table[-k:], table[: 64 + k])
        if _same(start @ m.T, end, 1e-9):  # pragma: no cover - M is unique when the columns span the space
            continue
        if d_model > 2 and _same(m, paper, 1e-9):
            return failed(
                f"{label}: that is M_k of the paper's interleaved layout. In the concatenated layout pair i is "
                f"columns (i, i + d_model/2), so each block's four entries move."
            )
        if _same(m, want.T, 1e-9):
            return failed(f"{label}: this moves backwards (it is M_(−k)): check the signs of the sin entries.")
        if _same(m.abs(), want.abs(), 1e-9):
            return failed(f"{label}: the entries sit in the right places, but some signs are wrong.")
        return failed(
            f"{label} does not map PE_c(pos) to PE_c(pos + {k}). Derive one pair: sin(a+b) = sin a·cos b + "
            "cos a·sin b; then find the columns that hold sin a and cos a in the concatenated row."
        )
    return passed(
        "Right at every width and offset tried: the blocks of M_k are spread over the columns (i, i + d/2), "
        "i.e. M_k with its rows and columns permuted the same way as the table."
    )


def _distance(k: int) -> float:
    """How far pair 0 lands from its start after an offset k: |PE(pos+k) − PE(pos)| over columns 0, 1 = 2|sin(k/2)|."""
    return 2 * abs(math.sin(k / 2))


@checker
def check_return_offset(answer: object, max_offset: int = 100) -> Feedback:
    """Check the offset ``k`` in ``1 ≤ k ≤ max_offset`` after which pair 0 comes back closest to where it started.

    Pair 0 turns by ``k·ω_0 = k`` radians (``ω_0 = 1`` for every d_model and base), so its block
    of ``M_k`` is closest to the identity, and ``(sin, cos)`` closest to its start (distance
    ``2|sin(k/2)|``, the same for every pos), when ``k`` is nearest a multiple of ``2π``.
    """
    if is_placeholder(answer):
        return not_done()
    k, problem = as_integer(answer, f"an integer offset k between 1 and {max_offset}")
    if problem is not None:
        value = answer.item() if isinstance(answer, torch.Tensor) and answer.numel() == 1 else answer
        if (
            isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value != 0
            and abs(float(value) / (2 * math.pi) - round(float(value) / (2 * math.pi))) < 1e-3
        ):
            return failed(
                "That is a multiple of 2π, but offsets are whole numbers of positions: k must be an integer, "
                "and no integer is exactly a multiple of 2π."
            )
        return problem
    assert k is not None  # set whenever problem is None
    if not 1 <= k <= max_offset:
        return failed(f"k = {k} is outside the search range 1 ≤ k ≤ {max_offset}.")
    best = min(range(1, max_offset + 1), key=_distance)
    if k == best:
        return passed(
            f"k = {best}: pair 0 turns by {best} rad = {best / (2 * math.pi):.4f} full turns and lands "
            f"{_distance(best):.4f} from its start (2π ≈ {best}/{round(best / (2 * math.pi))})."
        )
    miss = math.remainder(k, 2 * math.pi)
    if k in (6, 7):
        return failed(
            f"k = {k} is about one turn (2π ≈ 6.283) but misses a whole turn by {abs(miss):.3f} rad "
            f"(distance {_distance(k):.3f}). Several turns can fit an integer much better: look for k/2π "
            "close to a whole number."
        )
    if k % best == 0:
        return failed(
            f"k = {k} comes back close (distance {_distance(k):.4f}), but some k in 1 … {max_offset} comes back "
            "closer: compute the distance for every k."
        )
    return failed(
        f"After k = {k} the pair is {abs(miss):.3f} rad from a whole number of turns (distance "
        f"{_distance(k):.4f}); some k in 1 … {max_offset} does much better. Compute the distance for every k."
    )
