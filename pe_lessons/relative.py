r"""Relative position biases: ALiBi's linear penalty and T5's bucketed learned bias.

Both leave the token vectors alone and add a number to every attention logit that depends
only on the offset between the query at position ``i`` and the key at position ``j``:

.. math::

    \mathrm{score}_h(i, j) = \frac{q_i \cdot k_j}{\sqrt{head\_dim}} + b_h(j - i).

**ALiBi** (Press et al. 2022, used by BLOOM and MPT): a fixed penalty growing linearly with
distance, one slope per head, ``b_h = -m_h · |i - j|``. For ``n`` heads, ``n`` a power of
two, the slopes are the geometric sequence ``m_h = 2^(-8h/n)``, ``h = 1 … n`` (8 heads:
1/2, 1/4, …, 1/256). For other ``n`` the paper's code (and BLOOM's ``build_alibi_tensor``)
takes the ``n' = 2^floor(log2 n)`` slopes of ``n'`` heads, then the first ``n - n'`` of the
odd-numbered slopes of ``2n'`` heads, ``2^(-4h/n')`` for ``h = 1, 3, 5, …``.

**T5's relative bias** (Raffel et al. 2020): a learned table ``[num_buckets, n_heads]``
indexed by a *bucket* of the relative position ``r = j - i`` (key minus query).
Bidirectional buckets split by sign (half for ``r > 0``); of each half, the first
``max_exact = num_buckets_half // 2`` buckets hold the exact offsets ``0 … max_exact - 1``,
the rest cover ``max_exact … max_distance`` logarithmically,

.. math::

    \mathrm{bucket}(|r|) = \mathrm{max\_exact} + \Big\lfloor \frac{\ln(|r| / \mathrm{max\_exact})}
    {\ln(\mathrm{max\_distance} / \mathrm{max\_exact})} (\mathrm{buckets} - \mathrm{max\_exact}) \Big\rfloor,

and every offset from ``max_distance`` on shares the last bucket. A causal (unidirectional)
model only sees ``r ≤ 0`` and uses all buckets for ``-r``. The arithmetic follows T5's
``_relative_position_bucket`` exactly, float32 logarithm included, so that the bucket
edges are those pretrained T5 checkpoints were trained with.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._checks import check_bool, check_fits, check_float_dtype, check_int, check_real

__all__ = [
    "alibi_slopes",
    "alibi_bias",
    "t5_relative_bucket",
    "t5_bucket_edges",
    "RelativePositionBias",
    "ALiBiBias",
]

_INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def _geometric_slopes(n: int) -> torch.Tensor:
    """``2^(-8h/n)`` for ``h = 1 … n`` in float64 (exact powers of two when ``8h/n`` is an integer)."""
    return torch.exp2(-8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's slope per head, float64 ``[n_heads]``, largest first.

    ``n_heads`` a power of two: ``2^(-8h/n_heads)``, ``h = 1 … n_heads``. Otherwise, with
    ``n' = 2^floor(log2 n_heads)``: the ``n'`` slopes of ``n'`` heads, then every other slope
    of ``2n'`` heads (``2^(-4h/n')``, ``h = 1, 3, 5, …``) until there are ``n_heads``.
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    check_fits("n_heads", [n_heads], torch.float64, what="the slopes")
    closest = 2 ** (n_heads.bit_length() - 1)  # largest power of two <= n_heads
    slopes = _geometric_slopes(closest)
    if closest < n_heads:
        extra = _geometric_slopes(2 * closest)[0::2][: n_heads - closest]
        slopes = torch.cat((slopes, extra))
    return slopes


def alibi_bias(
    n_heads: int, q_len: int, k_len: int | None = None, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """ALiBi's bias ``[n_heads, q_len, k_len]``: ``bias[h, i, j] = -m_h · |i - j|`` (``k_len`` defaults to ``q_len``).

    With a causal mask only ``j ≤ i`` counts and this is the paper's ``-m_h · (i - j)``. Computed in
    float64 (distances are exact integers) and rounded once to ``dtype``.
    """
    n_heads = check_int("n_heads", n_heads, minimum=1)
    q_len = check_int("q_len", q_len, minimum=1)
    k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=1)
    dtype = check_float_dtype(dtype)
    return _alibi(alibi_slopes(n_heads), q_len, k_len, torch.float64, dtype)


def _alibi(slopes: torch.Tensor, q_len: int, k_len: int, work: torch.dtype, dtype: torch.dtype) -> torch.Tensor:
    """``-m_h·|i − j|`` computed in ``work`` (float32 or float64: distances exact) and rounded once to ``dtype``.

    Refuses, before allocating, a bias ``dtype`` cannot hold (float16 ends at 65 504: past it
    the bias would be −inf, which masks the key instead of penalising it) and any of the three
    tensors (distances, bias in ``work``, bias in ``dtype``) past the memory limit.
    """
    n_heads = slopes.shape[0]
    farthest = max(q_len, k_len) - 1
    if farthest >= 2**24 and work != torch.float64:  # float32 distances are exact only below 2**24
        work = torch.float64
    largest = float(slopes.max()) * farthest
    if largest > torch.finfo(dtype).max:
        limit = torch.finfo(dtype).max
        raise ValueError(
            f"q_len/k_len: the ALiBi bias reaches -{largest:.6g} (slope {float(slopes.max()):.6g} × distance "
            f"{farthest}), beyond {dtype}'s largest value {limit:g}: it would round to -inf and mask keys "
            f"instead of penalising them; use dtype=torch.float32 or torch.bfloat16, or shorter sequences "
            f"(at most {int(limit / float(slopes.max())) + 1} positions here)"
        )
    check_fits("q_len", [n_heads, q_len, k_len], work, what="the bias")
    check_fits("q_len", [q_len, k_len], work, what="the distances |i − j|")
    device = slopes.device
    distance = (
        torch.arange(q_len, dtype=work, device=device)[:, None] - torch.arange(k_len, dtype=work, device=device)
    ).abs()
    return (-slopes.to(work)[:, None, None] * distance).to(dtype)


def _check_bucket_args(num_buckets: object, max_distance: object, bidirectional: object) -> tuple[int, int, bool]:
    bidirectional = check_bool("bidirectional", bidirectional)
    # each direction needs at least one exact bucket and one logarithmic bucket
    num_buckets = check_int("num_buckets", num_buckets, minimum=4 if bidirectional else 2)
    half = num_buckets // 2 if bidirectional else num_buckets
    max_exact = half // 2
    max_distance = check_int("max_distance", max_distance)
    if max_distance > 2**62:
        raise ValueError(f"max_distance must be at most 2**62 (offsets are int64), got {max_distance}")
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must be above the exact range (offsets 0 … {max_exact - 1} get one bucket each with "
            f"num_buckets={num_buckets}, bidirectional={bidirectional}), got max_distance={max_distance}"
        )
    return num_buckets, max_distance, bidirectional


def t5_relative_bucket(
    relative_position: torch.Tensor | int | list[int],
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket (int64, same shape) of each ``relative_position = key position − query position``.

    Identical to ``T5Attention._relative_position_bucket`` in transformers. ``bidirectional``:
    buckets ``0 … num_buckets/2 - 1`` for ``r ≤ 0`` and the rest for ``r > 0``; otherwise
    (a causal decoder) positive offsets, which a causal model never sees, share bucket 0 with ``r = 0``.
    """
    num_buckets, max_distance, bidirectional = _check_bucket_args(num_buckets, max_distance, bidirectional)
    if isinstance(relative_position, torch.Tensor):
        r = relative_position
    elif isinstance(relative_position, bool):
        raise TypeError("relative_position must hold integer offsets, got a bool")
    else:
        try:
            r = torch.as_tensor(relative_position)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"relative_position must be an integer tensor, an int or a list of ints, got {relative_position!r}"
            ) from None
    if r.dtype not in _INT_DTYPES:
        raise TypeError(f"relative_position must hold integer offsets (key − query), got dtype {r.dtype}")
    check_fits("relative_position", list(r.shape), torch.int64, what="each int64 intermediate")
    r = r.long().clamp(min=-(2**63 - 1))  # |−2**63| overflows int64; it lands in the last bucket either way
    buckets = torch.zeros_like(r)
    if bidirectional:
        num_buckets //= 2
        buckets += (r > 0).long() * num_buckets
        r = r.abs()
    else:
        r = -torch.clamp(r, max=0)
    max_exact = num_buckets // 2
    is_small = r < max_exact
    # T5's arithmetic, in float32 like T5 (clamped first so that no log(0) is taken where it is not used)
    large = (
        max_exact
        + (
            torch.log(r.clamp(min=max_exact).float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).long()
    )
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(is_small, r, large)


def t5_bucket_edges(*, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128) -> list[int]:
    """The smallest distance ``|r|`` of each bucket on one side (``r ≤ 0``), computed from :func:`t5_relative_bucket`.

    Bucket ``b`` holds the distances from ``edges[b]`` to ``edges[b + 1] - 1``; the last one
    holds everything from its edge on (``max_distance`` and beyond share it).
    """
    num_buckets, max_distance, bidirectional = _check_bucket_args(num_buckets, max_distance, bidirectional)
    check_fits("num_buckets", [num_buckets], torch.int64, what="the bucket edges")

    def bucket(distance: torch.Tensor) -> torch.Tensor:
        return t5_relative_bucket(
            -distance, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )

    # buckets grow with the distance: find each bucket's first distance by bisection (never a
    # tensor of max_distance + 1 entries, which for max_distance = 2**40 would be 8 TB)
    wanted = torch.arange(int(bucket(torch.tensor([max_distance]))[0]) + 1)
    lo, hi = torch.zeros_like(wanted), torch.full_like(wanted, max_distance)
    while bool((lo < hi).any()):
        mid = (lo + hi) // 2
        reached = bucket(mid) >= wanted
        hi, lo = torch.where(reached, mid, hi), torch.where(reached, lo, mid + 1)
    return sorted(set(lo[bucket(lo) == wanted].tolist()))


class RelativePositionBias(nn.Module):
    """T5's learned relative bias: ``forward(q_len, k_len)`` → ``[n_heads, q_len, k_len]``.

    ``bias[h, i, j] = weight[bucket(j - i), h]`` with :func:`t5_relative_bucket`; ``weight`` is a
    learned ``[num_buckets, n_heads]`` table, initialised to zeros (no bias until training moves it),
    or from ``N(0, init_std²)`` when ``init_std > 0``.
    """

    def __init__(
        self,
        n_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        init_std: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads, minimum=1)
        self.num_buckets, self.max_distance, self.bidirectional = _check_bucket_args(
            num_buckets, max_distance, bidirectional
        )
        init_std = check_real("init_std", init_std, minimum=0.0)
        check_fits("num_buckets", [self.num_buckets, self.n_heads], torch.float32, what="the bias table")
        self.weight = nn.Parameter(torch.zeros(self.num_buckets, self.n_heads))
        if init_std > 0:
            with torch.no_grad():
                self.weight.normal_(0.0, init_std, generator=generator)

    def buckets(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        """The bucket of every (query i, key j) pair, int64 ``[q_len, k_len]``."""
        q_len = check_int("q_len", q_len, minimum=1)
        k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=1)
        check_fits("q_len", [self.n_heads, q_len, k_len], self.weight.dtype, what="the bias")
        check_fits("q_len", [q_len, k_len], torch.int64, what="the int64 offsets and buckets")
        device = self.weight.device
        relative = torch.arange(k_len, device=device)[None, :] - torch.arange(q_len, device=device)[:, None]
        return t5_relative_bucket(
            relative, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
        )

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        return self.weight[self.buckets(q_len, k_len)].permute(2, 0, 1)

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}"
        )


