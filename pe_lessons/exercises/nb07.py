"""Checkers for the exercises of notebook 07 (rotary position embeddings)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ..rotary import rope_frequencies, to_half_layout, to_interleaved_layout
from ._feedback import (
    Feedback,
    as_integer,
    as_number,
    attempt,
    checker,
    failed,
    is_placeholder,
    not_done,
    passed,
)

__all__ = [
    "check_weight_conversion",
    "check_first_wrong_position",
    "check_angle_fix",
    "check_turn_base",
]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=1e-6, atol=1e-9))


def _real_tensor(out: object, label: str, shape: tuple[int, ...]) -> torch.Tensor | Feedback:
    """``out`` as a float64 CPU tensor of ``shape``, or feedback saying what it is instead."""
    if out is None or out is Ellipsis:
        return not_done()
    if type(out).__module__ == "numpy" and hasattr(out, "__array__"):  # a NumPy array is an ordinary answer too
        out = torch.as_tensor(out)
    if not isinstance(out, torch.Tensor):
        return failed(f"{label} returned a {type(out).__name__}; return a tensor.")
    if tuple(out.shape) != shape:
        return failed(f"{label} returned shape {list(out.shape)}; expected {list(shape)}.")
    if not out.is_floating_point() or out.device.type == "meta":
        return failed(f"{label} returned {out.dtype} values on {out.device}; return real floating values.")
    out = out.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(out).all()):
        return failed(f"{label} returned NaN or inf.")
    return out


#: (heads, head_dim, d_in) of the projections the conversion checker tries.
CONVERSION_CASES = ((2, 8, 16), (4, 4, 12), (3, 16, 10), (1, 6, 6))


def _per_head(t: torch.Tensor, heads: int, fn: Callable[..., torch.Tensor]) -> torch.Tensor:
    """``fn`` (a layout permutation) applied to the output features of ``t`` within each head's block."""
    return fn(t.reshape(heads, t.shape[0] // heads, *t.shape[1:]), dim=1).reshape(t.shape)


@checker
def check_weight_conversion(my_convert: Callable[[torch.Tensor, torch.Tensor, int], object] | None) -> Feedback:
    """Check ``my_convert(W, b, heads)``: a projection ``[heads·head_dim, d_in]`` and its bias ``[heads·head_dim]``
    trained with half-layout RoPE, exported for interleaved-layout code: both reordered per head with the inverse
    of ``P`` (``to_interleaved_layout``), so interleaved RoPE on ``x Wᵀ + b`` gives the original scores.

    Tried on several ``(heads, head_dim, d_in)``; the usual bugs (the forward permutation instead of its inverse,
    the bias left as it was, the permutation over all rows at once, the input features permuted) are named.
    """
    if is_placeholder(my_convert):
        return not_done()
    gen = torch.Generator().manual_seed(11)
    for heads, hd, d_in in CONVERSION_CASES:
        W = torch.randn(heads * hd, d_in, generator=gen, dtype=torch.float64)
        b = torch.randn(heads * hd, generator=gen, dtype=torch.float64)
        label = f"my_convert(W, b, heads={heads}) with head_dim {hd}"
        result, problem = attempt(label, my_convert, W.clone(), b.clone(), heads)
        if problem is not None:
            return problem
        if result is None or result is Ellipsis:
            return not_done()
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            return failed(f"{label} must return two tensors, (W, b); got {type(result).__name__}.")
        out_w = _real_tensor(result[0], label + " (the weight)", tuple(W.shape))
        if isinstance(out_w, Feedback):
            return out_w
        out_b = _real_tensor(result[1], label + " (the bias)", tuple(b.shape))
        if isinstance(out_b, Feedback):
            return out_b
        want_w, want_b = _per_head(W, heads, to_interleaved_layout), _per_head(b, heads, to_interleaved_layout)
        w_ok, b_ok = _same(out_w, want_w), _same(out_b, want_b)
        if w_ok and b_ok:
            continue
        if _same(out_w, _per_head(W, heads, to_half_layout)) or (
            not w_ok and _same(out_b, _per_head(b, heads, to_half_layout))
        ):
            return failed(
                f"{label}: that permutation goes the other way (interleaved → half). This checkpoint is in the "
                "half layout already: which feature sits at (i, i + head_dim/2), and where must it go?"
            )
        if _same(out_w, W[to_interleaved_layout(torch.arange(heads * hd))]) or _same(
            out_w, W[to_half_layout(torch.arange(heads * hd))]
        ):
            return failed(
                f"{label}: you reordered all {heads * hd} output rows as if they were one head. RoPE pairs features "
                "inside each head, so the permutation must act within each head's block of head_dim rows."
            )
        if d_in % 2 == 0 and _same(out_w, to_interleaved_layout(W, dim=1)):
            return failed(f"{label}: you permuted the input features (columns). RoPE acts on the outputs: the rows.")
        if w_ok and _same(out_b, b):
            return failed(
                f"{label}: the weight is right, but the bias is as it was. RoPE rotates q = x Wᵀ + b: every output "
                "feature moves, the bias's included."
            )
        if w_ok:
            return failed(f"{label}: the weight is right; the bias is not W's output features in the same new order.")
        if _same(out_w, W):
            return failed(f"{label}: nothing moved in the weight.")
        return failed(f"{label}: the weight's rows are not in the interleaved layout's order, head by head.")
    return passed(
        f"Right for every (heads, head_dim) tried ({len(CONVERSION_CASES)} shapes): per head, feature i + head_dim/2 "
        "goes back next to feature i, and the bias moves with its rows; interleaved RoPE then gives the original scores."
    )


def _first_wrong_integer(dtype: torch.dtype) -> int:
    """The smallest positive integer that ``dtype`` does not hold exactly: 2**bits + 1, where ``bits`` counts
    the significant bits, the leading one included (bfloat16 8, float16 11, float32 24)."""
    return 2 ** round(1 - math.log2(torch.finfo(dtype).eps)) + 1


@checker
def check_first_wrong_position(position: object, error: object) -> Feedback:
    """Check the derivation of exercise 2: the smallest integer position at which ``buggy_cos_sin``'s pair-0 angle
    (θ₀ = 1, exact angle = the position) is wrong under ``torch.autocast("cpu", dtype=torch.bfloat16)``, and how
    many radians it is off there. Any integer form (int, 257.0, a NumPy number, a one-element tensor) is accepted."""
    if is_placeholder(position) or is_placeholder(error):
        return not_done()
    got, problem = as_integer(position, "a whole position (an integer)")
    if problem is not None:
        return problem
    assert got is not None  # as_integer gave feedback otherwise
    off, problem = as_number(error, "the size of the error in radians (a number)")
    if problem is not None:
        return problem
    assert off is not None
    want = _first_wrong_integer(torch.bfloat16)
    if got != want:
        if got == _first_wrong_integer(torch.float16):
            return failed(
                f"{got} is where float16 first fails: that counts float16's 11 significant bits. bfloat16 keeps fewer."
            )
        if got == _first_wrong_integer(torch.float32):
            return failed(
                f"{got} is where float32 first fails (24 significant bits). Under autocast the matmul's "
                "inputs are rounded to bfloat16 first."
            )
        if got in (want // 2, want // 2 + 1):
            return failed(
                f"Position {got}: bfloat16 keeps 8 significant bits including the leading one (7 are stored, the "
                "leading one is implied). With 8 bits, how large an integer can you still write exactly?"
            )
        if 0 <= got < want:
            return failed(
                f"Position {got} is still held exactly: it needs at most 8 significant bits, and bfloat16 keeps 8. "
                "Which is the first integer that needs more?"
            )
        if got > want:
            return failed(
                f"Position {got} is past the first wrong one: a smaller integer already needs more significant bits "
                "than bfloat16 keeps."
            )
        return failed(f"Position {got}: positions count from 0 upwards; which is the first that bfloat16 cannot hold?")
    if abs(abs(off) - 1.0) > 1e-6:
        if abs(off) < 1e-6:
            return failed(
                f"The position is right, but an error of {off:g}? At that position bfloat16 cannot hold the integer, "
                "so the rounded position, and with it the angle, differs from it."
            )
        return failed(
            f"The position is right; the error {off:g} rad is not. {want} lies between two bfloat16 neighbours: "
            f"which one does it round to, and how far is that from {want}? And the matmul's output (1 × the rounded "
            "position) is itself a bfloat16 number: does rounding it change anything?"
        )
    return passed(
        f"Right: {want} needs 9 significant bits, so bfloat16 rounds it to a neighbour and pair 0's angle is "
        f"{abs(off):g} radian off (almost a sixth of a turn). Now run the buggy function and see it."
    )


def _dtype_of(out: object) -> torch.dtype | str:
    """The torch dtype of a tensor, or of a NumPy array or scalar (NumPy's float32 is float32 too); otherwise the
    name of its type."""
    if isinstance(out, torch.Tensor):
        return out.dtype
    if type(out).__module__ == "numpy" and hasattr(out, "__array__"):
        try:
            return torch.as_tensor(out).dtype
        except (TypeError, RuntimeError):
            pass
    return type(out).__name__


def _exact_cos_sin(positions: torch.Tensor, head_dim: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    angles = positions.double()[:, None] * rope_frequencies(head_dim, base)
    return angles.cos(), angles.sin()


@checker
def check_angle_fix(my_cos_sin: Callable[..., object] | None, *, tol: float = 1e-6) -> Feedback:
    """Check ``my_cos_sin(positions, head_dim, base)``: float32 ``(cos, sin)`` of ``positions·θ_i``, shape
    ``[seq, head_dim/2]``, within ``tol`` of the exact values for positions up to 100 000 — called inside
    ``torch.autocast("cpu", dtype=torch.bfloat16)``, for several head sizes and bases."""
    if is_placeholder(my_cos_sin):
        return not_done()
    positions = torch.tensor([0, 1, 7, 255, 257, 2049, 4097, 30001, 65537, 99999])
    for head_dim, base in ((8, 10000.0), (64, 10000.0), (128, 500000.0), (6, 100.0)):
        label = f"my_cos_sin(positions, {head_dim}, base={base:g})"
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, problem = attempt(label, my_cos_sin, positions.clone(), head_dim, base)
        if problem is not None:
            return problem
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            return failed(f"{label} must return two tensors, (cos, sin); got {type(out).__name__}.")
        shape = (len(positions), head_dim // 2)
        if isinstance(out[0], torch.Tensor) and tuple(out[0].shape) == (len(positions), head_dim):
            return failed(f"{label}: return one column per pair, shape {list(shape)} (not repeated for both halves).")
        dtypes = [_dtype_of(t) for t in out]
        got = [_real_tensor(t, label, shape) for t in out]
        for g in got:
            if isinstance(g, Feedback):
                return g
        cos, sin = got  # type: ignore[misc]
        assert isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)  # feedback returned above
        want_cos, want_sin = _exact_cos_sin(positions, head_dim, base)
        error = max((cos - want_cos).abs().max().item(), (sin - want_sin).abs().max().item())
        if error <= tol:
            if any(d != torch.float32 for d in dtypes):
                got_types = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
                return failed(
                    f"{label}: the values are right, but return them as float32 tensors or arrays (got {got_types})."
                )
            continue
        if _same(cos, want_sin) and _same(sin, want_cos):
            return failed(f"{label}: cos and sin are swapped.")
        small = slice(0, 3)  # positions 0, 1 and 7: no precision is lost there, only a formula can be wrong
        small_error = max(
            (cos[small] - want_cos[small]).abs().max().item(), (sin[small] - want_sin[small]).abs().max().item()
        )
        if small_error > 1e-2:
            return failed(
                f"{label}: wrong already at positions 0, 1 and 7 (error {small_error:.2f}), where no precision is lost: "
                "your frequencies θ_i differ from base^(−2i/head_dim). Check the base you use, the step of i, and the "
                "divisor."
            )
        if torch.bfloat16 in dtypes or torch.float16 in dtypes:
            return failed(
                f"{label}: your tables came out in {[d for d in dtypes if d in (torch.bfloat16, torch.float16)][0]}: "
                "autocast ran an operation of yours in low precision, so large positions were rounded before "
                "they became angles. Which of your operations does autocast touch, and which does it leave alone?"
            )
        if error < 0.05:
            return failed(
                f"{label}: largest error {error:.1e}, above {tol:g}. That is the size of float32 angles' rounding: "
                "near position 100 000 one float32 step is about 0.008 rad. How many significant digits does an "
                f"angle of 100 000 rad need to be right to {tol:g}, and does every number that enters your product "
                "(each factor, not only the result) carry that many?"
            )
        return failed(
            f"{label}: largest error {error:.2f}: right at small positions, badly wrong at large ones. Something "
            "rounds the positions (or the angles) to a low precision before the cosine: look at which dtype each "
            "step of your computation runs in under autocast."
        )
    return passed(
        "Exact to float32 at every position and head size tried, even under autocast: your angles never pass "
        "through a low precision on their way to cos and sin."
    )


#: (head_dim, context, pair) settings the turn-base checker tries.
TURN_BASE_CASES = ((128, 8192, 35), (64, 4096, 20), (128, 131072, 50), (16, 100, 3))


def _turn_base(head_dim: int, context: float, pair: int) -> float:
    """The base at which pair ``pair`` has wavelength ``2π·base^(2·pair/head_dim)`` exactly ``context``."""
    return (context / (2 * math.pi)) ** (head_dim / (2 * pair))


def _near_rel(value: float, other: float) -> bool:
    return abs(value - other) <= 1e-6 * abs(other)


@checker
def check_turn_base(my_turn_base: Callable[[int, float, int], object] | None) -> Feedback:
    """Check ``my_turn_base(head_dim, context, pair)``: the base at which rotary pair ``pair`` completes exactly one
    turn over ``context`` positions, ``(context/2π)^(head_dim/(2·pair))``, on several settings (relative 1e-6)."""
    if is_placeholder(my_turn_base):
        return not_done()
    for head_dim, context, pair in TURN_BASE_CASES:
        label = f"my_turn_base({head_dim}, {context}, {pair})"
        out, problem = attempt(label, my_turn_base, head_dim, context, pair)
        if problem is not None:
            return problem
        if out is None or out is Ellipsis:
            return not_done()
        value, problem = as_number(out, "a base (a positive number)")
        if problem is not None:
            return failed(f"{label}: {problem.message}")
        assert value is not None  # set whenever problem is None
        want = _turn_base(head_dim, context, pair)
        if abs(value - want) <= 1e-6 * want:
            continue
        if abs(value - want) <= 0.5 + 1e-9 * want:
            return failed(
                f"{label}: {value:.6g} is the right base rounded; give it unrounded (to 6 significant digits): "
                "a base need not be an integer."
            )
        near = functools.partial(_near_rel, value)
        if near(context ** (head_dim / (2 * pair))):
            return failed(f"{label}: a turn is 2π radians: the wavelength is 2π/θ_i, not 1/θ_i.")
        if near((context / (2 * math.pi)) ** (2 * pair / head_dim)):
            return failed(f"{label}: the exponent is upside down: solve 2π·base^(2i/head_dim) = context for base.")
        if near((context / (2 * math.pi)) ** (head_dim / (2 * (pair + 1)))) or near(
            (context / (2 * math.pi)) ** (head_dim / (2 * (pair - 1))) if pair > 1 else -1.0
        ):
            return failed(f"{label}: off by one pair: pair i turns at base^(−2i/head_dim), counting from i = 0.")
        if near((context / (2 * math.pi)) ** (head_dim / pair)):
            return failed(f"{label}: the exponent of pair i is 2i/head_dim (i counts pairs, not features).")
        return failed(f"{label}: {value:.6g} is not it. Write pair i's wavelength in terms of base and solve for base.")
    return passed(
        f"Right on all {len(TURN_BASE_CASES)} settings: base = (context/2π)^(head_dim/(2i)). A larger base than that "
        "leaves pair i short of a full turn within the context — the situation notebook 10's methods address."
    )
