"""Checkers for the exercises of notebook 11 (positions in today's models).

The givens of each exercise live here too (:data:`IMAGE_TEXT`, :data:`GEMMA3_GLOBAL`), so the
notebook and its solutions read the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

import torch

from ..models import mrope_position_ids
from ..rotary import apply_rope
from ._feedback import Feedback, _short, as_number, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = ["IMAGE_TEXT", "GEMMA3_GLOBAL", "check_image_text_ids", "check_window_pairs", "check_mla_scores"]

#: Exercise 1: 4 text tokens, an image of 6 × 4 patches (merged 2 × 2 into 3 × 2 tokens), 2 text tokens.
IMAGE_TEXT: dict[str, Any] = {"segments": [4, (1, 6, 4), 2], "spatial_merge_size": 2}
#: Exercise 2: a Gemma 3 global layer (head_dim 256, base 1 000 000, linear factor 8) read over the
#: 1 024-token window of the sliding layers.
GEMMA3_GLOBAL: dict[str, Any] = {"head_dim": 256, "base": 1_000_000.0, "factor": 8.0, "window": 1024}


# --------------------------------------------------------------------------- exercise 1


def _whole(answer: object, what: str) -> tuple[int | None, Feedback | None]:
    """A whole number in any ordinary type (``4``, ``4.0``, ``np.int64(4)``, a one-element tensor)."""
    value, problem = as_number(answer, what)
    if problem is not None:
        return None, problem
    assert value is not None
    if value != int(value):
        return None, failed(f"Answer with {what}, got the non-integer {value:g}.")
    return int(value), None


def _ids_from(answer: object) -> tuple[list[list[int]] | None, Feedback | None]:
    """The answer as three lists of ints (from a tensor, array or nested lists)."""
    if hasattr(answer, "tolist") and callable(answer.tolist):
        try:
            answer = answer.tolist()
        except Exception:
            return None, failed(f"Give the position ids as a [3, seq] tensor or three lists, got {_short(answer)}.")
    first = answer[0] if isinstance(answer, (list, tuple)) and len(answer) == 1 else None
    if isinstance(first, (list, tuple)) and len(first) == 3 and all(len(_shape_of(r)) == 1 for r in first):
        return None, _batch_dimension([1, 3, *_shape_of(first[0])])  # [1, 3, seq]: batch first
    if isinstance(answer, (list, tuple)) and len(answer) > 3 and all(_shape_of(row) == (3,) for row in answer):
        return None, failed(
            f"That is one (time, height, width) triple per token, [{len(answer)}, 3]: transpose it to three rows "
            "(time, height, width), one number per token."
        )
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)) or len(answer) != 3:
        return None, failed(
            f"Give three rows (time, height, width), one number per token, got {_short(answer)}: "
            "a [3, seq] tensor or a list of three lists."
        )
    rows: list[list[int]] = []
    for name, row in zip(("time", "height", "width"), answer, strict=True):
        if hasattr(row, "shape") and hasattr(row, "tolist") and callable(row.tolist):  # a 1-D tensor or array
            if len(row.shape) != 1:
                if len(row.shape) == 2 and row.shape[0] == 1:
                    return None, _batch_dimension([3, *row.shape])
                return None, failed(f"The {name} row must be one number per token, got shape {list(row.shape)}.")
            row = row.tolist()
        if isinstance(row, (list, tuple)) and len(row) == 1 and isinstance(row[0], (list, tuple)):
            return None, _batch_dimension([3, 1, *_shape_of(row[0])])  # [3, batch = 1, seq], as get_rope_index
        if isinstance(row, (str, bytes)) or not isinstance(row, (list, tuple)):
            return None, failed(f"The {name} row must be a list of numbers, got {_short(row)}.")
        values: list[int] = []
        for v in row:
            value, problem = _whole(v, "whole position numbers")
            if problem is not None:
                return None, failed(f"In the {name} row: {problem.message}")
            assert value is not None
            values.append(value)
        rows.append(values)
    return rows, None


def _shape_of(row: object) -> tuple[int, ...]:
    """The length of a list/tuple/1-D tensor (as a 1-tuple), its shape if it has one, else ()."""
    if hasattr(row, "shape"):
        return tuple(cast(Any, row).shape)
    if isinstance(row, (list, tuple)):
        return (len(row),)
    return ()


def _batch_dimension(shape: list[int]) -> Feedback:
    """Feedback for ids with a batch dimension of 1; ``shape`` is the answer's own shape, as detected."""
    return failed(
        f"These are {list(shape)} ids, with a batch dimension (get_rope_index returns [3, batch, seq]): drop the "
        "batch dimension and give three rows, one number per token."
    )