class ALiBiBias(nn.Module):
    """ALiBi as a module: ``forward(q_len, k_len)`` → :func:`alibi_bias` on the module's device and dtype.

    No parameters: the slopes are a fixed (non-persistent) buffer.
    """

    slopes: torch.Tensor

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = check_int("n_heads", n_heads, minimum=1)
        self.register_buffer("slopes", alibi_slopes(self.n_heads).float(), persistent=False)
        self._dtype = torch.float32  # the bias's dtype: follows .half(), .double(), .to(dtype)

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - nn.Module's signature
        """``.to()``, ``.half()``, ``.double()`` …: the slopes follow devices but are recomputed, not
        rounded: float64 for a float64 module, float32 otherwise (the bias is then rounded once)."""
        module = super()._apply(fn, recurse)
        after = self.slopes.dtype
        if after.is_floating_point and after != self._dtype:
            self._dtype = after
            work = torch.float64 if after == torch.float64 else torch.float32
            self.slopes = alibi_slopes(self.n_heads).to(device=self.slopes.device, dtype=work)
        return module

    def forward(self, q_len: int, k_len: int | None = None) -> torch.Tensor:
        q_len = check_int("q_len", q_len, minimum=1)
        k_len = q_len if k_len is None else check_int("k_len", k_len, minimum=1)
        return _alibi(self.slopes, q_len, k_len, self.slopes.dtype, self._dtype)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}"
