r"""The fast path behind :mod:`pe_lessons.rotary`: cached tables, fused kernels, autograd and ``torch.compile``.

Read :func:`pe_lessons.rotary.rope_formula` first: it is the definition, one step per
line. Everything here computes the same numbers with fewer passes over memory:

- **Tables.** cos and sin of ``m·θ_i`` are computed once per ``(frequencies, attention
  factor, device, dtype)`` from float64 angles, rounded once to the working precision,
  cached and grown on demand (:class:`CosSinCache`). :func:`pe_lessons.rotary.apply_rope` shares
  them through a cache bounded by **bytes** (:data:`CACHE_LIMIT_BYTES`; least recently used
  tables are dropped first, :func:`clear_cache` drops them all).
- **Interleaved layout, eager**: one complex multiplication (one pass over ``x``).
- **Half layout, eager**: one multiply writes the cos terms of the whole tensor into a
  preallocated output, then each half adds its sin term in place with a multiply-add — no
  ``rotate_half`` copy.
- **float16/bfloat16, eager**: rotated in float32 and rounded once. Eager PyTorch on a CPU
  cannot fuse a dtype conversion into arithmetic, so the conversion up and the one down are
  passes of their own (:func:`rotate` counts the bytes); the compiled path fuses them.
- **Chunks**: where the eager rotation takes several kernels, a large tensor goes through them
  one cache-sized chunk at a time (:func:`chunks`), so only the first pass over a chunk reads
  memory and the others find it in the cache.
- **Under torch.compile** both layouts are traced as one real-arithmetic, out-of-place formula
  (:func:`rotate_fusable`; Inductor has no complex numbers) that Inductor fuses into a single
  loop with the conversions inside, and ``apply_rope`` traces without graph breaks for every
  form of positions (nothing is read back to the host, the cache is only read).
- **Autograd**: :class:`RopeFunction` has the exact adjoint (the gradient of ``R_m x`` is
  ``R_{-m}`` applied to the incoming gradient) and a ``vmap`` rule, so ``torch.func``
  transforms (``grad``, ``vjp``, ``vmap``, ``jacrev``) work. Calls that need a gradient, and
  tensors wrapped by a ``torch.func`` transform (recognised through public API: they have no
  storage), go through it; other calls run the kernels directly.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

import torch

from .sinusoidal import float64_device

#: A cached table keeps at most this many cos (or sin) entries (rows × pairs); positions beyond it
#: get their cos/sin computed directly (still from float64 angles), not cached.
MAX_TABLE_ENTRIES = 1 << 21
#: The tables :func:`pe_lessons.rotary.apply_rope` shares are dropped, least recently used first,
#: once together they hold more than this many bytes (a single larger table is used once, not kept).
CACHE_LIMIT_BYTES = 64 * 2**20


def working_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64; float32, float16 and bfloat16 are rotated in float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _table_context():
    """Cached tables must be usable with autograd later: built outside inference mode, without a graph.

    Under ``torch.compile`` nothing is cached (no side effects are traced), so no context is needed.
    """
    if compiling():
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode(False))
    stack.enter_context(torch.no_grad())
    return stack


def cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, factor: float, device: torch.device, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``factor·cos`` and ``factor·sin`` of ``positions[..., None]·θ`` from float64, rounded once to ``dtype``.

    ``positions`` of any shape ``S`` (integers or floats) give two tensors of shape ``S + [len(θ)]``.
    """
    work = float64_device(device)  # MPS and friends have no float64
    with _table_context():
        angles = positions.to(work, torch.float64)[..., None] * inv_freq.to(work, torch.float64)
        cos, sin = torch.cos(angles), torch.sin(angles)
        if factor != 1.0:
            cos, sin = cos * factor, sin * factor
        return cos.to(device=device, dtype=dtype).contiguous(), sin.to(device=device, dtype=dtype).contiguous()


