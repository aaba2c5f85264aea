"""Checkers for the exercises of notebook 07 (rotary position embeddings)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..rotary import apply_rope, to_half_layout, to_interleaved_layout
from ._feedback import Feedback, as_number, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = ["check_rotate_half", "check_to_half_layout", "check_score_prediction"]


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
