r"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer §3.4).

Instead of adding a vector to the token embedding, RoPE rotates each query
and key. The ``head_dim`` features form ``head_dim/2`` pairs; pair ``i`` of
the vector at position ``m`` is turned by the angle ``m·θ_i`` with

.. math::

    \theta_i = \mathrm{base}^{-2i/\mathrm{head\_dim}}, \qquad
    \begin{pmatrix} y_a \\ y_b \end{pmatrix} =
    \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
    \begin{pmatrix} x_a \\ x_b \end{pmatrix}

— in complex numbers, ``(x_a + i·x_b) · e^{i·m·θ_i}``. A rotation by ``m·θ``
followed by one by ``-n·θ`` is a rotation by ``(m - n)·θ``, so
``⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩`` depends on the positions only through
``m - n``.

Which features make a pair is the **layout**:

- ``"interleaved"``: ``(2i, 2i+1)`` — the RoFormer paper, Meta's llama
  reference code (``view_as_complex``), torchtune, GPT-J;
- ``"half"``: ``(i, i + head_dim/2)`` — Hugging Face Llama (``rotate_half``),
  GPT-NeoX.

The two are the same map up to the feature permutation
``P = [0, 2, …, head_dim-2, 1, 3, …, head_dim-1]`` (:func:`to_half_layout`):
``rope_half(x[..., P]) == rope_interleaved(x)[..., P]``.

Accuracy. Angles ``m·θ_i`` are formed in float64 and their cos/sin rounded
once to the working precision (float32, or float64 for float64 inputs); the
rotation itself runs in that precision. fp16/bf16 inputs are rotated in
float32 and rounded once at the end, so the result is the float32 result
rounded to the input's dtype. Positions stay integers: never pass them as
floats (bfloat16 cannot even hold the integers above 256).

Speed. cos/sin tables are cached per ``(head_dim, base, device, dtype)`` and
grown on demand. The interleaved layout is one complex multiplication (one
pass over ``x``); the half layout writes the sin terms of each half straight
into a preallocated output and adds the cos terms with one multiply-add over
the whole tensor — no ``rotate_half`` copy: three kernels, five passes' worth of
memory traffic. Under ``torch.compile`` the half layout is traced as one
out-of-place formula instead, which Inductor fuses into a single loop (one read
of ``x``, one write); ``apply_rope`` traces without graph breaks.
"""

from __future__ import annotations

import math
import operator
from collections import OrderedDict
from collections.abc import Sequence

import torch
from torch import nn

from ._checks import check_base, check_d_model, check_float_dtype, check_float_tensor, check_int, check_tensor

__all__ = [
    "LAYOUTS",
    "rope_frequencies",
    "apply_rope",
    "to_half_layout",
    "to_interleaved_layout",
    "RotaryEmbedding",
]

#: The two pairings in use: ``"interleaved"`` (2i, 2i+1) and ``"half"`` (i, i + head_dim/2).
LAYOUTS = ("interleaved", "half")

#: A table keeps at most this many cos (or sin) entries (rows × head_dim/2); positions
#: beyond it get their cos/sin computed directly (still in float64), not cached.
_MAX_TABLE_ENTRIES = 1 << 21
#: How many (head_dim, base, device, dtype) tables :func:`apply_rope` keeps.
_SHARED_TABLES = 8


def rope_frequencies(head_dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""``θ_i = base^(-2i/head_dim)`` for ``i = 0 … head_dim/2 - 1`` (length ``head_dim // 2``).

    Computed in float64 as ``exp(-(2i/head_dim)·ln(base))``, then cast to ``dtype``.
    The same frequencies as the sinusoidal encoding's ``ω_i`` with ``d_model = head_dim``.
    """
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    return torch.exp(-exponents * math.log(base)).to(dtype)


# --------------------------------------------------------------------------- argument checks


def _check_layout(layout: object) -> str:
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a string, 'interleaved' or 'half', got {layout!r}")
    if layout not in LAYOUTS:
        raise ValueError(
            "layout must be 'interleaved' (pairs (2i, 2i+1): RoFormer, Meta llama, torchtune) or "
            f"'half' (pairs (i, i + head_dim/2): Hugging Face rotate_half, GPT-NeoX), got {layout!r}"
        )
    return layout


