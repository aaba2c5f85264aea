"""Checkers for the exercises of notebook 04 (heatmaps, wavelengths and the aliasing illusion)."""

from __future__ import annotations

import math
import numbers

import torch

from ..sinusoidal import sinusoidal_table, wavelengths
from ._feedback import (
    Feedback,
    SetupError,
    _kind,
    as_integer,
    as_number,
    checker,
    failed,
    is_placeholder,
    not_done,
    passed,
)
from .nb01 import check_wavelength

__all__ = ["check_predicted_wavelength", "check_first_honest_column", "check_buggy_heatmap"]


def _close(a: float, b: float, tol: float = 1e-3) -> bool:
    return abs(a - b) <= tol * max(1.0, abs(b))


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


@checker
def check_predicted_wavelength(answer: float | None, column: int, d_model: int, base: float = 10000.0) -> Feedback:
    """Check a predicted wavelength (in positions) of ``column`` in a model of width ``d_model`` and ``base``."""
    if is_placeholder(answer):
        return not_done()
    answer, problem = as_number(answer, "a number of positions")
    if problem is not None:
        return problem
    i = column // 2
    want = 2 * math.pi * base ** (2 * i / d_model)
    if _close(answer, want):
        return passed(f"Column {column} (pair i = {i}) repeats every {want:,.1f} positions: 2π·{base:g}^({2 * i}/{d_model}).")
    if base != 10000.0 and _close(answer, 2 * math.pi * 10000.0 ** (2 * i / d_model)):
        return failed(f"You used base 10000; this model uses base = {base:g}. The wavelength is 2π·base^(2i/d_model).")
    return check_wavelength(answer, column, d_model, base)  # the formula's usual slips (2π, pair index, frequency)


@checker
def check_first_honest_column(answer: int | None, n_positions: int, pixels: int, d_model: int, base: float = 10000.0) -> Feedback:
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
    per_pixel = n_positions / pixels
    lam = [float(v) for v in wavelengths(d_model, base).repeat_interleave(2)]  # period of every column
    want = next((j for j, p in enumerate(lam) if p > 2 * per_pixel), None)
    one_pixel = next((j for j, p in enumerate(lam) if p > per_pixel), None)
    if want is None:
        return failed("No column of this model is slow enough for this picture: every column aliases.")
    if answer == want:
        return passed(f"Column {want}: period {lam[want]:,.0f} > 2 × {per_pixel:g} positions per pixel = {2 * per_pixel:g}. "
                      f"Columns 0–{want - 1} alias.")
    if not 0 <= answer < d_model:
        return failed(f"Answer with a column index between 0 and {d_model - 1}.")
    if answer == one_pixel and one_pixel != want:
        return failed(f"Column {answer}'s period ({lam[answer]:,.0f}) exceeds one pixel ({per_pixel:g} positions), "
                      "but Nyquist needs at least two samples per period: compare with 2 pixels' worth of positions.")
    if answer == want + 1:
        return failed(f"Column {answer} is fine, but column {want} is too: both columns of a pair share one period.")
    if lam[answer] <= 2 * per_pixel:
        return failed(f"Column {answer} has period {lam[answer]:,.1f} positions, not more than two pixels "
                      f"({2 * per_pixel:g} positions): it aliases.")
    return failed(f"Column {answer} is drawn honestly (period {lam[answer]:,.0f}), but an earlier column already is.")


def _is_paper_table(table: torch.Tensor, base: float) -> bool:
    n, d = table.shape
    if d % 2 or d == 0:
        return False
    exact = sinusoidal_table(n, d, base=base, dtype=torch.float64)
    return bool(torch.allclose(table.detach().cpu().double(), exact, atol=1e-3, rtol=0))


@checker
def check_buggy_heatmap(answer: str | None, table_a: torch.Tensor, table_b: torch.Tensor, base: float = 10000.0) -> Feedback:
    """Check which of two pictured tables (``"A"`` or ``"B"``) is the buggy one."""
    if is_placeholder(answer):
        return not_done()
    good = {name: _is_paper_table(t, base) for name, t in (("A", table_a), ("B", table_b))}
    if sum(good.values()) != 1:
        raise SetupError("check_buggy_heatmap needs exactly one correct table among table_a and table_b")
    buggy = "A" if good["B"] else "B"
    table = table_a if buggy == "A" else table_b
    if not isinstance(answer, str) or answer.strip().upper() not in ("A", "B"):
        return failed(f"Answer with the letter of the buggy heatmap, \"A\" or \"B\", got {_kind(answer)}.")
    if answer.strip().upper() == buggy:
        clue = ""
        if torch.all(table[0].abs() < 1e-6):
            clue = " Its top row (pos = 0) is all 0: a correct table starts [0, 1, 0, 1, …], cos(0) = 1 in every odd column."
        return passed(f"Heatmap {buggy} is the buggy one.{clue}")
    return failed(f"Heatmap {answer.strip().upper()} matches the paper's formula. Look at the top row (pos = 0): a correct "
                  "table has 0 in the sin columns and 1 in the cos columns, and the two columns of each pair differ.")
