"""Checkers for the exercises of notebook 02 (vectorized torch tables)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..sinusoidal import inverse_frequencies, sinusoidal_table
from ._feedback import Feedback, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = ["check_table_function", "check_precision_fix"]


@checker
def check_table_function(
    my_table: Callable[[int, int], torch.Tensor] | None, max_len: int = 70000, d_model: int = 16
) -> Feedback:
    """Check ``my_table(max_len, d_model)``: shape, layout, and accuracy out to large positions."""
    if is_placeholder(my_table):
        return not_done()
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
            f"Right near 0, but off by {far:.1g} at position {worst}: the angles pos·ω were rounded to float32. "
            "Form them in float64 (then cast the table) and the error drops below 5e-7."
        )
    return passed(f"Correct: within 5e-7 of the exact values at every position up to {max_len - 1}.")


# --------------------------------------------------------------------------- new exercise: debug a half-done fix
def _omega32_tables(max_len: int, d_model: int) -> list[torch.Tensor]:
    """Tables whose angles are exact products of float64 positions and float32-rounded ω (two ways of rounding)."""
    i = torch.arange(0, d_model, 2, dtype=torch.float32)
    rounded = [
        torch.exp(i * (-math.log(10000.0) / d_model)),  # the textbook line, in float32
        inverse_frequencies(d_model).float(),  # the exact ω, rounded once
    ]
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    out = []
    for omega in rounded:
        angles = pos * omega.double()
        out.append(torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1))
    return out


@checker
def check_precision_fix(
    fixed_table: Callable[[int, int], torch.Tensor] | None, max_len: int = 70000, d_model: int = 16
) -> Feedback:
    """Check a fix of the half-done float64 table: float32 ``[max_len, d_model]``, within 5e-7 of the exact values.

    The feedback says which precision loss is left: ω rounded to float32 before the float64
    product (error ``pos·|ω32 − ω|``, zero in pair 0 where ``ω = 1``), angles rounded to float32,
    or a layout slip near position 0.
    """
    if fixed_table is None or fixed_table is Ellipsis:
        return not_done()
    if not callable(fixed_table):
        return failed(f"Answer with a function fixed_table(max_len, d_model), got {type(fixed_table).__name__}.")
    table, problem = attempt(f"fixed_table({max_len}, {d_model})", fixed_table, max_len, d_model)
    if problem is not None:
        return problem
    if not isinstance(table, torch.Tensor):
        return failed(f"fixed_table must return a torch.Tensor, got {type(table).__name__}.")
    if tuple(table.shape) != (max_len, d_model):
        return failed(f"Shape {tuple(table.shape)}; expected (max_len, d_model) = ({max_len}, {d_model}).")
    if not table.is_floating_point() or table.is_complex():
        return failed(f"dtype {table.dtype}: return a real floating table.")
    if table.dtype != torch.float32:
        return failed(f"dtype {table.dtype}: the model wants float32. Compute in float64, then cast last (.float()).")
    t = table.detach().cpu().double()
    if not bool(torch.isfinite(t).all()):
        return failed("The table holds NaN or inf values.")
    exact = sinusoidal_table(max_len, d_model, dtype=torch.float64)
    err = (t - exact).abs()
    worst = err.max().item()
    if worst <= 5e-7:
        return passed(
            f"Within {worst:.1g} of the exact values up to position {max_len - 1}: pos, ω and their product all "
            "stay in float64, and only the final table is rounded to float32."
        )
    if any((t - ref).abs().max().item() <= 1e-6 for ref in _omega32_tables(max_len, d_model)):
        return failed(
            f"Off by {worst:.1g} at large positions, and the error grows with pos while pair 0 (ω = 1) stays exact: "
            "ω itself is still rounded to float32 before the float64 product. A relative error of up to 6e-8 in ω, "
            f"times pos up to {max_len - 1}, moves the angle by up to {6e-8 * max_len:.0e} rad. "
            "Compute ω in float64 too."
        )
    if err[:1000].max().item() > 1e-4:
        return failed(
            f"Off by {err[:1000].max().item():.2g} already in the first 1000 positions: check the layout "
            "(sin at 2i, cos at 2i+1) and the frequencies base^(-2i/d_model)."
        )
    pos = int(err.amax(dim=1).argmax())
    return failed(
        f"Right near 0, but off by {worst:.1g} at position {pos}: some step still rounds to float32 before sin/cos "
        "(the positions, ω, or the angles). Keep every step in float64 and cast the finished table."
    )