#: The forms of the rotation tables (:func:`layout_tables`), one per kernel of :func:`rotate`.
TABLE_KINDS = ("complex", "half", "pairs")


def table_kind(layout: str, dtype: torch.dtype) -> str:
    """Which tables :func:`rotate` wants for ``layout`` and an input of ``dtype``.

    Under ``torch.compile``: ``"pairs"`` (plain cos and sin, for the fused formula). Eager:
    ``"complex"`` for the interleaved layout, ``"half"`` for the half layout (``dtype`` is kept
    for kernels that would depend on it).
    """
    if compiling():
        return "pairs"
    return "complex" if layout == "interleaved" else "half"


def layout_tables(cos: torch.Tensor, sin: torch.Tensor, kind: str) -> tuple[torch.Tensor, ...]:
    """The tables :func:`rotate` uses, from cos and sin (``[..., pairs]``), for a kind of :data:`TABLE_KINDS`.

    ``"complex"``: ``(cos + i·sin,)`` — exact, it only packs the two — or ``(cos, sin)`` where the
    device has no complex type; ``"half"``: ``([cos | cos], -sin, sin)``; ``"pairs"``: ``(cos, sin)``.
    """
    if kind == "pairs":
        return cos, sin
    with _table_context():
        if kind == "half":
            return torch.cat((cos, cos), dim=-1), -sin, sin
        try:
            return (torch.complex(cos, sin),)
        except (RuntimeError, TypeError):  # pragma: no cover - devices without complex support
            return cos, sin


def _complex_ready(x: torch.Tensor) -> bool:
    """Can ``x.unflatten(-1, (h, 2))`` be viewed as complex without a copy?"""
    return x.stride(-1) == 1 and x.storage_offset() % 2 == 0 and all(s % 2 == 0 for s in x.stride()[:-1])


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


def compiling() -> bool:
    """Is this code being traced by ``torch.compile``?"""
    return bool(_is_compiling is not None and _is_compiling())


def _covers(shape: torch.Size, table: torch.Tensor) -> bool:
    """Does a tensor of ``shape`` take ``table`` (``[..., rows, k]``) without growing: do the table's
    dimensions other than the last broadcast into ``shape``'s?

    (A plain-Python check: ``torch.broadcast_shapes`` costs more than a decoding step's rotation.)
    """
    t, s = table.shape[:-1], shape[:-1]
    return len(t) <= len(s) and all(a in (1, b) for a, b in zip(reversed(t), reversed(s)))


