"""Checkers for the exercises of notebook 05 (the linear-offset property)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from ..offsets import offset_blocks
from ..sinusoidal import sinusoidal_table
from . import _feedback
from ._feedback import (
    Feedback,
    as_integer,
    checker,
    describe_error,
    failed,
    is_placeholder,
    not_done,
    passed,
    time_limit,
)

__all__ = ["check_pair_block", "check_shift", "check_return_offset"]


def _as_matrix(answer: object) -> torch.Tensor | None:
    """The answer as a float64 CPU tensor, or None if it is not an array of real numbers."""
    if isinstance(answer, (str, bytes)):
        return None
    try:
        if isinstance(answer, torch.Tensor):
            if answer.is_complex() or answer.device.type == "meta":
                return None
            answer = answer.detach().cpu()
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
    pass


@contextmanager
def _no_trig() -> Iterator[None]:
    """Make sin/cos of math, torch (functions and Tensor methods) and numpy raise while a student function runs."""
    import numpy as np

    def forbidden(*args, **kwargs):
        raise _TrigCalled

    targets = [
        (math, "sin"),
        (math, "cos"),
        (torch, "sin"),
        (torch, "cos"),
        (torch.Tensor, "sin"),
        (torch.Tensor, "cos"),
        (np, "sin"),
        (np, "cos"),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name in targets]
    try:
        for obj, name, _ in saved:
            setattr(obj, name, forbidden)
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


@checker
def check_shift(my_shift: Callable[[torch.Tensor, torch.Tensor], object] | None, d_model: int = 8) -> Feedback:
    """Check ``my_shift(pe_pos, pe_k) -> PE(pos + k)`` on several (pos, k), without sin or cos.

    ``pe_pos`` and ``pe_k`` are float64 rows of the table. While ``my_shift`` runs,
    ``math``/``torch``/``numpy`` sin and cos raise, so a solution that calls them is told so.
    """
    if is_placeholder(my_shift):
        return not_done()
    if not callable(my_shift):
        return failed(f"my_shift must be a function (pe_pos, pe_k) -> row; got {type(my_shift).__name__}.")
    table = sinusoidal_table(200, d_model, dtype=torch.float64)
    cases = [(5, 3), (17, 40), (0, 9), (120, 1), (33, 33)]
    swap = torch.arange(d_model).view(-1, 2).flip(-1).reshape(-1)
    for pos, k in cases:
        try:
            with _no_trig(), time_limit(_feedback.TIME_LIMIT):  # a loop that never ends: feedback (via @checker)
                got = my_shift(table[pos].clone(), table[k].clone())
        except _TrigCalled:
            return failed(
                "Your function calls sin or cos. It does not need to: PE(k) already holds sin(k·ω_i) "
                "(column 2i) and cos(k·ω_i) (column 2i+1), the entries of M_k."
            )
        except (Exception, SystemExit) as err:  # show the student their own error, briefly
            return describe_error(f"my_shift(PE({pos}), PE({k}))", err)
        row = _as_matrix(got)
        if row is None:
            kind = type(got).__name__
            return failed(f"my_shift must return a row of {d_model} real numbers (tensor or list), got {kind}.")
        got = row.reshape(-1)
        want = table[pos + k]
        if got.numel() != d_model:
            return failed(f"my_shift returned {got.numel()} numbers; a row has d_model = {d_model}.")
        if not bool(torch.isfinite(got).all()):
            return failed(f"For pos = {pos}, k = {k}: your row holds NaN or inf; PE(pos + k) holds sines and cosines.")
        if _same(got, want, 1e-9):
            continue
        where = f"For pos = {pos}, k = {k}: "
        if _same(got, table[pos] + table[k], 1e-9):
            return failed(
                where + "you added the rows. Adding encodings does not add positions: PE(pos)+PE(k) is not "
                "PE(pos+k). Rotate each pair of PE(pos) by the angle stored in the same pair of PE(k)."
            )
        if _same(got, table[pos] * table[k], 1e-9):
            return failed(
                where + "you multiplied the rows entry by entry; each new entry needs both the sin and the cos "
                "of its pair (angle addition), e.g. sin(a+b) = sin a·cos b + cos a·sin b."
            )
        if pos - k >= 0 and _same(got, table[pos - k], 1e-9):
            return failed(where + "you got PE(pos − k): a sign is flipped (you applied M_kᵀ = M_(−k)).")
        if _same(got[swap], want, 1e-9):
            return failed(
                where + "sin and cos are swapped in your result: column 2i is sin(a+b), column 2i+1 is cos(a+b)."
            )
        first = int((got - want).abs().argmax())
        return failed(where + f"column {first} is {got[first].item():.6f}, expected {want[first].item():.6f}.")
    return passed(
        f"my_shift gives PE(pos + k) for all {len(cases)} cases, using only products and sums of PE(pos) and PE(k)."
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
            f"k = {k} comes back close (distance {_distance(k):.4f}), but a smaller k comes back even closer: "
            "the error grows with each repetition."
        )
    return failed(
        f"After k = {k} the pair is {abs(miss):.3f} rad from a whole number of turns (distance "
        f"{_distance(k):.4f}); some k in 1 … {max_offset} does much better. Compute the distance for every k."
    )
