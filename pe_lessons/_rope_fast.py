r"""The fast path behind :mod:`pe_lessons.rotary`: cached tables, fused kernels, autograd and ``torch.compile``.

Read :func:`pe_lessons.rotary.rope_formula` first: it is the definition, one step per
line. Everything here computes the same numbers with fewer passes over memory:

- **Tables.** cos and sin of ``m·θ_i`` are computed once per ``(frequencies, attention
  factor, device, dtype)`` from float64 angles, rounded once to the working precision,
  cached and grown on demand (:class:`CosSinCache`). :func:`pe_lessons.rotary.apply_rope` shares
  them through a cache bounded by **bytes** (:data:`CACHE_LIMIT_BYTES`; least recently used
  tables are dropped first, :func:`clear_cache` drops them all).
- **Interleaved layout**: one complex multiplication (one pass over ``x``).
- **Half layout, eager**: the sin terms of each half are written straight into a
  preallocated output, then one multiply-add over the whole tensor adds the cos terms — no
  ``rotate_half`` copy. **Under torch.compile** the half layout is traced as one out-of-place
  formula instead, which Inductor fuses into a single loop; ``apply_rope`` traces without
  graph breaks.
- **Autograd**: :class:`RopeFunction` has the exact adjoint (the gradient of ``R_m x`` is
  ``R_{-m}`` applied to the incoming gradient) and a ``vmap`` rule, so ``torch.func``
  transforms (``grad``, ``vjp``, ``vmap``, ``jacrev``) work. Calls that need a gradient, and
  tensors wrapped by a ``torch.func`` transform (recognised through public API: they have no
  storage), go through it; other calls run the kernels directly.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

#: A cached table keeps at most this many cos (or sin) entries (rows × pairs); positions beyond it
#: get their cos/sin computed directly (still from float64 angles), not cached.
MAX_TABLE_ENTRIES = 1 << 21
#: The tables :func:`pe_lessons.rotary.apply_rope` shares are dropped, least recently used first,
#: once together they hold more than this many bytes (a single larger table is used once, not kept).
CACHE_LIMIT_BYTES = 64 * 2**20


def compute_device(device: torch.device) -> torch.device:
    """Where float64 cos/sin can be computed (MPS and friends have no float64)."""
    return device if device.type in ("cpu", "cuda") else torch.device("cpu")


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; float32, float16 and bfloat16 are rotated in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, factor: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``factor·cos`` and ``factor·sin`` of ``positions[..., None]·θ`` from float64, rounded once to ``dtype``.

    ``positions`` of any shape ``S`` (integers or floats) give two tensors of shape ``S + [len(θ)]``.
    """
    work = compute_device(device)
    with torch.inference_mode(False), torch.no_grad():  # cached tables must be usable with autograd later
        angles = positions.to(work, torch.float64)[..., None] * inv_freq.to(work, torch.float64)
        cos, sin = torch.cos(angles), torch.sin(angles)
        if factor != 1.0:
            cos, sin = cos * factor, sin * factor
        return cos.to(device=device, dtype=dtype).contiguous(), sin.to(device=device, dtype=dtype).contiguous()


