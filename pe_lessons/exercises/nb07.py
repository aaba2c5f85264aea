"""Checkers for the exercises of notebook 07 (rotary position embeddings)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from ..rotary import apply_rope, rope_frequencies, to_half_layout, to_interleaved_layout
from ._feedback import Feedback, as_number, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = [
    "check_rotate_half",
    "check_to_half_layout",
    "check_score_prediction",
    "check_weight_conversion",
    "check_angle_fix",
    "check_turn_base",
]


def _probe(d: int = 8) -> torch.Tensor:
    """A small test input whose features are all different: ``[2, 3, d]``."""
    gen = torch.Generator().manual_seed(7)
    return torch.randn(2, 3, d, generator=gen, dtype=torch.float64)


def _call(fn: Callable[[torch.Tensor], object], x: torch.Tensor, name: str) -> torch.Tensor | Feedback:
    out, problem = attempt(f"{name}(x)", fn, x.clone())
    if problem is not None:
        return problem
    if out is None or out is Ellipsis:
        return not_done()
    if not isinstance(out, torch.Tensor):
        return failed(f"{name}(x) returned a {type(out).__name__}; return a tensor of x's shape.")
    if tuple(out.shape) != tuple(x.shape):
        return failed(f"{name}(x) returned shape {list(out.shape)}; it must keep x's shape {list(x.shape)}.")
    if not out.is_floating_point() or out.device.type == "meta":
        return failed(f"{name}(x) returned {out.dtype} values on {out.device}; it must return x's real values, moved.")
    out = out.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(out).all()):
        return failed(f"{name}(x) returned NaN or inf; x is finite, and moving (or negating) features keeps it so.")
    return out


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a, b, rtol=1e-6, atol=1e-9))


@checker
def check_rotate_half(my_rotate_half: Callable[[torch.Tensor], torch.Tensor] | None, d: int = 8) -> Feedback:
    """Check ``my_rotate_half(x)``: ``[x1, x2] -> [-x2, x1]`` on the last dimension (halves of size d/2)."""
    if is_placeholder(my_rotate_half):
        return not_done()
    x = _probe(d)
    out = _call(my_rotate_half, x, "my_rotate_half")
    if isinstance(out, Feedback):
        return out
    h = d // 2
    x1, x2 = x[..., :h], x[..., h:]
    want = torch.cat((-x2, x1), -1)
    if _same(out, want):
        return passed(
            f"my_rotate_half turns each pair (x[i], x[i + {h}]) into (-x[i + {h}], x[i]): a quarter turn, the half layout's pairing."
        )
    if _same(out, torch.cat((x2, -x1), -1)):
        return failed(
            "Sign flipped: rotate_half is [-x2, x1] (minus on the moved second half), you returned [x2, -x1] — a rotation the other way."
        )
    if _same(out, torch.cat((x2, x1), -1)):
        return failed("The halves are swapped but the minus sign is missing: rotate_half is [-x2, x1].")
    pairs = x.unflatten(-1, (h, 2))
    if _same(out, torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)):
        return failed(
            f"You rotated adjacent pairs (2i, 2i+1) — that is the interleaved layout's quarter turn. "
            f"rotate_half pairs feature i with feature i + d/2 = i + {h}: return torch.cat((-x2, x1), -1)."
        )
    if _same(out, -want) or _same(out, torch.cat((-x1, x2), -1)):
        return failed("Close, but the signs are wrong: the first half of the output is -x2, the second half is +x1.")
    if _same(out, x):
        return failed(
            "The output equals the input: split x into halves x1 = x[..., :d/2], x2 = x[..., d/2:] and return [-x2, x1]."
        )
    return failed(
        "Not rotate_half: split the last dimension into halves x1, x2 and return torch.cat((-x2, x1), dim=-1)."
    )


@checker
def check_to_half_layout(my_to_half: Callable[[torch.Tensor], torch.Tensor] | None, d: int = 8) -> Feedback:
    """Check ``my_to_half(x)``: features of an interleaved-layout ``x`` reordered for the half layout (``x[..., P]``)."""
    if is_placeholder(my_to_half):
        return not_done()
    x = _probe(d)
    out = _call(my_to_half, x, "my_to_half")
    if isinstance(out, Feedback):
        return out
    want = to_half_layout(x)
    if _same(out, want):
        # the point of the conversion: half-layout RoPE on converted q, k gives the original scores
        q, k = x, _probe(d).flip(-1)
        s_orig = apply_rope(q) @ apply_rope(k).transpose(-1, -2)
        k_conv = _call(my_to_half, k, "my_to_half")
        if isinstance(k_conv, Feedback):
            return k_conv
        s_conv = apply_rope(out, layout="half") @ apply_rope(k_conv, layout="half").transpose(-1, -2)
        if not _same(s_conv, s_orig):  # pragma: no cover - a correct permutation always passes
            return failed("The features are right for this x, but not for another one: is your function deterministic?")
        return passed(
            "Feature 2i goes to i and 2i+1 to i + d/2: with layout='half' the converted q and k give exactly the original scores."
        )
    if _same(out, to_interleaved_layout(x)):
        return failed(
            "That is the inverse permutation (half → interleaved). Here feature 2i must land at i and 2i+1 at i + d/2: "
            "x[..., P] with P = [0, 2, 4, …, 1, 3, 5, …]."
        )
    if _same(out, x):
        return failed(
            "Nothing moved: the half layout pairs (i, i + d/2), so the even features go to the first half and the odd ones to the second."
        )
    odd_first = torch.cat((x[..., 1::2], x[..., 0::2]), -1)
    if _same(out, odd_first):
        return failed(
            "Odd features first: pair (2i, 2i+1) must become (i, i + d/2), so the even feature 2i goes to the first half."
        )
    if _same(out.sort(dim=-1).values, x.sort(dim=-1).values):
        return failed(
            "Your output holds the right features in the wrong order: position i needs feature 2i, position i + d/2 needs feature 2i + 1."
        )
    return failed(
        "Not a reordering of x's features: the conversion only permutes them (x[..., P], P = [0, 2, …, d-2, 1, 3, …, d-1])."
    )


@checker
def check_score_prediction(
    answer: float | torch.Tensor | None,
    q: torch.Tensor,
    k: torch.Tensor,
    m: int,
    n: int,
    *,
    layout: str = "interleaved",
) -> Feedback:
    """Check a predicted score ``⟨R_m q, R_n k⟩`` for 1-D ``q``, ``k`` (rotated with ``apply_rope``)."""
    if is_placeholder(answer):
        return not_done()
    value, problem = as_number(answer, "one number (a float or a one-element tensor)")
    if problem is not None:
        return problem
    assert value is not None  # set whenever problem is None
    q64, k64 = q.detach().double().reshape(1, -1), k.detach().double().reshape(1, -1)

    def score(a: int, b: int, lay: str = layout) -> float:
        return float((apply_rope(q64, [a], layout=lay) * apply_rope(k64, [b], layout=lay)).sum())

    want = score(m, n)
    tol = 1e-4 * max(1.0, abs(want))
    if abs(value - want) <= tol:
        return passed(
            f"⟨R_{m} q, R_{n} k⟩ = {want:.4f}: it only depends on the offset m − n = {m - n}, so positions ({m - n}, 0) give it too."
        )
    if abs(value - float((q64 * k64).sum())) <= tol:
        return failed(
            "That is q·k without any rotation: the score depends on the offset m − n, so rotate q by m − n (or q by m and k by n)."
        )
    if abs(value - score(n, m)) <= tol:
        return failed(
            f"Offset sign: you computed the score for m − n = {n - m}; the query is at m = {m}, the key at n = {n}, offset {m - n}."
        )
    other = "half" if layout == "interleaved" else "interleaved"
    if abs(value - score(m, n, other)) <= tol:
        return failed(f"You rotated with layout='{other}'; these q and k use layout='{layout}'.")
    return failed(f"{value:.4f} is not the score. Use the relative property: ⟨R_m q, R_n k⟩ = ⟨R_(m−n) q, k⟩.")


def _real_tensor(out: object, label: str, shape: tuple[int, ...]) -> torch.Tensor | Feedback:
    """``out`` as a float64 CPU tensor of ``shape``, or feedback saying what it is instead."""
    if out is None or out is Ellipsis:
        return not_done()
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


@checker
def check_weight_conversion(my_convert: Callable[[torch.Tensor, int], torch.Tensor] | None) -> Feedback:
    """Check ``my_convert(W, heads)``: the output features of a ``[heads·head_dim, d_in]`` projection reordered
    per head with ``P = [0, 2, …, 1, 3, …]`` (interleaved → half), so half-layout RoPE gives the original scores.

    Tried on several ``(heads, head_dim, d_in)``; the usual bugs (the permutation over all rows at once, the
    inverse permutation, the input features permuted) are named.
    """
    if is_placeholder(my_convert):
        return not_done()
    gen = torch.Generator().manual_seed(11)
    for heads, hd, d_in in CONVERSION_CASES:
        W = torch.randn(heads * hd, d_in, generator=gen, dtype=torch.float64)
        label = f"my_convert(W, heads={heads}) with head_dim {hd}"
        result, problem = attempt(label, my_convert, W.clone(), heads)
        if problem is not None:
            return problem
        out = _real_tensor(result, label, tuple(W.shape))
        if isinstance(out, Feedback):
            return out
        want = to_half_layout(W.view(heads, hd, d_in), dim=1).reshape(heads * hd, d_in)
        if _same(out, want):
            continue
        if _same(out, W[to_half_layout(torch.arange(heads * hd))]):
            return failed(
                f"{label}: you reordered all {heads * hd} output rows as if they were one head. RoPE pairs features "
                "inside each head, so the permutation must act within each head's block of head_dim rows."
            )
        if _same(out, to_interleaved_layout(W.view(heads, hd, d_in), dim=1).reshape(heads * hd, d_in)):
            return failed(f"{label}: that is the inverse permutation (half → interleaved).")
        if d_in % 2 == 0 and _same(out, to_half_layout(W, dim=1)):
            return failed(f"{label}: you permuted the input features (columns). RoPE acts on the outputs: the rows.")
        if _same(out, W):
            return failed(f"{label}: nothing moved.")
        if _same(out.sort(dim=0).values, W.sort(dim=0).values):
            return failed(f"{label}: the rows are reordered, but not into the half layout's order.")
        return failed(f"{label}: the result is not W with its rows reordered for the half layout.")
    return passed(
        f"Right for every (heads, head_dim) tried ({len(CONVERSION_CASES)} shapes): the bug was the permutation over "
        "all rows at once; per head, pair (2i, 2i+1) lands on (i, i + head_dim/2) and the scores are unchanged."
    )


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
        dtypes = [t.dtype if isinstance(t, torch.Tensor) else None for t in out]
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
                return failed(f"{label}: the values are right, but return them as float32 (got {dtypes}).")
            continue
        if _same(cos, want_sin) and _same(sin, want_cos):
            return failed(f"{label}: cos and sin are swapped.")
        if torch.bfloat16 in dtypes or torch.float16 in dtypes:
            return failed(
                f"{label}: your tables came out in {[d for d in dtypes if d in (torch.bfloat16, torch.float16)][0]}: "
                "autocast ran an operation of yours (a matrix product?) in low precision. Make the angles with an "
                "elementwise product, in float64, and convert cos and sin to float32 at the end."
            )
        if error < 0.05:
            return failed(
                f"{label}: largest error {error:.1e}, above {tol:g}. That is the size of float32 angles' rounding: "
                "near position 100 000 one float32 step is about 0.008 rad. Every input of the product, the "
                "frequencies too, must be float64 (a float32 inv_freq is already rounded)."
            )
        return failed(
            f"{label}: largest error {error:.2f} — the angles are badly wrong at large positions. Check that "
            "positions and frequencies are not rounded to a low precision before they are multiplied: autocast runs "
            "a matrix product in bf16, TF32 keeps 10 mantissa bits. An elementwise float64 product avoids both."
        )
    return passed(
        "Exact to float32 at every position and head size tried, even under autocast: the angles come from an "
        "elementwise float64 product that autocast leaves alone."
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