def _check_x(x: object) -> torch.Tensor:
    x = check_float_tensor("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must have shape [..., seq, head_dim] (at least 2 dimensions), got shape {list(x.shape)}")
    head_dim = x.shape[-1]
    if head_dim == 0 or head_dim % 2:
        raise ValueError(
            f"x.shape[-1] is head_dim and must be a positive even number (RoPE rotates features in pairs), got {head_dim}"
        )
    return x


def _check_positions(positions: object, seq: int, device: torch.device) -> torch.Tensor | None:
    """``None`` or an int64 tensor of shape ``[seq]`` on ``device``."""
    if positions is None:
        return None
    if isinstance(positions, (range, list, tuple)):
        values = []
        for v in positions:
            # Python ints and anything that is an integer index (numpy integers, 0-d integer tensors); not bool
            try:
                if isinstance(v, bool):
                    raise TypeError
                values.append(operator.index(v))
            except TypeError:
                raise TypeError(
                    f"positions must hold integers (token indices), got a sequence with a {type(v).__name__} item: {v!r}"
                ) from None
        if values and not -(2**63) <= min(values) <= max(values) < 2**63:
            raise ValueError("positions must fit in int64 (|position| < 2**63), got a larger integer")
        positions = torch.tensor(values, dtype=torch.long)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be None, a 1-D integer tensor or a list of ints, got {type(positions).__name__}")
    if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
        raise TypeError(
            f"positions must hold integers (e.g. torch.long), got dtype {positions.dtype}: floating positions "
            "are rounded (bfloat16 cannot even hold the integers above 256), so angles would be wrong"
        )
    if positions.dim() != 1 or positions.shape[0] != seq:
        raise ValueError(
            f"positions must be a 1-D tensor of length seq = x.shape[-2] = {seq}, got shape {list(positions.shape)}"
        )
    return positions.to(device=device, dtype=torch.long)


# --------------------------------------------------------------------------- tables


def _compute_device(device: torch.device) -> torch.device:
    """Where float64 cos/sin can be computed (MPS and friends have no float64)."""
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