def layout_tables(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> tuple[torch.Tensor, ...]:
    """The tables :func:`rotate` uses for ``layout``, from cos and sin (``[..., pairs]``).

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


def _complex_ready(x: torch.Tensor) -> bool:
    """Can ``x.unflatten(-1, (h, 2))`` be viewed as complex without a copy?"""
    return x.stride(-1) == 1 and x.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in x.stride()[:-1])


def compiling() -> bool:
    """Is this code being traced by ``torch.compile``?"""
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    return bool(is_compiling and is_compiling())


def rotate(x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str, inverse: bool) -> torch.Tensor:
    """Rotate ``x`` (``[..., seq, head_dim]``, any float dtype) with the tables of :func:`layout_tables`.

    The tables broadcast against ``x`` (``[seq, pairs]``, or ``[batch, 1, …, seq, pairs]`` for
    per-row positions). ``inverse`` rotates by the opposite angles. Computes in the tables'
    precision and returns ``x.dtype``.
    """
    multiplier = tables[0]  # the table x is multiplied by: cos + i·sin, [cos | cos], or cos
    work = multiplier.dtype if layout == "half" or len(tables) == 2 else multiplier.real.dtype
    xw = x if x.dtype == work else x.to(work)
    if layout == "half" and compiling():
        out = rotate_fusable(xw, tables, inverse)
    elif len(tables) == 1:  # interleaved, complex table: one pass over x
        if compiling() or not _complex_ready(xw):  # (strides and offsets are not traceable: copy when needed)
            xw = xw.contiguous()
        z = torch.view_as_complex(xw.unflatten(-1, (xw.shape[-1] // 2, 2)))
        # (a + ib)(cos + i·sin) = (a·cos - b·sin) + i(a·sin + b·cos): pair (2i, 2i+1) turned by the angle
        out = torch.view_as_real(z * (multiplier.conj() if inverse else multiplier)).flatten(-2)
    elif layout == "half":
        # y = [a | b]·[cos | cos] + [b·(-sin) | a·sin]  (y_a = a·cos - b·sin, y_b = b·cos + a·sin):
        # the sin terms go straight into the two halves of the output (no rotate_half copy),
        # then one multiply-add over the whole tensor adds the cos terms. Five passes' worth of
        # memory traffic (read x, write out; read out and x, write out) against clone's two.
        # The inverse rotation (-θ) swaps the roles of -sin and sin.
        neg_sin, sin = (tables[2], tables[1]) if inverse else (tables[1], tables[2])
        if multiplier.dim() <= 2:  # one table row per position: the output has x's shape
            out = torch.empty_like(xw, memory_format=torch.contiguous_format)
        else:  # per-row tables [batch, 1, …, seq, head_dim]
            out = torch.empty(torch.broadcast_shapes(xw.shape, multiplier.shape), dtype=work, device=xw.device)
        xa, xb = xw.chunk(2, -1)
        oa, ob = out.chunk(2, -1)
        torch.mul(xb, neg_sin, out=oa)
        torch.mul(xa, sin, out=ob)
        out.addcmul_(xw, multiplier)
    else:  # interleaved without complex support
        second = tables[1]
        sign = -1.0 if inverse else 1.0
        out = torch.empty(xw.shape, dtype=work, device=xw.device)
        xa, xb, oa, ob = xw[..., 0::2], xw[..., 1::2], out[..., 0::2], out[..., 1::2]
        torch.mul(xa, multiplier, out=oa).addcmul_(xb, second, value=-sign)
        torch.mul(xb, multiplier, out=ob).addcmul_(xa, second, value=sign)
    return out if out.dtype == x.dtype else out.to(x.dtype)


def rotate_fusable(xw: torch.Tensor, tables: tuple[torch.Tensor, ...], inverse: bool) -> torch.Tensor:
    """The half-layout rotation as one out-of-place expression, for ``torch.compile`` to fuse.

    Eager PyTorch runs each operation as its own pass over memory, which is why :func:`rotate`
    writes into a preallocated output; a compiler instead fuses this formula into one loop that
    reads ``x`` once and writes the result once (a ``clone``'s traffic), while the writes into
    views of the eager version would be traced back into copies. (The interleaved layout's
    complex multiplication is a single pass already.)
    """
    multiplier, neg_sin, sin = tables
    if inverse:
        neg_sin, sin = sin, neg_sin
    cos = multiplier[..., : multiplier.shape[-1] // 2]
    a, b = xw.chunk(2, -1)
    return torch.cat((a * cos + b * neg_sin, b * cos + a * sin), dim=-1)


class RopeFunction(torch.autograd.Function):
    """Rotation with its exact adjoint: the gradient of ``R_m x`` is ``R_{-m}`` applied to the incoming gradient.

    Written with ``setup_context`` and a ``vmap`` rule, so ``torch.func`` transforms (``grad``, ``vjp``,
    ``vmap``, ``jacrev``) work too.
    """

    @staticmethod
    def forward(x, layout, inverse, *tables):  # type: ignore[override]
        return rotate(x, tables, layout, inverse)

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
        return RopeFunction.apply(x, layout, inverse, *tables), (0 if in_dims[0] is not None else None)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        tables = ctx.tables
        return (RopeFunction.apply(grad, ctx.layout, not ctx.inverse, *tables), None, None) + (None,) * len(tables)


def _wrapped(x: torch.Tensor) -> bool:
    """Is ``x`` a ``torch.func`` wrapper (``vmap``'s batched tensors, ``grad``'s tracking tensors)?

    Those have no storage of their own, so asking for their data pointer fails: a public-API test
    (``Tensor.data_ptr``) that costs nothing for ordinary tensors.
    """
    try:
        x.data_ptr()
    except RuntimeError:
        return True
    return False


def apply_tables(x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str) -> torch.Tensor:
    """``R x`` with precomputed tables: through :class:`RopeFunction` when a gradient or a ``torch.func``
    transform needs its rules, else the plain kernels (an autograd Function costs tens of µs per call)."""
    if x.requires_grad and torch.is_grad_enabled():
        return RopeFunction.apply(x, layout, False, *tables)
    if not compiling() and _wrapped(x):
        return RopeFunction.apply(x, layout, False, *tables)
    return rotate(x, tables, layout, False)


# --------------------------------------------------------------------------- cached tables


class CosSinCache:
    """cos/sin of ``m·θ_i`` (times the attention factor) for positions ``0 … max_len-1``, grown on demand.

    One object per set of frequencies; it follows the device and dtype it is asked for
    (asking for another one rebuilds it) and never grows beyond ``max_rows`` positions.
    """

    def __init__(self, inv_freq: torch.Tensor, factor: float = 1.0) -> None:
        self.inv_freq = inv_freq.detach().to("cpu", torch.float64)
        self.factor = float(factor)
        pairs = self.inv_freq.numel()
        self.max_rows = max(4096, MAX_TABLE_ENTRIES // max(pairs, 1))
        self.cos = torch.empty(0, pairs)
        self.sin = torch.empty(0, pairs)
        self._layout_tables: dict[str, tuple[torch.Tensor, ...]] = {}
        # the last lookup(None, seq, ...) answer per layout, so repeated calls skip the slicing
        self._last_slice: dict[str, tuple[tuple, tuple[torch.Tensor, ...]]] = {}
        #: bumped whenever the tables held change (growth, new device or dtype, a new layout)
        self.generation = 0

    @property
    def max_len(self) -> int:
        return self.cos.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held by the cos/sin tables and the per-layout tables derived from them."""
        held = [self.cos, self.sin] + [t for ts in self._layout_tables.values() for t in ts]
        return sum(t.numel() * t.element_size() for t in held)

    def ensure(self, length: int, device: torch.device, dtype: torch.dtype) -> None:
        """Hold positions ``0 … length-1`` on ``device`` in ``dtype`` (rows rounded up to a power of two)."""
        fresh = self.cos.device != device or self.cos.dtype != dtype
        if not fresh and length <= self.max_len:
            return
        want = max(length, 64, 0 if fresh else self.max_len)
        rows = min(1 << (want - 1).bit_length(), self.max_rows)
        self.cos, self.sin = cos_sin(torch.arange(rows), self.inv_freq, self.factor, device, dtype)
        self._layout_tables.clear()
        self._last_slice.clear()
        self.generation += 1

    def layout_tables(self, layout: str) -> tuple[torch.Tensor, ...]:
        """:func:`layout_tables` of the whole cache, built once per growth."""
        tables = self._layout_tables.get(layout)
        if tables is None:
            tables = self._layout_tables[layout] = layout_tables(self.cos, self.sin, layout)
            self.generation += 1
        return tables

    def lookup(
        self,
        positions: torch.Tensor | None,
        bounds: tuple[int, int] | None,
        seq: int,
        device: torch.device,
        dtype: torch.dtype,
        layout: str,
    ) -> tuple[torch.Tensor, ...]:
        """The rotation tables for ``positions`` (``None``: ``0 … seq-1``), shaped ``positions.shape + [k]``.

        ``positions`` is a checked int64 or float64 tensor on ``device``. ``bounds`` are its
        smallest and largest values when known on the host; without them (a tensor on an
        accelerator) nothing is read back — no synchronisation — and the rows are computed
        directly from float64 angles instead of gathered from the cache.
        """
        if positions is None:
            key = (seq, device, dtype)
            last = self._last_slice.get(layout)
            if last is not None and last[0] == key:
                return last[1]
            if seq <= self.max_rows:
                self.ensure(seq, device, dtype)
                answer = tuple(t[:seq] for t in self.layout_tables(layout))
                self._last_slice[layout] = (key, answer)
                return answer
            positions = torch.arange(seq, device=device)
            bounds = (0, seq - 1)
        if positions.dtype == torch.long and bounds is not None and 0 <= bounds[0] and bounds[1] < self.max_rows:
            if positions.numel() == 0:
                self.ensure(1, device, dtype)
            else:
                self.ensure(bounds[1] + 1, device, dtype)
            flat = positions.reshape(-1)
            return tuple(t.index_select(0, flat).unflatten(0, positions.shape) for t in self.layout_tables(layout))
        # fractional, negative, very large or device-resident positions: exact float64 angles, not cached
        cos, sin = cos_sin(positions, self.inv_freq, self.factor, device, dtype)
        return layout_tables(cos, sin, layout)


_shared: OrderedDict[tuple, CosSinCache] = OrderedDict()


def shared_lookup(
    freq_key: object,
    inv_freq: torch.Tensor,
    factor: float,
    positions: torch.Tensor | None,
    bounds: tuple[int, int] | None,
    seq: int,
    device: torch.device,
    dtype: torch.dtype,
    layout: str,
) -> tuple[torch.Tensor, ...]:
    """:meth:`CosSinCache.lookup` on the tables :func:`pe_lessons.rotary.apply_rope` shares.

    ``freq_key`` identifies ``(inv_freq, factor)``. One :class:`CosSinCache` per ``(freq_key, device,
    dtype)``; when one grows, the least recently used are dropped until all fit in
    :data:`CACHE_LIMIT_BYTES` (a table larger than that on its own is used for this call only).
    """
    key = (freq_key, str(device), dtype)
    tables = _shared.get(key)
    if tables is None:
        tables = _shared[key] = CosSinCache(inv_freq, factor)
    else:
        _shared.move_to_end(key)
    generation = tables.generation
    answer = tables.lookup(positions, bounds, seq, device, dtype, layout)
    if tables.generation != generation:
        trim_cache()
    return answer


def trim_cache() -> None:
    """Drop least recently used shared tables until together they hold at most :data:`CACHE_LIMIT_BYTES`."""
    total = sum(t.nbytes for t in _shared.values())
    while _shared and total > CACHE_LIMIT_BYTES:
        _, dropped = _shared.popitem(last=False)
        total -= dropped.nbytes


def cache_bytes() -> int:
    """Bytes held now by the tables :func:`pe_lessons.rotary.apply_rope` shares."""
    return sum(t.nbytes for t in _shared.values())


def clear_cache() -> None:
    """Drop every table :func:`pe_lessons.rotary.apply_rope` shares (they are rebuilt on demand)."""
    _shared.clear()