def _variant_ids(segments: list, merge: int, *, text_after: str = "max", swap: bool = False) -> list[list[int]]:
    """Position ids with a common slip: text after an image continues after its token count (``"count"``) or
    after its largest side in patches (``"patches"``), or rows and columns swapped."""
    start, parts = 0, []
    for item in segments:
        if isinstance(item, int):
            parts.append(torch.arange(item).expand(3, item) + start)
            start += item
            continue
        t, h, w = item
        patch_side = max(h, w)
        h, w = h // merge, w // merge
        if swap:
            h, w = w, h
        tt, hh, ww = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
        parts.append(torch.stack((tt, hh, ww)).reshape(3, -1) + start)
        start += {"count": t * h * w, "patches": patch_side}.get(text_after, max(h, w))
    return torch.cat(parts, dim=1).tolist()


@checker
def check_image_text_ids(answer: object) -> Feedback:
    """Exercise 1: the ``[3, seq]`` position ids (time, height, width) of :data:`IMAGE_TEXT`, as ``get_rope_index``."""
    if is_placeholder(answer):
        return not_done()
    rows, problem = _ids_from(answer)
    if problem is not None:  # (a failed Feedback is falsy: `problem or …` would hide its message)
        return problem
    assert rows is not None
    segments, merge = IMAGE_TEXT["segments"], IMAGE_TEXT["spatial_merge_size"]
    want = mrope_position_ids(segments, spatial_merge_size=merge).tolist()
    n = len(want[0])
    if rows == want:
        return passed(
            f"{n} tokens: the image's 6 tokens share time {want[0][4]} and spread over rows {want[1][4]}…{want[1][9]} "
            f"and columns {want[2][4]}…{want[2][9]}; the text after it continues at {want[0][10]} = 4 + max(3, 2)."
        )
    lengths = {len(r) for r in rows}
    if len(lengths) != 1:
        return failed(f"The three rows must have the same length (one entry per token), got lengths {sorted(lengths)}.")
    if lengths != {n}:
        if lengths == {4 + 24 + 2}:
            return failed(
                "One token per patch is too many: the vision encoder merges 2 × 2 patches into one token, so "
                "the 6 × 4 patches become 3 × 2 tokens."
            )
        return failed(f"The sequence has {n} tokens (text, image tokens after merging, text), not {lengths.pop()}.")
    if rows == [want[0], want[2], want[1]]:
        return failed("The height and width rows are swapped: give the rows in the order time, height, width.")
    if rows == _variant_ids(segments, merge, swap=True):
        return failed("Rows and columns are swapped: the grid is (t, h, w) = (1, 6, 4), 6 patch rows of 4 columns.")
    counted, by_patches = (_variant_ids(segments, merge, text_after=slip) for slip in ("count", "patches"))
    if rows == counted and rows == by_patches:  # this image: 6 tokens, and 6 patches on its longer side
        return failed(
            "The image tokens are right, but the text after the image continues too late. Here the image's token "
            "count (3 × 2 = 6) and its largest side in patches (6) are the same number: neither is what the text "
            "continues after. Count the image's sides in tokens, after merging."
        )
    if rows == counted:
        return failed(
            "The image tokens are right, but the text after the image does not continue after their count: it "
            "continues from the image's start plus its largest side (in tokens)."
        )
    if rows == by_patches:
        return failed(
            "The image tokens are right, but the text after the image counts the image's sides in patches: "
            "count them in tokens, after merging 2 × 2."
        )
    if any(r[:4] != w[:4] for r, w in zip(rows, want, strict=True)):
        return failed("The first text tokens count 0, 1, 2, 3 in all three rows.")
    image = [r[4:10] for r in rows]
    if image != [w[4:10] for w in want]:
        if image == [[v - 4 for v in w[4:10]] for w in want]:
            return failed("The image's ids start at 0: every stream of the image starts at the next free position, 4.")
        if image == [[v - 1 for v in w[4:10]] for w in want]:
            return failed(
                "The image starts at 3, the last text token's position: it starts at the next free position, 4."
            )
        return failed(
            "The image tokens are not right: the token in row r, column c (after merging) gets "
            "(start, start + r, start + c), row by row."
        )
    after = [r[10:] for r in rows]
    first = after[0][0]
    if all(a == after[0] for a in after) and after[0] == list(range(first, first + len(after[0]))):
        return failed(
            f"The image is right, but the text after it starts at {first}: it continues one past the largest id "
            "the image used in any stream (section 1)."
        )
    return failed("The image is right; check the text after it (all three rows equal, counting on by 1).")


