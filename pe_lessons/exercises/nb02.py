"""Checkers for the exercises of notebook 02 (vectorized torch tables)."""

from __future__ import annotations

import decimal
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from ..sinusoidal import BLOCK, inverse_frequencies, sinusoidal_table
from ._feedback import Feedback, _short, as_number, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = ["check_table_function", "check_window_table", "check_precision_fix"]


# --------------------------------------------------------------------------- what a checker can enforce
def _library_roots() -> tuple[str, ...]:
    """Folders whose code is not the student's: the Python installation, site-packages, this package."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(torch.__file__).parent.parent)}
    roots.add(str(Path(__file__).resolve().parent.parent))
    return tuple(sorted(r for r in roots if r))


def _traced(fn: Callable[..., object], *args: object) -> Callable[[], tuple[object, int]]:
    """A call of ``fn(*args)`` that also counts the lines the student's own code runs (their loops repeat lines)."""
    roots = _library_roots()

    def run() -> tuple[object, int]:
        count = 0
        previous = sys.gettrace()  # e.g. the time limit's own tracer off the main thread: keep calling it

        def local(frame, event, arg):  # noqa: ANN001, ANN202
            nonlocal count
            if event == "line":
                count += 1
            if previous is not None:
                previous(frame, event, arg)
            return local

        def watch(frame, event, arg):  # noqa: ANN001, ANN202
            if previous is not None:
                previous(frame, event, arg)
            name = frame.f_code.co_filename
            if name.startswith(roots) or name.startswith("<frozen"):
                return None
            return local

        sys.settrace(watch)
        try:
            result = fn(*args)
        finally:
            sys.settrace(previous)
        return result, count

    return run


class _LargestTensor(TorchFunctionMode):
    """Records the largest number of elements of any tensor a torch function returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        for value in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


def _measured(fn: Callable[..., object], *args: object) -> Callable[[], tuple[object, int]]:
    """A call of ``fn(*args)`` that also returns the largest tensor (in elements) it made."""

    def run() -> tuple[object, int]:
        with _LargestTensor() as mode:
            result = fn(*args)
        return result, mode.largest

    return run


def _loops_over_positions(label: str, fn: Callable[..., object], small: tuple, large: tuple) -> Feedback | None:
    """Feedback when ``fn`` runs more lines of the student's code for ``large`` than for ``small`` (a loop)."""
    counts = []
    for args in (small, large):
        out, problem = attempt(f"{label}{args}", _traced(fn, *args))
        if problem is not None:  # errors are reported by the main calls, with the exercise's own sizes
            return None if " raised " in problem.message else problem  # a stub or a loop that never ends: now
        assert out is not None  # _traced's call returns a pair
        counts.append(out[1])
    if counts[1] > counts[0] + 50:
        return failed(
            f"{label} runs {counts[0]:,} lines of your code for {small} but {counts[1]:,} for {large}: a Python "
            "loop over positions. Vectorize it: one tensor of positions, one of frequencies, broadcasting."
        )
    return None


def _table_problem(label: str, table: object, shape: tuple[int, int], start: int = 0) -> Feedback | None:
    """Feedback when ``table`` is not a finite float32 tensor of ``shape`` (rows ``start …``) with values."""
    if not isinstance(table, torch.Tensor):
        return failed(f"{label} must return a torch.Tensor, got {_short(table)}.")
    if tuple(table.shape) != shape:
        got = f"{label} returned shape {tuple(table.shape)}; expected {shape}"
        n, d = shape
        if table.dim() != 2:
            return failed(f"{got}: one row per position, d_model columns.")
        if table.shape[0] != n:
            return failed(f"{got}: the window is the rows of positions start … start + n − 1, that is n = {n} rows.")
        cols = table.shape[1]
        if cols % 2 == 0 and cols > 0 and table.is_floating_point() and table.device.type != "meta":
            other = _exact_window(start, n, cols)
            if bool(torch.isfinite(table).all()) and (table.detach().cpu().double() - other).abs().max() < 1e-4:
                return failed(f"{got}: these are the rows for d_model = {cols}. Is d_model fixed in your code?")
        if cols == d // 2:
            return failed(f"{got}: half the columns. Did the sin/cos interleaving keep both halves?")
        return failed(f"{got}: one column per feature, d_model = {d} columns.")
    if table.device.type == "meta":
        return failed(f"{label} returned a tensor on the meta device: it has a shape but no values.")
    if table.dtype != torch.float32:
        return failed(
            f"{label} returned dtype {table.dtype}; the exercise asks for a float32 table (what a model adds to "
            "its float32 embeddings)."
        )
    if not bool(torch.isfinite(table).all()):
        return failed(f"{label} holds NaN or inf values: sin and cos are always finite.")
    return None