def _cos_sin(positions: torch.Tensor, inv_freq: torch.Tensor, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of ``positions[:, None]·θ`` computed in float64, rounded once to ``dtype``: ``[n, head_dim/2]`` each."""
    work = _compute_device(device)
    with torch.inference_mode(False), torch.no_grad():  # cached tables must be usable with autograd later
        angles = positions.to(work, torch.float64)[:, None] * inv_freq.to(work)[None, :]
        to = dict(device=device, dtype=dtype)
        return torch.cos(angles).to(**to).contiguous(), torch.sin(angles).to(**to).contiguous()


def _working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; float32, float16 and bfloat16 are rotated in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _complex_ready(x: torch.Tensor) -> bool:
    """Can ``x.unflatten(-1, (h, 2))`` be viewed as complex without a copy?"""
    return x.stride(-1) == 1 and x.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in x.stride()[:-1])


def _layout_tables(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> tuple[torch.Tensor, ...]:
    """The tables :func:`_rotate` uses for ``layout``, from cos and sin (``[n, head_dim/2]``).

    interleaved: ``(cos + i·sin,)`` — exact, it only packs the two — or ``(cos, sin)``
    where the device has no complex type; half: ``([cos | cos], -sin, sin)``.
    """
    with torch.inference_mode(False), torch.no_grad():  # cached tables must be usable with autograd later
        if layout == "half":
            return torch.cat((cos, cos), dim=-1), -sin, sin
        try:
            return (torch.complex(cos, sin),)
        except (RuntimeError, TypeError):  # pragma: no cover - devices without complex support
            return cos, sin


def _rotate(x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str, inverse: bool) -> torch.Tensor:
    """Rotate ``x`` (``[..., seq, head_dim]``, any float dtype) with the tables of :func:`_layout_tables`.

    ``inverse`` rotates by the opposite angles. Computes in the tables' precision and returns ``x.dtype``.
    """
    first = tables[0]
    work = first.dtype if layout == "half" or len(tables) == 2 else first.real.dtype
    xw = x if x.dtype == work else x.to(work)
    if layout == "half" and _compiling():
        out = _rotate_fusable(xw, tables, inverse)
    elif len(tables) == 1:  # interleaved, complex table: one pass over x
        if _compiling() or not _complex_ready(xw):  # (strides and offsets are not traceable: copy when needed)
            xw = xw.contiguous()
        z = torch.view_as_complex(xw.unflatten(-1, (xw.shape[-1] // 2, 2)))
        # (a + ib)(cos + i·sin) = (a·cos - b·sin) + i(a·sin + b·cos): pair (2i, 2i+1) turned by the angle
        out = torch.view_as_real(z * (first.conj() if inverse else first)).flatten(-2)
    elif layout == "half":
        # y = [a | b]·[cos | cos] + [b·(-sin) | a·sin]  (y_a = a·cos - b·sin, y_b = b·cos + a·sin):
        # the sin terms go straight into the two halves of the output (no rotate_half copy),
        # then one multiply-add over the whole tensor adds the cos terms. Five passes' worth of
        # memory traffic (read x, write out; read out and x, write out) against clone's two.
        # The inverse rotation (-θ) swaps the roles of -sin and sin.
        neg_sin, sin = (tables[2], tables[1]) if inverse else (tables[1], tables[2])
        out = torch.empty_like(xw)
        xa, xb = xw.chunk(2, -1)
        oa, ob = out.chunk(2, -1)
        torch.mul(xb, neg_sin, out=oa)
        torch.mul(xa, sin, out=ob)
        out.addcmul_(xw, first)
    else:  # interleaved without complex support
        second = tables[1]
        sign = -1.0 if inverse else 1.0
        out = torch.empty(xw.shape, dtype=work, device=xw.device)
        xa, xb, oa, ob = xw[..., 0::2], xw[..., 1::2], out[..., 0::2], out[..., 1::2]
        torch.mul(xa, first, out=oa).addcmul_(xb, second, value=-sign)
        torch.mul(xb, first, out=ob).addcmul_(xa, second, value=sign)
    return out if out.dtype == x.dtype else out.to(x.dtype)


def _compiling() -> bool:
    """Is this code being traced by ``torch.compile``?"""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())


def _rotate_fusable(xw: torch.Tensor, tables: tuple[torch.Tensor, ...], inverse: bool) -> torch.Tensor:
    """The half-layout rotation as one out-of-place expression, for ``torch.compile`` to fuse.

    Eager PyTorch runs each operation as its own pass over memory, which is why :func:`_rotate`
    writes into a preallocated output; a compiler instead fuses this formula into one loop that
    reads ``x`` once and writes the result once (a ``clone``'s traffic), while the writes into
    views of the eager version would be traced back into copies. (The interleaved layout's
    complex multiplication is a single pass already.)
    """
    first, neg_sin, sin = tables
    if inverse:
        neg_sin, sin = sin, neg_sin
    cos = first[..., : first.shape[-1] // 2]
    a, b = xw.chunk(2, -1)
    return torch.cat((a * cos + b * neg_sin, b * cos + a * sin), dim=-1)


class _RopeFunction(torch.autograd.Function):
    """Rotation with its exact adjoint: the gradient of ``R_m x`` is ``R_{-m}`` applied to the incoming gradient.

    Written with ``setup_context`` and a ``vmap`` rule, so ``torch.func`` transforms (``grad``, ``vjp``,
    ``vmap``, ``jacrev``) work too.
    """

    @staticmethod
    def forward(x, layout, inverse, *tables):  # type: ignore[override]
        return _rotate(x, tables, layout, inverse)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[override]
        _, ctx.layout, ctx.inverse, *tables = inputs
        ctx.tables = tuple(tables)

    @staticmethod
    def vmap(info, in_dims, x, layout, inverse, *tables):  # type: ignore[override]
        """``torch.func.vmap`` rule: the rotation acts on the last two dims, so the batch dim moves to the front."""
        if any(d is not None for d in in_dims[1:]):
            raise ValueError("vmap over apply_rope can batch x only, not its cos/sin tables")
        if in_dims[0] is not None:
            x = x.movedim(in_dims[0], 0)
        return _RopeFunction.apply(x, layout, inverse, *tables), (0 if in_dims[0] is not None else None)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        tables = ctx.tables
        return (_RopeFunction.apply(grad, ctx.layout, not ctx.inverse, *tables), None, None) + (None,) * len(tables)


def _under_torch_func(x: torch.Tensor) -> bool:
    """Is ``x`` wrapped by a ``torch.func`` transform (``vmap``, ``grad``, …)? Those need :class:`_RopeFunction`'s rules."""
    if _compiling():
        return False
    is_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return bool(is_wrapped and is_wrapped(x))


def _apply(x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str) -> torch.Tensor:
    if (x.requires_grad and torch.is_grad_enabled()) or _under_torch_func(x):
        return _RopeFunction.apply(x, layout, False, *tables)
    return _rotate(x, tables, layout, False)


# --------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    r"""Rotates queries or keys by their positions, with a cached cos/sin table.

    ``forward(x, positions=None)`` takes ``x`` of shape ``[..., seq, head_dim]`` (e.g.
    ``[batch, heads, seq, head_dim]``) and returns ``R_pos x`` with ``x``'s shape and
    dtype; ``positions`` default to ``0 … seq-1`` (pass an offset range for cached
    decoding). The table rows ``cos(m·θ_i)``, ``sin(m·θ_i)`` are computed in float64
    and stored in float32 (float64 for float64 inputs) on the input's device: the
    cache follows the input's device and dtype and grows (to the next power of two)
    when longer sequences or larger positions arrive. Negative positions, and
    positions beyond :attr:`max_cached_len`, get their cos/sin computed directly
    (still from float64 angles) instead of cached.

    ``cos`` and ``sin`` (``[max_len, head_dim/2]``) are non-persistent buffers: not in
    ``state_dict`` (they are a function of ``head_dim`` and ``base``). No parameters.
    """

    cos: torch.Tensor
    sin: torch.Tensor

    def __init__(self, head_dim: int, base: float = 10000.0, *, layout: str = "interleaved") -> None:
        super().__init__()
        self.head_dim = check_d_model(head_dim, "head_dim")
        self.base = check_base(base)
        self.layout = _check_layout(layout)
        self.register_buffer("cos", torch.empty(0, self.head_dim // 2), persistent=False)
        self.register_buffer("sin", torch.empty(0, self.head_dim // 2), persistent=False)
        self._derived: dict[str, tuple[torch.Tensor, tuple[torch.Tensor, ...]]] = {}
        # the last tables(None, seq, ...) answer per layout, so repeated calls skip the slicing
        self._recent: dict[str, tuple[tuple, torch.Tensor, tuple[torch.Tensor, ...]]] = {}

    @property
    def max_len(self) -> int:
        """Positions ``0 … max_len-1`` the cache holds now (it grows on demand)."""
        return self.cos.shape[0]

    @property
    def max_cached_len(self) -> int:
        """The cache never grows beyond this many positions (``2**21 / (head_dim/2)``, at least 4096)."""
        return max(4096, _MAX_TABLE_ENTRIES // (self.head_dim // 2))

    def _ensure(self, length: int, device: torch.device, dtype: torch.dtype) -> None:
        """Make the cache hold positions ``0 … length-1`` on ``device`` in ``dtype``."""
        fresh = self.cos.device != device or self.cos.dtype != dtype
        if not fresh and length <= self.max_len:
            return
        want = max(length, 64, 0 if fresh else self.max_len)
        rows = min(1 << (want - 1).bit_length(), self.max_cached_len)
        self.cos, self.sin = _cos_sin(torch.arange(rows), rope_frequencies(self.head_dim, self.base), device, dtype)

    def _cached_layout_tables(self, layout: str) -> tuple[torch.Tensor, ...]:
        """:func:`_layout_tables` of the whole cache, rebuilt when ``cos`` was replaced (growth, ``.to()``)."""
        entry = self._derived.get(layout)
        if entry is None or entry[0] is not self.cos:
            entry = self._derived[layout] = (self.cos, _layout_tables(self.cos, self.sin, layout))
        return entry[1]

    def tables(
        self, positions: torch.Tensor | None, seq: int, device: torch.device, dtype: torch.dtype, layout: str
    ) -> tuple[torch.Tensor, ...]:
        """The rotation tables for ``positions`` (``None``: ``0 … seq-1``) in ``layout``, one row per position.

        ``positions`` must already be a checked int64 tensor on ``device`` (see :func:`apply_rope`).
        """
        if positions is None:
            key = (seq, device, dtype)
            recent = self._recent.get(layout)
            if recent is not None and recent[0] == key and recent[1] is self._buffers["cos"]:
                return recent[2]
            if seq <= self.max_cached_len:
                self._ensure(seq, device, dtype)
                answer = tuple(t[:seq] for t in self._cached_layout_tables(layout))
                self._recent[layout] = (key, self.cos, answer)
                return answer
            positions = torch.arange(seq, device=device)
        lo, hi = (int(v) for v in torch.aminmax(positions)) if positions.numel() else (0, -1)
        if 0 <= lo and hi < self.max_cached_len:
            self._ensure(hi + 1, device, dtype)
            return tuple(t.index_select(0, positions) for t in self._cached_layout_tables(layout))
        # negative or very large positions: exact float64 angles, not cached
        cos, sin = _cos_sin(positions, rope_frequencies(self.head_dim, self.base), device, dtype)
        return _layout_tables(cos, sin, layout)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | Sequence[int] | None = None) -> torch.Tensor:
        x = _check_x(x)
        if x.shape[-1] != self.head_dim:
            raise ValueError(f"x.shape[-1] must be head_dim = {self.head_dim}, got shape {list(x.shape)}")
        pos = _check_positions(positions, x.shape[-2], x.device)
        return _apply(x, self.tables(pos, x.shape[-2], x.device, _working_dtype(x.dtype), self.layout), self.layout)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}, max_len={self.max_len}"


_shared: OrderedDict[tuple, RotaryEmbedding] = OrderedDict()


def _shared_tables(head_dim: int, base: float, device: torch.device, dtype: torch.dtype) -> RotaryEmbedding:
    """The cache :func:`apply_rope` uses: one table per (head_dim, base, device, dtype), least recently used dropped."""
    key = (head_dim, base, str(device), dtype)
    module = _shared.get(key)
    if module is None:
        module = _shared[key] = RotaryEmbedding(head_dim, base)
        while len(_shared) > _SHARED_TABLES:
            _shared.popitem(last=False)
    else:
        _shared.move_to_end(key)
    return module


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | Sequence[int] | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> torch.Tensor:
    r"""Rotate every pair of features of ``x`` by ``m·θ_i`` (``m`` = position, ``θ_i = base^(-2i/head_dim)``).

    ``x`` is ``[..., seq, head_dim]`` with a floating dtype; ``positions`` is ``None``
    (``0 … seq-1``) or an integer tensor (or list) of length ``seq`` — e.g.
    ``torch.arange(start, start + seq)`` for cached decoding; any integers work,
    negative ones rotate backwards. ``layout`` is ``"interleaved"`` (pairs
    ``(2i, 2i+1)``) or ``"half"`` (pairs ``(i, i + head_dim/2)``).

    Returns a new tensor with ``x``'s shape and dtype. Angles come from float64;
    the rotation runs in float32 (float64 for float64 ``x``), so fp16/bf16 inputs
    lose nothing beyond the final rounding. Differentiable (the gradient is the
    inverse rotation).
    """
    x = _check_x(x)
    base = check_base(base)
    layout = _check_layout(layout)
    pos = _check_positions(positions, x.shape[-2], x.device)
    dtype = _working_dtype(x.dtype)
    tables = _shared_tables(x.shape[-1], base, x.device, dtype)
    return _apply(x, tables.tables(pos, x.shape[-2], x.device, dtype, layout), layout)


# --------------------------------------------------------------------------- layouts


def _check_pair_dim(x: object, dim: object) -> tuple[torch.Tensor, int]:
    x = check_tensor("x", x)
    dim = check_int("dim", dim)
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim must name a dimension of x (shape {list(x.shape)}), got {dim}")
    dim %= x.dim()
    size = x.shape[dim]
    if size == 0 or size % 2:
        raise ValueError(f"x.shape[{dim}] (head_dim) must be a positive even number, got {size}")
    return x, dim


def to_half_layout(x: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
    """Reorder features from the interleaved layout to the half layout: ``x[..., P]``.

    ``P = [0, 2, 4, …, head_dim-2, 1, 3, …, head_dim-1]``: feature ``2i`` goes to ``i``
    and ``2i+1`` to ``i + head_dim/2``, so pair ``(2i, 2i+1)`` becomes pair
    ``(i, i + head_dim/2)``. Then ``apply_rope(to_half_layout(x), layout="half") ==
    to_half_layout(apply_rope(x))``. Checkpoint converters apply this to the output
    features of each head's q and k projection weights: for ``W_q`` of shape
    ``[heads·head_dim, d_model]`` use ``to_half_layout(W_q.view(heads, head_dim, -1), dim=1)``.
    """
    x, dim = _check_pair_dim(x, dim)
    half = x.shape[dim] // 2
    return x.unflatten(dim, (half, 2)).transpose(dim, dim + 1).flatten(dim, dim + 1)


def to_interleaved_layout(x: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
    """The inverse of :func:`to_half_layout`: features ``i`` and ``i + head_dim/2`` go to ``2i`` and ``2i+1``."""
    x, dim = _check_pair_dim(x, dim)
    half = x.shape[dim] // 2
    return x.unflatten(dim, (2, half)).transpose(dim, dim + 1).flatten(dim, dim + 1)