# --------------------------------------------------------------------------- exercise 2


def window_pairs(
    head_dim: int, base: float, factor: float, window: int, *, turn: float = 2 * math.pi, step: float = 2.0
) -> int:
    """How many pairs complete at least one turn within ``window`` positions: ``window·θ_i/2π ≥ 1``,
    ``θ_i = base^{-2i/head_dim}/factor`` (they are the first pairs, ``0 … count-1``). ``turn`` is 2π and
    ``step`` the 2 of the exponent ``-2i/head_dim`` (other values name a slip)."""
    theta = torch.arange(head_dim // 2, dtype=torch.float64)
    theta = base ** (-step * theta / head_dim) / factor
    return int((window * theta / turn >= 1).sum())


@checker
def check_window_pairs(answer: object) -> Feedback:
    """Exercise 2: how many pairs (or which) of a Gemma 3 global layer complete a turn within the window (:data:`GEMMA3_GLOBAL`)."""
    if is_placeholder(answer):
        return not_done()
    g = GEMMA3_GLOBAL
    want = window_pairs(g["head_dim"], g["base"], g["factor"], g["window"])
    d, base, s, n = g["head_dim"], g["base"], g["factor"], g["window"]
    value = None
    if isinstance(answer, tuple) and len(answer) == 1 and hasattr(answer[0], "shape"):
        answer = answer[0]  # torch.where(mask) / np.nonzero(mask): a tuple of one index tensor
    if isinstance(answer, (range, list, tuple, set, frozenset)) or (
        hasattr(answer, "shape") and math.prod(answer.shape) != 1
    ):
        try:
            if isinstance(answer, (set, frozenset)):
                answer = sorted(answer)
            items = answer.tolist() if hasattr(answer, "tolist") else list(cast(Iterable, answer))
        except Exception:
            return failed(f"Give a number of pairs, or the list of pair indices, got {_short(answer)}.")
        if items and all(isinstance(v, list) and len(v) == 1 for v in items):
            items = [v[0] for v in items]  # torch.nonzero(mask) / np.argwhere(mask): [k, 1]
        if any(isinstance(v, list) for v in items):
            return failed(f"Give a number of pairs, or a flat list of pair indices, got {_short(answer)}.")
        if items and (
            all(isinstance(v, bool) for v in items) or (len(items) == d // 2 and all(v in (0, 1) for v in items))
        ):
            return failed(
                f"That is a mask of {len(items)} pairs (True where a pair turns): give its sum, or the indices "
                "where it is True."
            )
        ints = []
        for v in items:
            number, problem = _whole(v, "pair indices (whole numbers)")
            if problem is not None:
                return failed(f"In your list: {problem.message}")
            assert number is not None
            ints.append(number)
        if len(ints) == 1 and ints != [0]:
            return failed(
                f"A list of one number reads as one pair index, [{ints[0]}]: give a count as a plain number, or "
                "the list of every pair index that turns."
            )
        if ints != list(range(len(ints))):
            return failed(
                "The pairs that turn are the fastest ones, a run from pair 0 up: list 0, 1, 2, … up to the last one "
                "(or give their count)."
            )
        value = len(ints)
    else:
        value, problem = _whole(answer, "a number of pairs")
        if problem is not None:  # (a failed Feedback is falsy: `problem or …` would hide its message)
            return problem
    assert value is not None
    if value == want:
        return passed(
            f"{want} pairs (0 … {want - 1}) complete a turn within {n} positions; pair {want} has wavelength "
            f"{2 * math.pi * s * base ** (2 * want / d):.0f} > {n}. The other {d // 2 - want} pairs of the global layer "
            "turn less than once inside the window: they order distances there, but coarsely; the slowest barely move."
        )
    context = 131_072  # section 5's counts: over the whole context (factor 8, 1 or 4) and the 32 K of pre-training
    if value in {
        window_pairs(d, base, s, context),
        window_pairs(d, base, 1.0, context),
        window_pairs(d, base, 4.0, context),
    }:
        return failed(
            f"Not {value}: that is one of section 5's counts over a much longer span (the whole context or the "
            f"pre-training length); the question reads the global layer over the {n}-token window."
        )
    if value == d // 2 - want:
        return failed(f"Not {value}: that counts the pairs that do not turn within the window.")
    if value == window_pairs(d, base, 1 / s, n):
        return failed(
            f"Not {value}: that multiplies the frequencies by the factor. The factor stretches the wavelengths "
            "(position interpolation): it divides every θ_i by 8."
        )
    if value == window_pairs(d, base, 1.0, n):
        return failed(
            "That is a layer without the linear factor: the global layers divide every frequency by 8 (rope_type "
            "'linear'), which makes each wavelength 8 times longer."
        )
    if value == window_pairs(d, base, s, n, turn=1.0) or value == window_pairs(d, base, 1.0, n, turn=1.0):
        return failed("A turn is 2π radians: pair i turns window·θ_i/(2π) times.")
    if value == window_pairs(d, 10_000.0, 1.0, n):
        return failed("That is the count of a sliding-window layer (base 10 000); the global layers use 1 000 000.")
    slips = []  # all three give the same count here (56 for this layer): name every cause
    if value == window_pairs(d, base / s, 1.0, n):
        slips.append("the linear factor divides the frequencies θ_i by 8, not the base")
    if value == window_pairs(d, base, s, n, step=1.0):
        slips.append("the exponent is −2i/head_dim, not −i/head_dim")
    if value == 2 * want:
        slips.append("each pair is two features: count pairs, not features")
    if slips:
        return failed(f"Not {value}. What gives this count: " + "; or ".join(slips) + ".")
    if not 0 <= value <= d // 2:
        return failed(f"A head of width {d} has {d // 2} pairs; the count lies between 0 and {d // 2}.")
    return failed(
        f"Not {value}. Pair i turns (window·θ_i)/(2π) times with θ_i = base^(-2i/head_dim)/factor: count the pairs "
        "for which that is at least 1."
    )


# --------------------------------------------------------------------------- exercise 3


def mla_scores(
    q_nope: torch.Tensor,
    q_rope: torch.Tensor,
    latent: torch.Tensor,
    k_rope: torch.Tensor,
    w_uk: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    r"""MLA scores with the key up-projection absorbed into the query (unscaled, no mask), ``[heads, seq, seq]``.

    ``((W^{UK}_h)^\top q^{nope}_{h,m})\cdot c_n + (R_m q^{rope}_{h,m})\cdot(R_n k^{rope}_n)``: the latent ``c``
    is never rotated; the small shared key part ``k^{rope}`` and each head's ``q^{rope}`` are.
    """
    nope = (q_nope @ w_uk) @ latent.transpose(-2, -1)
    rope = apply_rope(q_rope, positions) @ apply_rope(k_rope, positions).transpose(-2, -1)
    return nope + rope


def _rope_part(args: tuple[torch.Tensor, ...], want: torch.Tensor) -> torch.Tensor:
    """The rotated term of the right scores: ``want`` minus the latent term."""
    q_nope, _, latent, _, w_uk, _ = args
    return want - (q_nope @ w_uk) @ latent.transpose(-2, -1)


def _mla_inputs(heads: int, seq: int, nope: int, rope: int, rank: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(heads, seq, nope, generator=g, dtype=torch.float64),
        torch.randn(heads, seq, rope, generator=g, dtype=torch.float64),
        torch.randn(seq, rank, generator=g, dtype=torch.float64),
        torch.randn(seq, rope, generator=g, dtype=torch.float64),
        torch.randn(heads, nope, rank, generator=g, dtype=torch.float64) / math.sqrt(nope),
        _positions(seq, seed, g),
    )


def _positions(seq: int, seed: int, g: torch.Generator) -> torch.Tensor:
    """Positions with gaps (as after padding, packing or in a cache), increasing, from ``3·seed`` up.

    Not 0, 1, 2, …: a RoPE score depends only on ``m − n``, so a function that ignores ``positions`` would
    match on any contiguous run."""
    return torch.randperm(4 * seq, generator=g)[:seq].sort().values + 3 * seed


@checker
def check_mla_scores(fn: object) -> Feedback:
    """Exercise 3: a fixed ``mla_scores(q_nope, q_rope, latent, k_rope, w_uk, positions)`` (see :func:`mla_scores`)."""
    if is_placeholder(fn):
        return not_done()
    sizes = [(2, 5, 6, 4, 8, 0), (3, 9, 4, 2, 6, 1), (1, 12, 8, 8, 10, 2)]  # heads, seq, nope, rope, rank, seed
    for heads, seq, nope, rope, rank, seed in sizes:
        args = _mla_inputs(heads, seq, nope, rope, rank, seed)
        got, problem = attempt("mla_scores(q_nope, q_rope, latent, k_rope, w_uk, positions)", cast(Any, fn), *args)
        if problem is not None:
            return problem
        if not isinstance(got, torch.Tensor):
            return failed(f"mla_scores must return a tensor of scores, got {_short(got)}.")
        if tuple(got.shape) != (heads, seq, seq):
            return failed(
                f"With {heads} heads and {seq} tokens the scores are [{heads}, {seq}, {seq}], got {list(got.shape)}."
            )
        want = mla_scores(*args)
        if got.dtype.is_floating_point and seq > 1:
            upper = torch.ones(seq, seq, dtype=torch.bool).triu(1)
            above = got[:, upper]
            masked = bool((above < -1e4).all() | (above == 0).all()) and bool(torch.isfinite(got[:, ~upper]).all())
            if masked and torch.allclose(got[:, ~upper].double(), want[:, ~upper], rtol=1e-6, atol=1e-8):
                return failed(
                    "The scores are right up to the diagonal, but the keys after each query are masked (or "
                    "zeroed): the task asks for the unmasked scores, every query against every key (no causal mask)."
                )
        if not got.dtype.is_floating_point or not bool(torch.isfinite(got).all()):
            return failed("The scores must be finite floating-point numbers.")
        if torch.allclose(got.double(), want, rtol=1e-6, atol=1e-8):
            continue
        q_nope, q_rope, latent, k_rope, w_uk, positions = args
        if got.dtype != torch.float64:
            tol = 10 * torch.finfo(got.dtype).eps * float(want.abs().max())  # its rounding: about 1 eps·max
            if torch.allclose(got.double(), want, rtol=0.0, atol=tol):
                dtype = str(got.dtype).removeprefix("torch.")
                return failed(
                    f"The scores are right only to {dtype} precision: the inputs are float64, so compute in their "
                    "dtype (no .float() or float32 tensors on the way)."
                )
        if torch.allclose(got.double().mT, want, rtol=1e-6, atol=1e-8) or torch.allclose(
            got.double(), want - _rope_part(args, want) + _rope_part(args, want).mT, rtol=1e-6, atol=1e-8
        ):
            return failed(
                "Your scores (or their rotated term) are transposed: entry [h, m, n] is query m against key n, so "
                "the query side goes on the left of the product and the keys, transposed, on the right."
            )
        q_latent = q_nope @ w_uk
        buggy = q_latent @ apply_rope(latent, positions).transpose(-2, -1)
        rope_part = want - q_latent @ latent.transpose(-2, -1)
        if torch.allclose(got.double(), buggy + rope_part, rtol=1e-6, atol=1e-8):
            return failed(
                "These are the scores of the function as given. Ask which of the two terms may depend on the "
                "positions, then shift every position by 100 and see which term changes."
            )
        both = apply_rope(q_latent, positions) @ apply_rope(latent, positions).transpose(-2, -1)
        if torch.allclose(got.double(), both + rope_part, rtol=1e-6, atol=1e-8):
            return failed(
                "Turning the absorbed query as well makes the scores depend on distances again, but they are not "
                "the model's scores: RoPE on the latent is not RoPE on any head's key, and section 3 showed that, for "
                "weights in general position, no single matrix M_n on the latent serves all the heads that share "
                "it (R_n W_UK leaves the span of the stacked W_UK's columns). Which term is meant to carry the "
                "position?"
            )
        k_nope = torch.einsum("hdr,sr->hsd", w_uk, latent)  # the explicit keys' unrotated part, per head
        whole_key = apply_rope(q_nope, positions) @ apply_rope(k_nope, positions).transpose(-2, -1)
        if torch.allclose(got.double(), whole_key + rope_part, rtol=1e-6, atol=1e-8):
            return failed(
                "That turns the whole key, q_nope·(W_UK c) included: plain RoPE, the relative property holds, but it "
                "is what MLA cannot absorb (section 3) and not the model's scores. In MLA the latent term carries no "
                "position; which term does?"
            )
        half = apply_rope(q_rope, positions, layout="half") @ apply_rope(k_rope, positions, layout="half").mT
        if torch.allclose(got.double(), want - rope_part + half, rtol=1e-6, atol=1e-8):
            return failed(
                "The rotated term pairs the features as (i, i + rope/2) (layout 'half'); the function as given pairs "
                "them as apply_rope's default does, (2i, 2i+1), and the weights are trained for that pairing: keep it."
            )
        ratio = (got.double() * want).sum() / (want * want).sum()
        if torch.allclose(got.double(), ratio * want, rtol=1e-6, atol=1e-8) and not math.isclose(ratio, 1.0):
            return failed(
                f"Your scores are the expected ones times {float(ratio):.4g}: the task asks for unscaled scores "
                "(no 1/√d; the model applies its softmax scale later)."
            )
        only_q = apply_rope(q_rope, positions) @ k_rope.transpose(-2, -1)
        only_k = q_rope @ apply_rope(k_rope, positions).transpose(-2, -1)
        if any(torch.allclose(got.double(), want - rope_part + t, rtol=1e-6, atol=1e-8) for t in (only_q, only_k)):
            return failed(
                "Only one side of the rotated term is turned: RoPE turns the query by its position m and the key "
                "by its position n, so that only n − m is left in their product."
            )
        counted = torch.arange(positions.shape[0])
        from_zero = apply_rope(q_rope, counted) @ apply_rope(k_rope, counted).transpose(-2, -1)
        if torch.allclose(got.double(), want - rope_part + from_zero, rtol=1e-6, atol=1e-8):
            return failed(
                "The rotated term must turn q_rope and k_rope by the `positions` passed in, not by 0, 1, 2, …: "
                "after padding, packing or in a KV cache the positions have gaps (as in this probe)."
            )
        if torch.allclose(got.double(), want - rope_part, rtol=1e-6, atol=1e-8):
            return failed("The rotated term is missing: add (R_m q_rope)·(R_n k_rope) to the absorbed term.")
        plain = q_rope @ k_rope.transpose(-2, -1)
        if torch.allclose(got.double(), want - rope_part + plain, rtol=1e-6, atol=1e-8):
            return failed("q_rope and k_rope are not rotated: the rotated term is the only place positions enter.")
        return failed(
            f"The scores differ from the expected ones (e.g. with {heads} heads, {seq} tokens): check the absorbed "
            "term (q_nope @ w_uk) @ latentᵀ and the rotated term."
        )
    return passed(
        "The latent stays unrotated, so W_UK folds into the query once, for all keys; only the small shared part "
        "k_rope turns. Scores match on three sizes, with gaps in the positions."
    )