@checker
def check_table_function(
    my_table: Callable[[int, int], torch.Tensor] | None, max_len: int = 70000, d_model: int = 16
) -> Feedback:
    """Check ``my_table(max_len, d_model)``: vectorized (no Python loop over positions), float32, the
    paper's layout, and within 5e-7 of the exact values out to large positions.

    No notebook calls it since notebook 02's exercises became the window and the half-done fix; it stays public for
    the generic feedback tests (tests/exercises/test_feedback.py) and as a checker for a whole-table answer."""
    if is_placeholder(my_table):
        return not_done()
    problem = _loops_over_positions("my_table", my_table, (200, d_model), (1600, d_model))
    if problem is not None:
        return problem
    table, problem = attempt(f"my_table({max_len}, {d_model})", my_table, max_len, d_model)
    if problem is not None:
        return problem
    if not isinstance(table, torch.Tensor):
        return failed(f"my_table must return a torch.Tensor, got {type(table).__name__}.")
    if tuple(table.shape) != (max_len, d_model):
        return failed(
            f"Shape {tuple(table.shape)}; expected (max_len, d_model) = ({max_len}, {d_model}). "
            "Did the sin/cos interleaving keep both halves?"
        )
    if not table.is_floating_point():
        return failed(f"dtype {table.dtype}: a table of sines needs a floating dtype.")
    if table.device.type == "meta":
        return failed(
            "my_table returned a tensor on the meta device: it has a shape but no values. Build it on the CPU."
        )
    if table.dtype != torch.float32:
        return failed(
            f"dtype {table.dtype}: the exercise asks for a float32 table (what a model adds to its embeddings)."
        )
    table = table.detach().cpu().double()
    finite = torch.isfinite(table)
    if not bool(finite.all()):
        pos, col = (int(v) for v in (~finite).nonzero()[0])
        return failed(
            f"The table holds {int((~finite).sum())} NaN/inf entries, the first at position {pos}, "
            f"column {col} ({table[pos, col].item()}): sin and cos are always finite — look for a "
            "division by zero or 0 * inf."
        )
    exact = sinusoidal_table(max_len, d_model, dtype=torch.float64)
    near = (table[:1000] - exact[:1000]).abs().max().item()
    if near > 1e-4:
        if torch.allclose(table[:1000, 0::2], table[:1000, 1::2]):
            return failed("Your odd columns equal your even ones: sin where cos belongs?")
        if torch.allclose(table[:1000, 0::2], exact[:1000, 1::2], atol=1e-4):
            return failed("sin and cos are swapped: sin goes in the even columns, cos in the odd ones.")
        if torch.allclose(table[:1000, : d_model // 2], exact[:1000, 0::2], atol=1e-4):
            return failed(
                "You concatenated [sin | cos] halves; this exercise asks for the paper's interleaved layout "
                "(sin at 2i, cos at 2i+1) — einops.rearrange(..., 'two pos i -> pos (i two)') does it."
            )
        return failed(
            f"Off by up to {near:.2g} in the first 1000 positions: check the frequencies base**(-2i/d_model)."
        )
    far = (table - exact).abs().max().item()
    if far > 5e-7:
        worst = int((table - exact).abs().amax(dim=1).argmax())
        return failed(
            f"Right near 0, but off by {far:.1g} at position {worst}: some step rounds to float32 before sin and "
            "cos. Which numbers in your code are large, and how far apart are neighbouring float32 values there?"
        )
    return passed(f"Correct: within 5e-7 of the exact values at every position up to {max_len - 1}.")


# --------------------------------------------------------------------------- exercise: a window of the table
#: (start, n, d_model) windows an answer to :func:`check_window_table` is tried on, one of a single row, the last past 2^24.
WINDOW_CASES = [
    (0, 100, 16),
    (65_000, 64, 16),
    (1_000_000, 32, 64),
    (10_000_000, 16, 8),
    (10_000_000, 1, 8),  # one new token: the cached decode itself (a squeezed row loses its dimension)
    (2**24 + 1, 8, 6),
]


#: The largest error of a table whose only error is its final rounding to float32: half a float32 step near 1
#: (2^-25), plus the float64 noise of angles computed another way (pos·2^-52 ≤ 4e-9 below 2^24).
_ONE_ROUNDING = 2.0**-25 + 1e-8


def _package_window(start: int, n: int, d_model: int) -> torch.Tensor:
    """Rows ``start … start+n−1`` of ``sinusoidal_table(start + n, d_model)``, bit for bit, built from the blocks
    the window touches only (pos = qB + r: the same float64 sub-table entries, the same float32 products and sums)."""
    pos = torch.arange(start, start + n, dtype=torch.int64)
    q, r = (pos // BLOCK).double()[:, None], (pos % BLOCK).double()[:, None]
    omega = inverse_frequencies(d_model)
    sin_c, cos_c = torch.sin(q * (BLOCK * omega)).float(), torch.cos(q * (BLOCK * omega)).float()
    sin_f, cos_f = torch.sin(r * omega).float(), torch.cos(r * omega).float()
    return torch.stack((sin_c * cos_f + cos_c * sin_f, cos_c * cos_f - sin_c * sin_f), dim=-1).flatten(1)


def _exact_window(start: int, n: int, d_model: int) -> torch.Tensor:
    pos = torch.arange(start, start + n, dtype=torch.float64)[:, None]
    angles = pos * inverse_frequencies(d_model)[None, :]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)


@checker
def check_window_table(window_table: Callable[[int, int, int], torch.Tensor] | None) -> Feedback:
    """Check ``window_table(start, n, d_model)``: the rows ``start … start+n−1`` of ``sinusoidal_table``, bit for bit
    (what a cached decode adds must equal the full-sequence table), float32, vectorized, for ``start`` up to past
    2^24, without building the rows before ``start``.

    Tried on :data:`WINDOW_CASES`; a Python loop over positions is detected by counting the lines of the
    student's code run for two window sizes, a table of all rows ``0 … start`` by the largest tensor made.
    Rows off by more than 5e-7 get the diagnosis of their precision loss; rows within 5e-7 that are not
    ``sinusoidal_table``'s bits (e.g. the float64 values rounded once) are told so.
    """
    if is_placeholder(window_table):
        return not_done()
    problem = _loops_over_positions("window_table", window_table, (5000, 100, 8), (5000, 800, 8))
    if problem is not None:
        return problem
    probe = (200_000, 16, 8)
    out, problem = attempt(f"window_table{probe}", _measured(window_table, *probe))
    if problem is not None:
        return problem
    assert out is not None  # _measured's call returns a pair
    if out[1] > 64 * probe[1] * probe[2]:
        return failed(
            f"window_table{probe} made a tensor of {out[1]:,} values for a window of {probe[1] * probe[2]}: it "
            "builds the rows before `start` too. At start = 10^7 that is gigabytes; compute the window's rows only."
        )
    worst: tuple[str, float, int, int, int, torch.Tensor] | None = None
    wrong: tuple[str, float, int] | None = None  # the first window whose error no float32 rounding explains
    errors, rows = [], []
    for start, n, d in WINDOW_CASES:
        label = f"window_table({start}, {n}, {d})"
        table, problem = attempt(label, window_table, start, n, d)
        if problem is not None:
            return problem
        problem = _table_problem(label, table, (n, d), start)
        if problem is not None:
            return problem
        assert isinstance(table, torch.Tensor)  # _table_problem checked it
        rows.append(table.detach().cpu())
        got = rows[-1].double()
        exact = _exact_window(start, n, d)
        off = (got - exact).abs().max().item()
        errors.append(off)
        if off > 5e-7:
            for shift, first, final in ((1, "start+1", "start+n"), (-1, "start−1", "start+n−2")):
                if (got - _exact_window(start + shift, n, d)).abs().max().item() < 1e-4:
                    return failed(
                        f"{label}: your rows are positions {first} … {final}, one off. Row k of the window is "
                        "position start + k, for k = 0 … n − 1."
                    )
            if start == 0 and off > 1e-4:
                if torch.allclose(got[:, 0::2], got[:, 1::2]):
                    return failed(f"{label}: the odd columns equal the even ones — sin where cos belongs?")
                if torch.allclose(got[:, 0::2], exact[:, 1::2], atol=1e-4):
                    return failed(f"{label}: sin and cos are swapped — sin goes in column 2i, cos in 2i+1.")
                if torch.allclose(got[:, 0::2], -exact[:, 0::2], atol=1e-4) and torch.allclose(
                    got[:, 1::2], exact[:, 1::2], atol=1e-4
                ):
                    return failed(
                        f"{label}: the cos columns are right, the sin columns are −sin. A sign in the identity for "
                        "sin(a + b)?"
                    )
                return failed(
                    f"{label} is off by {off:.2g} already: check the layout (sin at 2i, cos at 2i+1) "
                    "and the frequencies base^(-2i/d_model)."
                )
            if worst is None or off > worst[1]:
                worst = (label, off, start, n, d, got)
            if wrong is None and off * 2**24 > start + n:
                wrong = (label, off, start + n)
    if worst is not None:
        label, off, start, n, d, got = worst
        rel = _omega_probe(window_table, d)
        if rel is not None:
            return failed(
                f"{label} is off by {off:.1g}. The angle error is zero in pair 0 and, in every other pair, the "
                f"same multiple of pos at positions 10^5 and 10^6 alike: every angle is pos times a number that is "
                f"off by a relative {rel:.1g}. Which number is that, and in which dtype was it made?"
            )
        if wrong is not None:
            # a rounding moves x by at most x·2^-24, and no number in a window's computation need exceed its largest
            # angle, (start + n)·ω_0 = start + n: a larger error is a wrong value (a sign, a missing factor), not a rounding
            label, off, largest_angle = wrong
            return failed(
                f"{label} is off by {off:.2g}: that is no float32 rounding. Rounding moves a number x by at most "
                f"x·2^-24, so it would take a number of about {off * 2**24:.2g}, and the largest angle this window needs "
                f"is about {largest_angle:.2g} rad. The values are wrong, not rounded: check how pos splits into q and "
                "r (pos = qB + r), which angle each small table holds, and the signs in the two identities."
            )
        return failed(
            f"{label} is off by {off:.1g}. Rounding a float32 number x moves it by up to x·2^-24, so an error this "
            f"large means some float32 number of about {off * 2**24:.2g} or more fed sin or cos (or the numbers "
            "they were built from). List the numbers your code forms on the way to sin/cos — positions, offsets, "
            "angles — with their sizes and dtypes."
        )
    largest = max(errors)
    differing, total, where = 0, 0, ""
    for (start, n, d), table in zip(WINDOW_CASES, rows, strict=True):
        diff = int((table != _package_window(start, n, d)).sum())
        differing, total = differing + diff, total + n * d
        if diff and not where:
            where = f"window_table({start}, {n}, {d})"
    if differing:
        if largest <= _ONE_ROUNDING:
            how = (
                f"Every window is within {largest:.3g} of the exact values: at most half a float32 step (2^-25), "
                "the exact values rounded once. sinusoidal_table's rows are not those: they carry a few float32 "
                "roundings of its own scheme (section 4)."
            )
        else:
            how = f"Every window is within {largest:.3g} of the exact values (the promise: 5e-7), but not bit for bit."
        return failed(
            f"{how} {differing} of the {total} entries differ from the rows sinusoidal_table(start + n, d_model)"
            f"[start:] has (the first in {where}), so a cached decode would add rows the full-sequence table does not "
            "have. Rebuild sinusoidal_table's own computation for these positions only, from the same numbers (its ω "
            "is inverse_frequencies(d_model)): which of its small tables does a position need, and which float32 "
            "operations combine them, in which order?"
        )
    return passed(
        f"Every window equals sinusoidal_table(start + n, d_model)[start:] bit for bit, up to start = 2^24 + 1 "
        f"(within {largest:.3g} of the exact values), with no torch tensor of the rows before start: a cached decode "
        "adds exactly the rows the full-sequence table has."
    )


#: Two windows ten times apart in position: an error made by a rounded ω grows tenfold between them, one made by a
#: rounded angle (or anything else fixed in size near one position) does not.
_OMEGA_PROBES = ((100_000, 8), (1_000_000, 8))


def _omega_probe(window_table: Callable[[int, int, int], torch.Tensor], d_model: int) -> float | None:
    """The relative error of ω when ``window_table``'s angles are ``pos·ω'`` over positions 10^5 … 10^6 (else None).

    Near one large start the rows span a tiny range of positions, so any error fixed in size there (e.g. a coarse
    angle rounded to float32) would look proportional to pos: the probe compares two starts ten times apart.
    """
    tables, positions = [], []
    for start, n in _OMEGA_PROBES:
        table, problem = attempt(f"window_table({start}, {n}, {d_model})", window_table, start, n, d_model)
        if problem is not None or not isinstance(table, torch.Tensor) or tuple(table.shape) != (n, d_model):
            return None
        if not table.is_floating_point() or table.is_complex() or table.device.type == "meta":
            return None
        if not bool(torch.isfinite(table).all()):
            return None
        tables.append(table.detach().cpu().double())
        positions.append(torch.arange(start, start + n, dtype=torch.float64))
    return _rounded_omega(torch.cat(tables), torch.cat(positions), d_model)


def _rounded_omega(table: torch.Tensor, positions: torch.Tensor, d_model: int) -> float | None:
    """The relative error of ω, when ``table``'s angles are exactly ``pos·ω'`` for an ω' off in pairs 1… only.

    That is the trace of ω rounded (e.g. made in float32) and then multiplied by exact positions: the angle
    error is zero in pair 0 (ω_0 = 1 in any dtype) and, pair by pair, the same multiple of pos in every row.
    None when the angle errors do not have that shape (float32 angles round differently in every row).
    """
    pairs = table.view(len(positions), d_model // 2, 2)
    exact = positions[:, None] * inverse_frequencies(d_model)[None, :]
    seen = torch.atan2(pairs[..., 0], pairs[..., 1])
    err = torch.remainder(seen - exact + math.pi, 2 * math.pi) - math.pi  # signed, in [-π, π)
    rows = positions > 0
    if int(rows.sum()) < 2 or positions[rows].max() < 2 * positions[rows].min():
        return None  # proportionality needs a real range of positions (a factor 2 at least)
    if d_model < 4 or err[:, 0].abs().max().item() > 1e-6 or err.abs().max() < 1e-5:
        return None
    per_pos = err[rows, 1:] / positions[rows, None]  # [row, pair]: constant down each column if ω was rounded
    noise = 1e-6 / positions[rows].min().item()  # the table's own float32 rounding, read back as an angle
    spread = (per_pos.amax(dim=0) - per_pos.amin(dim=0)).max().item()
    if spread > 0.05 * per_pos.abs().max().item() + noise:
        return None
    return (per_pos.abs().amax(dim=0) / inverse_frequencies(d_model)[1:]).max().item()


# --------------------------------------------------------------------------- exercise: debug a half-done fix
def _angle_errors(table: torch.Tensor, max_len: int, d_model: int) -> torch.Tensor:
    """``|angle read from each (sin, cos) pair − exact angle|`` wrapped to [0, π], per position and pair."""
    pairs = table.double().view(max_len, d_model // 2, 2)
    seen = torch.atan2(pairs[..., 0], pairs[..., 1])
    exact = torch.arange(max_len, dtype=torch.float64)[:, None] * inverse_frequencies(d_model)[None, :]
    return torch.remainder(seen - exact + math.pi, 2 * math.pi).sub(math.pi).abs()


#: (max_len, d_model) sizes :func:`check_precision_fix` tries after the exercise's own (a fix hard-coded for one fails).
PRECISION_SIZES = [(3000, 64), (70001, 6)]


def _classmate_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The classmate's table of the exercise: float64 positions, angles and sines, and one float32 number."""
    omega = 1 / base ** (torch.arange(0, d_model, 2) / d_model)  # int64 / int: float32, silently
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1).float()


def _derived_bound(max_len: int, d_model: int, base: float = 10000.0) -> float:
    """The bound for the classmate's line as written, ``1 / base ** (torch.arange(0, d_model, 2) / d_model)``: float32
    operations, each correctly rounded (at most 2^-24 relative). The pow and the reciprocal round ω by up to 2^-24
    each; the exponent 2i/d_model is rounded too unless float32 holds it exactly (at d_model = 16 it does: i/8), and a
    pow turns an exponent off by δ into ω off by a relative ln(base)·δ. Largest over the pairs i ≥ 1, at pos
    max_len − 1 (pair 0's ω is 1, exactly)."""
    exponent = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    delta = ((torch.arange(0, d_model, 2) / d_model).double() - exponent).abs()  # the float32 division's rounding
    relative = math.log(base) * delta + 2 * 2**-24
    return ((max_len - 1) * inverse_frequencies(d_model, base) * relative)[1:].max().item()


def _half_spacing(x32: torch.Tensor) -> torch.Tensor:
    """Half the float32 spacing at each (positive) float32 value, 2^(⌊log2 x⌋ − 24), relative to the value."""
    _, exponent = torch.frexp(x32.double())  # x = m·2^e with m in [1/2, 1): ⌊log2 x⌋ = e − 1
    return torch.ldexp(torch.ones_like(x32, dtype=torch.float64), exponent - 25) / x32.double()


def _sharp_bounds(max_len: int, d_model: int, base: float = 10000.0) -> tuple[float, float]:
    """(sharpest bound, smallest one-operation bound) the notebook's spacing rule gives for the classmate's line.

    Per operation, half the float32 spacing at its result divided by that result (below 2^-24 except at the bottom of
    a binade): at d_model = 16, pair 1, the pow's 3.16 gives 0.63·2^-24 and the reciprocal's 0.316 gives 0.79·2^-24,
    so 1.42·2^-24 × 22 136 rad = 1.88e-3 for both (the exponent's rounding added as in :func:`_derived_bound`), and
    0.63·2^-24 × 22 136 rad = 8.3e-4 for the smaller operation alone. Valid for correctly rounded operations."""
    exponent = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    exponent32 = torch.arange(0, d_model, 2) / d_model
    delta = (exponent32.double() - exponent).abs()
    powered = (base ** exponent32.double()).float()  # the pow's float32 result (correctly rounded)
    omega32 = (1 / powered.double()).float()  # the reciprocal's
    angle = (max_len - 1) * inverse_frequencies(d_model, base)
    pow_only, reciprocal_only = angle * _half_spacing(powered), angle * _half_spacing(omega32)
    sharp = (angle * math.log(base) * delta + pow_only + reciprocal_only)[1:].max().item()
    return sharp, min(pow_only[1:].max().item(), reciprocal_only[1:].max().item())


def _accounting(max_len: int, d_model: int, base: float = 10000.0) -> str:
    """The code's own rounding accounting, for every pass message on the prediction: a student whose derivation
    reached an accepted number by counting other roundings (an angle rounding, one operation of ω) learns which."""
    exponent = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    exponent32 = torch.arange(0, d_model, 2) / d_model
    delta = (exponent32.double() - exponent).abs()
    powered = (base ** exponent32.double()).float()
    omega32 = (1 / powered.double()).float()
    angle = (max_len - 1) * inverse_frequencies(d_model, base)
    relative = math.log(base) * delta + 2 * 2**-24
    i = int((angle * relative)[1:].argmax()) + 1  # the pair of _derived_bound's largest term
    spacings = f"{_half_spacing(powered)[i].item() * 2**24:.2f} and {_half_spacing(omega32)[i].item() * 2**24:.2f}"
    exponent_note = (
        f"; the exponent {2 * i}/{d_model} is a float32 quotient too, off by {delta[i].item():.1e}, which the pow "
        f"multiplies by ln({base:g})"
        if delta[i] > 0
        else f"; the exponent {2 * i}/{d_model} (a float32 quotient, the first float32 operation) is exact here, so "
        "it does not round"
    )
    sharp, _ = _sharp_bounds(max_len, d_model, base)
    rad = f"{angle[i].item():,.0f}".replace(",", " ")
    return (
        "The code's accounting: pos and the angles are float64, so nothing rounds the angles, and pair 0's ω is "
        f"exactly 1. ω_{i} is rounded by two float32 operations, the pow ({powered[i].item():.3g}) and 1/x "
        f"({omega32[i].item():.3g}), each off by at most 2^-24 relative (half a spacing: {spacings} × 2^-24)"
        f"{exponent_note}. Times the largest angle ω_{i} scales, {rad} rad (pair {i} at pos {max_len - 1}; pair 0's "
        f"larger angle, {max_len - 1} rad, is exact), that is "
        f"{_derived_bound(max_len, d_model, base):.2g} ({sharp:.2g} with the spacings). If your derivation counted "
        "other roundings, check it against this."
    )


def _prediction_problem(predicted_error: object, max_len: int, d_model: int) -> tuple[Feedback | None, str]:
    """(feedback or None, a sentence on the prediction) for ``predicted_error``, a bound on the classmate's error.

    Accepted: a bound from 0.91 times the sharpest the spacing rule gives (:func:`_sharp_bounds`: half the spacing at
    each operation's result, 1.88e-3 at d_model = 16, where ω_1 rounded to 0.3 lands at 0.95 of it; half the spacing
    near ω twice, 2.09e-3) up to 8 times :func:`_derived_bound` (2^-24 per operation: at d_model = 16 two roundings of
    ω_1, pow then 1/x, at the last position; three roundings, a 1-ulp pow, or ω ≤ 1 with float32's step near 1 stay
    inside), and at least the measured error; or the measured error itself (within -5 % / +3 %: a student who
    computed the float32 ω).
    Rejected: anything below the measured error (not a bound); below the smallest one-operation bound (no derivation
    gives it); between that and the sharp bound ("more than one float32 operation": one operation's rounding, 2^-24 or
    half a spacing); or looser than 8 times the bound.
    """
    label = f"classmate_table({max_len}, {d_model})"
    if is_placeholder(predicted_error):
        return failed(
            f"Predict first: set predicted_error to a bound on the largest error of {label}, derived before you "
            "run it. Read its lines: which numbers does it make, in which dtype is each (print a piece's .dtype), "
            "how far off can each be relatively at most, and what does multiplying by pos do to that?"
        ), ""
    if isinstance(predicted_error, (list, tuple)) and len(predicted_error) == 1:
        predicted_error = predicted_error[0]  # [0.003], as a one-element array is taken
    if isinstance(predicted_error, decimal.Decimal):
        predicted_error = float(predicted_error)  # Decimal("0.0026") is an ordinary number too
    value, problem = as_number(predicted_error, "predicted_error (a number: the largest error you expect at most)")
    if problem is not None:
        return problem, ""
    assert value is not None
    if not math.isfinite(value) or value <= 0:
        return failed(f"predicted_error = {value!r}: an error is a positive number (the largest |table − exact|)."), ""
    classmate = _classmate_table(max_len, d_model).double()
    measured = (classmate - sinusoidal_table(max_len, d_model, dtype=torch.float64)).abs().max().item()
    bound = _derived_bound(max_len, d_model)
    sharp, one = _sharp_bounds(max_len, d_model)
    if value <= 5e-7:
        return failed(
            f"predicted_error = {value:.2g}: you expect the classmate's table to keep the promise (5e-7). Look again "
            "at every number it forms before the angles: is each one really float64? Print their dtypes."
        ), ""
    if value < 0.95 * measured:
        return failed(
            f"predicted_error = {value:.2g} is below the error the classmate's table really has: not a bound. Which "
            "number is rounded, how many float32 operations make it, how far off can each leave it relatively (float32 "
            "keeps 24 significant bits), and how large is the angle it scales at the last position?"
        ), ""
    if value > 8 * bound:
        return failed(
            f"predicted_error = {value:.2g} is a bound, but more than 8 times looser than the code as written allows. "
            "A float32 operation rounds by at most 2^-24 ≈ 6e-8 relative: how many operations make the number, and "
            "how large is the largest angle that its relative error scales?"
        ), ""
    order = 10 ** math.floor(math.log10(measured))  # the measured value depends on the CPU's float32 pow: its size only
    rule = "each float32 operation that makes the number the angles scale rounds it by up to 2^-24 relative"
    if measured <= bound:
        how = (
            "the actual roundings were small (the pow and the division landed close to the exact values; a pow that "
            "rounds the other way gives more)"
            if measured < 0.5 * bound
            else "the roundings of its float32 number added up to most of it"
        )
        why = (
            f"The classmate's table is off by something of order {order:.0e}, below {bound:.2g}, the bound for the "
            f"code as written ({rule}): it is below because {how}."
        )
    else:  # a pow that is not correctly rounded (off by more than half a step) rounds by more than 2^-24
        why = (
            f"The classmate's table is off by something of order {order:.0e}, above {bound:.2g}, the bound for "
            f"correctly rounded float32 operations ({rule}): this CPU's float32 pow rounds by more than half a step."
        )
    # the message by what the value is close to: 2^-24 per operation with rounded inputs (0.3 for 0.316) lands at
    # 0.95 x bound, so "sharper" only below 0.85 x bound; the spacing rule with ω_1 rounded to 0.3 lands at 0.95 x the
    # sharp bound, so acceptance starts at 0.91 x sharp (one-operation bounds stay below; at d_model = 12, where the
    # exponent rounds too, two roundings of ω without it, 0.905 x sharp, stay below)
    if value >= 0.85 * bound:
        loose = ", if loose" if value > 2 * bound else ""
        return None, f"Prediction {value:.2g}: a sound bound{loose}. {why}"
    if value >= 0.91 * sharp:
        return None, (
            f"Prediction {value:.2g}: a sound bound for correctly rounded operations, sharper than 2^-24 per "
            "operation (half a float32 spacing is below 2^-24 relative except at the bottom of a binade; a pow "
            f"off by one float32 step could give more). {why}"
        )
    if value <= 1.03 * measured:  # (not wider: at d_model = 12 a two-rounding slip lands 10 % above it)
        return None, (
            f"Prediction {value:.2g}: close to the measured error itself — did you compute the float32 number? A "
            f"derivation gives a bound without running anything. {why}"
        )
    if value < 0.95 * one:
        return failed(
            f"predicted_error = {value:.2g} is smaller than what a derivation gives. At most how far off can a "
            "float32 number be relatively, and which pair's angle at the last position does that scale the most?"
        ), ""
    return failed(
        f"predicted_error = {value:.2g} is below a rounding by every float32 operation that makes the number a "
        "pair's angle scales (pair 0's is exactly 1). That number comes out of more than one float32 operation: how "
        "many of them round it, and how far can each one move it?"
    ), ""


def _numpy_dtype(answer: object) -> torch.dtype | None:
    """The torch dtype of a NumPy dtype, a NumPy scalar type or a dtype's name (np.float32, 'f4', 'single'), else None.

    Not a value: ``np.dtype`` also reads a NumPy number or array as its dtype (``np.float32(1.5)``), and a number is
    no answer to "which dtype"."""
    if not isinstance(answer, (np.dtype, str)) and not (isinstance(answer, type) and issubclass(answer, np.generic)):
        return None
    try:
        return torch.from_numpy(np.zeros(0, dtype=np.dtype(cast(Any, answer)))).dtype
    except Exception:  # noqa: BLE001 - anything that is not a NumPy dtype
        return None


def _lossy_dtype_problem(lossy_dtype: object) -> Feedback | None:
    """Feedback unless ``lossy_dtype`` names float32 (the dtype of the classmate's ω), in any ordinary spelling."""
    if is_placeholder(lossy_dtype):
        return failed(
            "Which line makes it so? Set lossy_dtype to the dtype of the number that loses precision (print the "
            ".dtype of each piece the classmate's code makes)."
        )
    dtype: torch.dtype | None = None
    if isinstance(lossy_dtype, torch.dtype):
        dtype = lossy_dtype
    elif isinstance(lossy_dtype, str):
        name = lossy_dtype.strip().removeprefix("torch.").removeprefix("np.").removeprefix("numpy.")
        found = getattr(torch, name, None) if name.isidentifier() else None
        dtype = found if isinstance(found, torch.dtype) else _numpy_dtype(name)  # 'f4', 'single' …
    else:
        dtype = _numpy_dtype(lossy_dtype)
    if dtype is None:
        return failed(f"lossy_dtype: answer with a dtype, such as torch.int64, got {_short(lossy_dtype)}.")
    if dtype == torch.float32:
        return None
    if dtype == torch.float64:
        return failed(
            "lossy_dtype = torch.float64: if every number were float64, only the final cast would round (2^-25 ≈ "
            "3e-8), not the error you bounded. Print the .dtype of each piece the code makes, before the angles too."
        )
    if dtype == torch.int64:
        return failed(
            "lossy_dtype = torch.int64: integers are exact in int64, so they lose nothing themselves. What dtype do "
            "they turn into in the next operation? Print it."
        )
    return failed(f"lossy_dtype = {dtype}: no number in classmate_table has that dtype. Print their .dtype.")


@checker
def check_precision_fix(
    predicted_error: object,
    lossy_dtype: object,
    fixed_table: Callable[[int, int], torch.Tensor] | None,
    max_len: int = 70000,
    d_model: int = 16,
) -> Feedback:
    """Check the prediction of the classmate's error, the dtype of the number that loses precision (float32:
    ``lossy_dtype``, as a torch or NumPy dtype or its name), then a fix of the classmate's table: float32
    ``[max_len, d_model]``, within 5e-7 of the exact values, at the exercise's size and at :data:`PRECISION_SIZES`.

    ``predicted_error`` must be a bound on the error of the classmate's table (one float32 number, ω, made by type
    promotion: error ``pos·|ω32 − ω|``) of the size a derivation gives, or the measured error (see
    :func:`_prediction_problem`). The feedback on the fix says which
    precision loss is left: ω rounded to float32 before the float64 product (zero in pair 0 where ``ω = 1``),
    angles rounded to float32, rows shifted by one position, a fixed d_model, or a layout slip near position 0.
    """
    if is_placeholder(predicted_error) and is_placeholder(lossy_dtype) and is_placeholder(fixed_table):
        return not_done()
    problem, said = _prediction_problem(predicted_error, max_len, d_model)
    if problem is not None:
        return problem
    problem = _lossy_dtype_problem(lossy_dtype)
    if problem is not None:
        return failed(f"{said} {problem.message}")
    # review 6: a number cannot tell a right derivation from a wrong one, so every accepted prediction is followed by
    # the code's own accounting (once lossy_dtype is found, so that it neither answers it nor names the line earlier)
    said = f"{said} lossy_dtype: float32, right. {_accounting(max_len, d_model)}"
    if is_placeholder(fixed_table):
        return failed(f"{said} Now write fixed_table (the fix).")
    if not callable(fixed_table):
        return failed(f"{said} Answer with a function fixed_table(max_len, d_model), got {type(fixed_table).__name__}.")
    largest = 0.0
    for size in [(max_len, d_model), *PRECISION_SIZES]:
        problem, off = _precision_problem(fixed_table, *size)
        if problem is not None:
            return failed(f"{said} {problem.message}") if not problem.ok else problem
        largest = max(largest, off)
    sizes = ", ".join(f"{n} × {d}" for n, d in [(max_len, d_model), *PRECISION_SIZES])
    if largest <= _ONE_ROUNDING:
        return passed(
            f"{said} fixed_table: within {largest:.3g} of the exact values at every size tried ({sizes}): at most "
            "half a float32 step (2^-25), so only the final rounding to float32 is left — pos, ω and their product "
            "stayed in float64."
        )
    return passed(
        f"{said} fixed_table: within {largest:.3g} of the exact values at every size tried ({sizes}; the promise: "
        "5e-7). That is more than one final rounding to float32 (2^-25 ≈ 3e-8): if your angles are exact, some "
        "float32 arithmetic after them adds a few roundings."
    )


def _precision_problem(
    fixed_table: Callable[[int, int], torch.Tensor], max_len: int, d_model: int
) -> tuple[Feedback | None, float]:
    """(feedback or None, largest error) for ``fixed_table(max_len, d_model)``."""
    label = f"fixed_table({max_len}, {d_model})"
    table, problem = attempt(label, fixed_table, max_len, d_model)
    if problem is not None:
        return problem, 0.0
    if not isinstance(table, torch.Tensor):
        return failed(f"fixed_table must return a torch.Tensor, got {type(table).__name__}."), 0.0
    if tuple(table.shape) != (max_len, d_model):
        got = f"{label} returned shape {tuple(table.shape)}; expected (max_len, d_model) = ({max_len}, {d_model})"
        if table.dim() == 2 and table.shape[0] == max_len and table.shape[1] % 2 == 0 and table.shape[1] > 0:
            cols = table.shape[1]
            if table.is_floating_point() and table.device.type != "meta" and bool(torch.isfinite(table).all()):
                if (
                    table[:1000].detach().cpu().double() - _exact_window(0, min(max_len, 1000), cols)
                ).abs().max() < 1e-4:
                    return failed(
                        f"{got}: these are the rows for d_model = {cols}. Is d_model fixed in your code?"
                    ), 0.0
        return failed(f"{got}."), 0.0
    if not table.is_floating_point() or table.is_complex():
        return failed(f"dtype {table.dtype}: return a real floating table."), 0.0
    if table.dtype != torch.float32:
        return failed(
            f"dtype {table.dtype}: the model wants float32. Compute in float64, then cast last (.float())."
        ), 0.0
    t = table.detach().cpu().double()
    if not bool(torch.isfinite(t).all()):
        return failed(f"{label}: the table holds NaN or inf values."), 0.0
    exact = sinusoidal_table(max_len, d_model, dtype=torch.float64)
    err = (t - exact).abs()
    worst = err.max().item()
    if worst <= 5e-7:
        return None, worst
    angle_err = _angle_errors(t, max_len, d_model)  # [pos, pair], radians
    last, tenth = angle_err[-1], angle_err[max_len // 10]
    scaled = last[1:] * (max_len // 10) / (max_len - 1)  # what a linear growth predicts at pos max_len // 10
    linear = bool(((tenth[1:] - scaled).abs() <= 0.05 * scaled + 2e-6).all())
    if last[0] <= 1e-6 and last.max().item() > 1e-4 and linear:
        rel = (last[1:] / ((max_len - 1) * inverse_frequencies(d_model)[1:])).max().item()
        return failed(
            f"{label} is off by {worst:.1g} at large positions. The angle error grows in proportion to pos ("
            f"{angle_err[max_len // 10].max().item():.1g} rad at pos {max_len // 10}, {last.max().item():.1g} rad at "
            f"pos {max_len - 1}) and is zero in pair 0: every angle is pos times a number that is off by a "
            f"relative {rel:.1g}. Which number is that, and in which dtype was it made?"
        ), worst
    if err[:1000].max().item() > 1e-4:
        for shift, first, final in ((1, "1", "max_len"), (-1, "−1", "max_len − 2")):
            if (t[2:1000] - _exact_window(2 + shift, 998, d_model)).abs().max().item() < 1e-4:
                return failed(
                    f"{label}: your rows are positions {first} … {final}, one off. Row k of the table is position k, "
                    "for k = 0 … max_len − 1."
                ), worst
        return failed(
            f"{label} is off by {err[:1000].max().item():.2g} already in the first 1000 positions: check the layout "
            "(sin at 2i, cos at 2i+1) and the frequencies base^(-2i/d_model)."
        ), worst
    pos = int(err.amax(dim=1).argmax())
    return failed(
        f"{label} is right near 0, but off by {worst:.1g} at position {pos}: some step still rounds to float32 "
        "before sin/cos. List the numbers your code forms on the way to the angles, their sizes and their dtypes."
    ), worst