def _as_pairs(tables: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` from tables of any kind."""
    if len(tables) == 2:
        return tables[0], tables[1]
    if len(tables) == 3:  # ([cos | cos], -sin, sin)
        return tables[0][..., : tables[0].shape[-1] // 2], tables[2]
    return tables[0].real, tables[0].imag


#: Eager kernels over a large tensor on the CPU go through it in runs of positions (:func:`chunks`),
#: so that the passes after the first over a run find it in the CPU's cache instead of memory: about
#: this many elements of ``x`` per thread per run (512 KiB in float32). Tuned at two threads on a
#: 2-core Xeon with 2 MiB of L2 cache per core (float32 half, x of 4×8×1024×64: 128K–192K per thread
#: took 2.24–2.27× clone's time, 96K 2.3×, 64K and 256K 2.5×, 32K 4.4×; ``python tools/rope_order.py --sizes``).
CHUNK_ELEMENTS_PER_THREAD = 1 << 17


def rotate(x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str, inverse: bool) -> torch.Tensor:
    """Rotate ``x`` (``[..., seq, head_dim]``, any float dtype) with the tables of :func:`layout_tables`.

    The tables broadcast against ``x`` (``[seq, pairs]``, or ``[batch, 1, …, seq, pairs]`` for
    per-row positions). ``inverse`` rotates by the opposite angles. Computes in the tables'
    precision and returns ``x.dtype``.

    Eager PyTorch runs every operation as its own pass over memory, and on a CPU it cannot fuse a
    dtype conversion into arithmetic (an operation on float16/bfloat16 and float32 tensors first
    converts into a temporary). Bytes moved per element of ``x``, each kernel counted as a pass
    over memory (as :func:`pe_lessons.optrace.trace_ops` counts them; float32 ``x``: clone moves 8,
    bfloat16/float16: clone moves 4):

    - interleaved, float32: one complex multiplication — 8 bytes, clone's traffic;
    - interleaved, float16/bfloat16: a converting copy up to float32, a complex multiplication, a
      converting copy down — 20 bytes, what Hugging Face's five bfloat16 passes (``x·cos``,
      ``-x₂``, ``cat``, ``·sin``, ``+``) move, but rounded once, from float32;
    - half, float32: the cos terms written into the output, then a multiply-add into each half — 20;
    - half, float16/bfloat16: the same between a converting copy up and one down — 32 bytes
      (permuting the pairs next to each other during the conversion would save the difference,
      but strided copies run far slower than contiguous ones on a CPU: about 4x slower here).

    All but the first are several kernels, so a large contiguous ``x`` goes through them in runs
    of positions (:func:`chunks`, about :data:`CHUNK_ELEMENTS_PER_THREAD` elements per thread):
    all the kernels over one run, then the next run. The bytes above are still moved, kernel by
    kernel, but a run is small enough to stay in the CPU's cache between its kernels, so ``x`` is
    read from memory once and the result written back once, the other passes finding the run in
    the cache; the float16/bfloat16 runs are converted into two float32 scratch buffers of one
    run's size, reused run after run. A small tensor is one run: a decoding step pays nothing for
    this. (Measured on a 2-core Xeon, one thread, CPU time, ``x`` of 4×8×1024×64, with the sin terms
    first: float32 half from 2.9x to 2.3x clone's time, bfloat16 half from 8.9x to 5.5x. For today's
    kernel order see :func:`_turn_halves`.)

    Under ``torch.compile`` (``"pairs"`` tables) both layouts are one out-of-place formula
    (:func:`rotate_fusable`) that Inductor fuses into a single loop with the conversions inside:
    clone's traffic in every dtype.
    """
    if compiling() or len(tables) == 2:  # the fused formula (also devices without complex numbers)
        return rotate_fusable(x, *_as_pairs(tables), layout, inverse)
    work = tables[0].real.dtype  # the working precision: float32, or float64 for float64 x
    if len(tables) == 1 and x.dtype == work:  # one pass: the complex product is the output
        return _rotate_complex(x, tables[0].conj() if inverse else tables[0])
    if len(tables) == 1:
        tables = (tables[0].conj().resolve_conj(),) if inverse else tables  # (once, not per run)
    elif inverse:  # the inverse rotation (-θ) swaps the roles of -sin and sin
        tables = (tables[0], tables[2], tables[1])
    if not _covers(x.shape, tables[0]):  # (tables with more rows than x: the result is larger; all share rows)
        x = x.expand(torch.broadcast_shapes(x.shape[:-1], tables[0].shape[:-1]) + x.shape[-1:])
    kernel = _turn_halves if len(tables) == 3 else _turn_pairs
    if x.dtype != work and _positions_per_run(x, tables) == x.shape[-2]:  # float16/bfloat16, one run
        xw = x.to(work)
        if not xw.is_contiguous():
            xw = xw.contiguous()
        ow = xw if layout == "interleaved" else torch.empty_like(xw)  # (the complex product in place)
        kernel(*_kernel_views(xw, layout), *_kernel_views(ow, layout), *tables)
        return ow.to(x.dtype)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.dtype == work:
        for run in chunks(x, (*_kernel_views(x, layout), *_kernel_views(out, layout), *tables)):
            kernel(*run)
        return out
    # float16/bfloat16: each run is copied up into float32 scratch, rotated into a second scratch
    # buffer and rounded once into the output (the first run is the largest; views made once per shape)
    runs = chunks(x, (x, out, *tables))
    scratch = torch.empty((2, *runs[0][0].shape), dtype=work, device=x.device)
    scratch_views: dict[torch.Size, tuple] = {}
    for xc, oc, *tc in runs:
        if xc.shape not in scratch_views:
            xw, ow = scratch.flatten(1)[:, : xc.numel()].unflatten(1, xc.shape).unbind(0)
            scratch_views[xc.shape] = (xw, ow, _kernel_views(xw, layout) + _kernel_views(ow, layout))
        xw, ow, views = scratch_views[xc.shape]
        xw.copy_(xc)
        kernel(*views, *tc)
        oc.copy_(ow)
    return out


def _kernel_views(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, ...]:
    """What a kernel reads or writes of ``t``: ``t`` and its two halves (half layout), or its pairs as complex numbers."""
    if layout == "half":
        return (t, *t.chunk(2, -1))
    return (torch.view_as_complex(t.unflatten(-1, (t.shape[-1] // 2, 2))),)


def _turn_halves(*views: torch.Tensor) -> None:
    """Half layout: ``y = [a | b]·[cos | cos] + [b·(-sin) | a·sin]`` into ``out``.

    (``y_a = a·cos - b·sin``, ``y_b = b·cos + a·sin``.) Takes ``x, a, b, out, out_a, out_b`` and the
    tables ``[cos | cos], -sin, sin``. One multiply over the whole writes the cos terms into ``out``,
    then each half adds its sin term in place (no ``rotate_half`` copy): three kernels, five passes'
    worth of traffic (read ``x``, write ``out``; read ``out`` and ``x``, write ``out``) against
    clone's two. The whole-width pass goes first: it reads each row of ``x`` whole, and the
    half-width passes after it (rows of ``pairs`` elements, one in every two) find
    it in the cache (:func:`chunks`). Float32 ``x`` of 4×8×1024×64 took 2.28–2.31× clone's time
    this way against 2.40–2.43× with the sin terms first (two threads on a 2-core Xeon; 2.09–2.12×
    against 2.32–2.34× at one; ``python tools/rope_order.py``), although on a run already in the
    cache (one block, output allocated once) the sin terms first are the cheaper order (2.6× against
    3.1× clone of the block): the gain needs the full-size call. That comparison does not separate
    its causes: reading ``x``, first writes to a fresh output (with their page faults), 32 strided
    blocks per run against one. The
    float32 scratch copy of a float16/bfloat16 input, already in the cache, goes through the same
    order, so that its result is the float32 rotation's, rounded once: the other order would be a
    little faster there, but the two orders do not give the same float32 bits (where ``addcmul_``
    fuses its product into the sum, as on AVX2/AVX512, each order fuses a different product: a third of the elements
    differ, by up to float32's epsilon times the pair's norm; rounded to bfloat16, 31–43 of 2.1
    million elements of a random ``x`` of 4×8×1024×64 differ, rounded to float16, 208–271).
    """
    x, a, b, out, out_a, out_b, multiplier, neg_sin, sin = views
    torch.mul(x, multiplier, out=out)
    out_a.addcmul_(b, neg_sin)
    out_b.addcmul_(a, sin)


def _turn_pairs(z: torch.Tensor, out: torch.Tensor, multiplier: torch.Tensor) -> None:
    """Interleaved layout: the pairs of ``x`` as complex numbers ``z = a + i·b``, times ``cos + i·sin``, into ``out``."""
    torch.mul(z, multiplier, out=out)


def chunks(x: torch.Tensor, tensors: tuple[torch.Tensor, ...]) -> list[tuple[torch.Tensor, ...]]:
    """Runs of positions that together cover ``x``: for each, its part of every tensor of ``tensors``.

    ``tensors`` are views of ``x``, of the output and tables, all with ``x``'s positions in
    dimension -2. A run takes every leading index (batch, heads) of some consecutive positions,
    about :data:`CHUNK_ELEMENTS_PER_THREAD` elements per thread, and only its own rows of the tables
    (per-row tables too), so the tables are read once in all. A small ``x``, one that is not
    contiguous or not on the CPU, or a tensor that broadcasts along the positions: one run,
    ``tensors`` themselves.
    """
    step = _positions_per_run(x, tensors)
    if step == x.shape[-2]:
        return [tensors]
    return list(zip(*(t.split(step, -2) for t in tensors)))  # (split: all the views of a dimension in one call)


def _positions_per_run(x: torch.Tensor, tensors: tuple[torch.Tensor, ...]) -> int:
    """How many positions a run of :func:`chunks` takes: all of them (one run) for a small ``x``, one
    that is not contiguous, a tensor that broadcasts along the positions, or ``x`` off the CPU (runs
    are sized for a CPU core's cache; a GPU is best given each kernel over the whole tensor at once)."""
    seq = x.shape[-2]
    size = CHUNK_ELEMENTS_PER_THREAD * torch.get_num_threads()
    if x.numel() <= size or seq < 2 or x.device.type != "cpu" or not x.is_contiguous():
        return seq
    if any(t.shape[-2] != seq for t in tensors):
        return seq
    return max(1, size * seq // x.numel())


def _rotate_complex(x: torch.Tensor, multiplier: torch.Tensor) -> torch.Tensor:
    """``x`` (interleaved) times ``cos + i·sin``, its pairs read as complex numbers ``a + i·b``.

    ``(a + ib)(cos + i·sin) = (a·cos - b·sin) + i(a·sin + b·cos)``: each pair turned by its angle.
    One pass: the product is the output.
    """
    h = x.shape[-1] // 2
    xw = x if _complex_ready(x) else x.contiguous()
    return torch.view_as_real(torch.view_as_complex(xw.unflatten(-1, (h, 2))) * multiplier).flatten(-2)


def rotate_fusable(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool = False
) -> torch.Tensor:
    """The rotation as one out-of-place expression in real arithmetic, for ``torch.compile`` to fuse.

    ``cos`` and ``sin`` (``[..., seq, pairs]``, the working precision) broadcast against ``x``.
    A compiler fuses this formula, the conversion to the working precision and back included, into
    one loop that reads ``x`` once and writes the result once (a ``clone``'s traffic); the eager
    writes into views of :func:`rotate` would be traced back into copies, and Inductor has no
    complex numbers. Half layout: ``y = x·cos + flip(x)·[-sin | sin]`` over the two halves seen as
    ``[2, pairs]`` (affine loads the compiler vectorizes); interleaved: the two members of each
    pair read with stride 2 and written side by side.
    """
    work = cos.dtype
    xw = x if x.dtype == work else x.to(work)
    if inverse:
        sin = -sin
    h = x.shape[-1] // 2
    if layout == "half":
        x2 = xw.unflatten(-1, (2, h))  # [..., 2, pairs]: row 0 the a's, row 1 the b's
        sign = torch.tensor([[-1.0], [1.0]], dtype=work, device=cos.device)  # (a stacked table would be a kernel)
        y = x2 * cos.unsqueeze(-2) + x2.flip(-2) * (sin.unsqueeze(-2) * sign)  # (a·cos - b·sin, b·cos + a·sin)
        y = y.flatten(-2)
        return y if y.dtype == x.dtype else y.to(x.dtype)
    a, b = xw[..., 0::2], xw[..., 1::2]
    ya, yb = a * cos - b * sin, a * sin + b * cos  # each pair turned by its angle
    if ya.dtype != x.dtype:  # rounded before the interleaving, so the compiler writes x.dtype directly
        ya, yb = ya.to(x.dtype), yb.to(x.dtype)
    return torch.stack((ya, yb), dim=-1).flatten(-2)


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

    def layout_tables(self, kind: str) -> tuple[torch.Tensor, ...]:
        """:func:`layout_tables` of the whole cache, built once per growth (``"pairs"`` are the cache itself)."""
        if kind == "pairs":
            return self.cos, self.sin
        tables = self._layout_tables.get(kind)
        if tables is None:
            tables = self._layout_tables[kind] = layout_tables(self.cos, self.sin, kind)
            self.generation += 1
        return tables

    def holds(self, length: int, device: torch.device, dtype: torch.dtype) -> bool:
        """Does the cache hold positions ``0 … length-1`` on ``device`` in ``dtype`` already?"""
        return self.cos.device == device and self.cos.dtype == dtype and length <= self.max_len

    def lookup(
        self,
        positions: torch.Tensor | None,
        bounds: tuple[int, int] | None,
        seq: int,
        device: torch.device,
        dtype: torch.dtype,
        kind: str,
    ) -> tuple[torch.Tensor, ...]:
        """The rotation tables of ``kind`` (:func:`table_kind`) for ``positions`` (``None``: ``0 … seq-1``).

        Shaped ``positions.shape + [k]``. ``positions`` is a checked int64 or float64 tensor on
        ``device``. ``bounds`` are its smallest and largest values when known on the host; without
        them (a tensor on an accelerator, or any tensor under ``torch.compile``) nothing is read
        back — no synchronisation, no graph break — and the rows are computed directly from float64
        angles instead of gathered from the cache. Under ``torch.compile`` the cache is only read,
        never grown (a traced function has no side effects): call once eagerly first, as a model's
        first step does, and the compiled graph reads the cached rows.
        """
        traced = compiling()
        if positions is None:
            key = (seq, device, dtype)
            last = self._last_slice.get(kind)
            if last is not None and last[0] == key:
                return last[1]
            if traced and self.holds(seq, device, dtype):
                return tuple(t[:seq] for t in self.layout_tables("pairs"))
            if not traced and seq <= self.max_rows:
                self.ensure(seq, device, dtype)
                answer = tuple(t[:seq] for t in self.layout_tables(kind))
                self._last_slice[kind] = (key, answer)
                return answer
            positions = torch.arange(seq, device=device)
            bounds = None if traced else (0, seq - 1)
        if positions.dtype == torch.long and bounds is not None and 0 <= bounds[0] and bounds[1] < self.max_rows:
            if not traced or self.holds(bounds[1] + 1, device, dtype):
                self.ensure(max(bounds[1] + 1, 1), device, dtype)
                flat = positions.reshape(-1)
                return tuple(t.index_select(0, flat).unflatten(0, positions.shape) for t in self.layout_tables(kind))
        # fractional, negative, very large or device-resident positions: exact float64 angles, not cached
        cos, sin = cos_sin(positions, self.inv_freq, self.factor, device, dtype)
        return layout_tables(cos, sin, kind)


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
    kind: str,
) -> tuple[torch.Tensor, ...]:
    """:meth:`CosSinCache.lookup` on the tables :func:`pe_lessons.rotary.apply_rope` shares.

    ``freq_key`` identifies ``(inv_freq, factor)``. One :class:`CosSinCache` per ``(freq_key, device,
    dtype)``; when one grows, the least recently used are dropped until all fit in
    :data:`CACHE_LIMIT_BYTES` (a table larger than that on its own is used for this call only).
    Under ``torch.compile`` the shared tables are read, never created, grown or reordered.
    """
    key = (freq_key, str(device), dtype)
    tables = _shared.get(key)
    if compiling():
        if tables is None:  # nothing cached yet: exact float64 angles, computed in the graph
            tables = CosSinCache(inv_freq, factor)
            if positions is None:
                positions, bounds = torch.arange(seq, device=device), None
        return tables.lookup(positions, bounds, seq, device, dtype, kind)
    if tables is None:
        tables = _shared[key] = CosSinCache(inv_freq, factor)
    else:
        _shared.move_to_end(key)
    generation = tables.generation
    answer = tables.lookup(positions, bounds, seq, device, dtype, kind)
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
