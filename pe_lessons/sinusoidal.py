r"""Sinusoidal positional encoding (Vaswani et al. 2017, section 3.5).

For a position ``pos`` and a pair index ``i = 0 … d_model/2 - 1``:

.. math::

    \omega_i = \mathrm{base}^{-2i/d_{model}}, \qquad
    PE[pos, 2i] = \sin(pos\,\omega_i), \qquad
    PE[pos, 2i+1] = \cos(pos\,\omega_i)

Sin sits in the even columns, cos in the odd ones (the paper's interleaved
layout). The wavelength of pair ``i`` is ``2π/ω_i``: a geometric progression
from ``2π`` to ``2π·base``.

Accuracy. A float32 angle ``pos·ω`` carries an error of up to half a unit in
the last place, about ``pos·6e-8``: near ``pos = 65536`` that is ~4e-3 rad, and
``sin`` of it is off by as much. :func:`sinusoidal_table` therefore never forms
large angles in float32. For float32 tables it uses the angle-addition identity

.. math::

    \sin((qB + r)\omega) = \sin(qB\omega)\cos(r\omega) + \cos(qB\omega)\sin(r\omega)

(and the matching one for cos), with two small tables of sin/cos computed in
float64 — one for the ``B`` fine offsets ``r``, one for the coarse starts
``qB`` (``B`` = 256) — combined by float32 multiply-adds. Every entry is then within 5e-7 of
the exact value for every position below ``2**20``, at roughly the cost of
writing the table. float64, float16 and bfloat16 tables are computed in
float64 and rounded once.

On a GPU the small sub-tables are computed once on the CPU (the same bits as a CPU table)
and kept on the device (a small bounded cache per ``d_model``, ``base`` and device): a later
call does only the multiply-adds there, with no host work and no copy.

Large positions. ``pos·ω`` formed in float64 is off by up to ``|pos|·2⁻⁵²`` rad (the
rounding of ``ω`` and of the product): harmless for a table, but at ``pos = 2**53`` it is a
whole radian, and past ``2**53`` float64 cannot even hold ``pos``. Where single large
positions are asked for (:func:`pe_formula`, :func:`exact_angles`, the offsets and the
explorer), the angle is reduced modulo 2π *exactly* instead: ``ω_i/2π`` is known to 126 bits
(``decimal``), ``pos·ω_i/2π`` modulo 1 is formed in integer arithmetic, and only the reduced
angle, in ``[-π, π]``, is rounded to float64 — every integer position, however large, gets
its row to float64 accuracy.

Sizes. A request whose result would exceed :func:`pe_lessons.memory_limit` (4 GiB by
default) is refused with a ``ValueError`` before anything is allocated.
"""

from __future__ import annotations

import decimal
import functools
import math
from collections import OrderedDict

import torch
from torch import nn

from ._checks import (
    check_base,
    check_d_model,
    check_device,
    check_embeddings,
    check_fits,
    check_float_dtype,
    check_int,
    check_real,
)

__all__ = [
    "pe_formula",
    "exact_angles",
    "inverse_frequencies",
    "wavelengths",
    "sinusoidal_table",
    "SinusoidalPositionalEncoding",
    "interleave",
    "float64_device",
    "powers_of_base",
    "exact_rows",
    "angle_addition_subtables",
    "angle_addition",
]


#: Bytes a Python float in a list costs: the float object (24) and the list's pointer (8).
_PY_FLOAT_BYTES = 32


def pe_formula(pos: int, d_model: int, base: float = 10000.0) -> list[float]:
    """The paper's formula for one position, in plain Python.

    ``PE[pos, 2i] = sin(pos / base**(2i/d_model))`` and
    ``PE[pos, 2i+1] = cos(pos / base**(2i/d_model))`` for ``i = 0 … d_model/2 - 1``.
    Written to be read next to the equation, not to be fast. Exact for every integer ``pos``,
    however large: past :data:`PLAIN_ANGLE_LIMIT` the angle is reduced modulo 2π exactly
    (see the module's "Large positions") instead of rounding ``pos`` to float64.
    """
    pos = check_int("pos", pos, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    check_fits("d_model", (d_model,), _PY_FLOAT_BYTES, what="the row (a Python list of floats)")
    row = []
    for i in range(d_model // 2):
        angle = pos / base ** (2 * i / d_model)
        if pos > PLAIN_ANGLE_LIMIT:  # float64 would lose this angle: reduce pos·ω_i modulo 2π exactly
            angle = _reduced_angle(pos, _turns(d_model, base, _bits_for(pos))[i], _bits_for(pos))
        row.append(math.sin(angle))  # column 2i
        row.append(math.cos(angle))  # column 2i + 1
    return row


#: Up to this |position| the plain float64 product ``pos·ω_i`` is used: it is within
#: ``|pos|·2⁻⁵²`` ≤ 4e-9 rad of the exact angle. Beyond, angles are reduced exactly.
PLAIN_ANGLE_LIMIT = 2**24

#: Bits of ``ω_i/2π`` kept by the exact reduction: ``pos·ω_i/2π`` modulo 1 is then exact to
#: ``|pos|·2⁻¹²⁶`` turns (< 1e-19 for every int64 position).
TURN_BITS = 126
_LIMB = 21  # 6 limbs of 21 bits: products of two limbs (< 2**42) are exact in float64


def _bits_for(pos: int) -> int:
    """Bits of ω/2π an exact reduction of ``pos`` needs (126 for every int64 position, more beyond)."""
    return max(TURN_BITS, abs(pos).bit_length() + 64)


@functools.lru_cache(maxsize=64)
def _turns(d_model: int, base: float, bits: int = TURN_BITS) -> tuple[int, ...]:
    """``round(ω_i / 2π · 2**bits)`` for each pair, from ``ω_i = base**(-2i/d_model)`` in decimal
    arithmetic with ~30 digits to spare (``base`` is taken as its exact binary value)."""
    with decimal.localcontext() as ctx:
        ctx.prec = bits * 30 // 100 + 30
        two_pi = 2 * _pi(ctx.prec)
        scale = decimal.Decimal(2) ** bits
        log_base = decimal.Decimal(base).ln()
        out = []
        for i in range(d_model // 2):
            omega = (-(decimal.Decimal(2 * i) / d_model) * log_base).exp()  # base**(-2i/d_model)
            out.append(int((omega / two_pi * scale).to_integral_value()))
    return tuple(out)


def _pi(digits: int) -> decimal.Decimal:
    """π to ``digits`` significant digits (Machin's formula, in the current decimal context)."""
    with decimal.localcontext() as ctx:
        ctx.prec = digits + 10

        def arctan_inv(x: int) -> decimal.Decimal:  # atan(1/x) = Σ (-1)^k / ((2k+1) x^(2k+1))
            total, term, k, x2 = decimal.Decimal(0), decimal.Decimal(1) / x, 0, x * x
            while term:
                total += term / (2 * k + 1) if k % 2 == 0 else -term / (2 * k + 1)
                term /= x2
                k += 1
            return total

        pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    return +pi


def _reduced_angle(pos: int, turn: int, bits: int) -> float:
    """``pos · turn/2**bits · 2π`` reduced to ``[-π, π]``: the product modulo ``2**bits`` is exact."""
    frac = (pos * turn) % (1 << bits)  # pos·ω/2π modulo 1, in units of 2**-bits
    if frac >= 1 << (bits - 1):
        frac -= 1 << bits
    return 2 * math.pi * (frac / (1 << bits))


def exact_angles(positions: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """``pos·ω_i`` reduced modulo 2π to ``[-π, π]``, float64 ``[n, d_model/2]``, for int64 positions ``[n]``.

    Exact before the last rounding for every int64 position (``|pos| < 2**63``): ``pos`` is
    split into three 21-bit limbs and ``ω_i/2π`` (:data:`TURN_BITS` bits) into six, each
    limb product (< 2**42) is exact in float64, its whole turns are dropped exactly, and the
    fractional turns are summed — an error below 1e-13 rad, where ``float(pos)·ω_i`` is off
    by ``|pos|·2⁻⁵²`` rad (a whole radian at ``2**53``). Vectorised, on ``positions``' device.
    """
    if not isinstance(positions, torch.Tensor) or positions.dtype != torch.int64 or positions.dim() != 1:
        raise TypeError("positions must be a 1-D int64 tensor")
    d_model = check_d_model(d_model)
    base = check_base(base)
    if positions.numel() and bool((positions == -(2**63)).any()):
        raise ValueError("positions must satisfy |pos| < 2**63 (int64 without overflow), got -2**63")
    device = positions.device
    turn_limbs = _turn_limbs(d_model, base).to(device)  # [6, h], limb k scaled by 2**-(21(k+1))
    sign = torch.where(positions < 0, -1.0, 1.0).to(torch.float64)[:, None]
    a = positions.abs()
    mask = (1 << _LIMB) - 1
    pos_limbs = [((a >> (_LIMB * j)) & mask).to(torch.float64)[:, None] for j in range(3)]  # [n, 1] each
    total = torch.zeros(positions.shape[0], turn_limbs.shape[1], dtype=torch.float64, device=device)
    for j, pj in enumerate(pos_limbs):
        for k in range(j, turn_limbs.shape[0]):  # j > k: a whole number of turns, dropped
            prod = (pj * turn_limbs[k]) * 2.0 ** (_LIMB * j)  # exact: < 2**42 times a power of two
            total += torch.frac(prod)  # prod >= 0: its fractional part, exactly
    total -= torch.round(total)
    return sign * (2 * math.pi) * total


def position_angles(positions: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """``pos·ω_i`` for int64 positions ``[n]``, float64 ``[n, d_model/2]``: the plain product while
    every ``|pos| ≤`` :data:`PLAIN_ANGLE_LIMIT` (within 4e-9 rad), else :func:`exact_angles`."""
    if positions.numel() and not bool(((positions >= -PLAIN_ANGLE_LIMIT) & (positions <= PLAIN_ANGLE_LIMIT)).all()):
        return exact_angles(positions, d_model, base)
    inv_freq = inverse_frequencies(d_model, base).to(positions.device)
    return positions.to(torch.float64)[:, None] * inv_freq


@functools.lru_cache(maxsize=64)
def _turn_limbs(d_model: int, base: float) -> torch.Tensor:
    """``ω_i/2π`` as six 21-bit limbs, ``[6, d_model/2]`` float64: limb k holds bits 21k+1 … 21(k+1)."""
    limbs = [
        [((t >> (_LIMB * (5 - k))) & ((1 << _LIMB) - 1)) * 2.0 ** (-_LIMB * (k + 1)) for t in _turns(d_model, base)]
        for k in range(6)
    ]
    return torch.tensor(limbs, dtype=torch.float64)


def inverse_frequencies(d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``ω_i = base**(-2i/d_model)`` for ``i = 0 … d_model/2 - 1``, as a tensor of length ``d_model/2``.

    Computed in float64 as ``exp(-(2i/d_model)·ln(base))``, then cast to ``dtype``.
    """
    d_model = check_d_model(d_model)
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    check_fits("d_model", (d_model // 2,), torch.float64, what="the frequencies")
    return powers_of_base(torch.arange(0, d_model, 2, dtype=torch.float64) / d_model, base).to(dtype)


def powers_of_base(exponents: torch.Tensor, base: float) -> torch.Tensor:
    """``base**(-exponents)`` in float64, computed as ``exp(-e·ln base)`` (as every frequency here)."""
    return torch.exp(-exponents.to(torch.float64) * math.log(base))


def wavelengths(d_model: int, base: float = 10000.0) -> torch.Tensor:
    """Wavelength ``2π/ω_i`` of each pair, in positions (float64, length ``d_model/2``)."""
    return 2 * math.pi / inverse_frequencies(d_model, base)


def interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    """``[..., h]`` and ``[..., h]`` → ``[..., 2h]`` with ``even`` at the even and ``odd`` at the odd columns.

    The sinusoidal table's layout (``interleave(sin, cos)``), and RoPE's interleaved pairs.
    """
    return torch.stack((even, odd), dim=-1).flatten(-2)


def float64_device(device: torch.device) -> torch.device:
    """Where float64 values can be computed for ``device``: itself, or the CPU (MPS and friends have no float64)."""
    return device if device.type in ("cpu", "cuda", "meta") else torch.device("cpu")


def exact_rows(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """The rows ``PE(pos)`` for float64 ``positions`` ``[n]`` and frequencies ``inv_freq``, in float64 (no rounding
    but the last one of each sin and cos), on the positions' device."""
    angles = positions[:, None] * inv_freq.to(positions.device)[None, :]
    return interleave(torch.sin(angles), torch.cos(angles))


#: Fine-table length B of the angle-addition scheme. Fixed (not tied to max_len) so that a
#: position's row is the same in every table, whatever its length.
BLOCK = 256

#: ``(sin_f, cos_f, sin_c, cos_c)``: sin and cos of the fine angles ``r·ω`` and of the coarse ones ``qB·ω``
Subtables = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

#: Sub-tables kept per (d_model, base, device): ``(sin_f, cos_f, sin_c, cos_c)`` in float32. Like every
#: cache of the package, bounded and least recently used first out.
_SUBTABLES: OrderedDict[tuple[int, float, str], Subtables] = OrderedDict()
#: At most this many cache entries ...
_SUBTABLES_MAX_ENTRIES = 8
#: ... and coarse tables of at most this many bytes are kept (larger ones are rebuilt per call).
_SUBTABLES_MAX_BYTES = 16 * 2**20


def angle_addition_subtables(
    n_blocks: int, inv_freq: torch.Tensor, *, block: int = BLOCK, dtype: torch.dtype = torch.float32
) -> Subtables:
    """``sin, cos`` of ``r·ω`` (``r < block``) and of ``qB·ω`` (``q < n_blocks``), from float64 on the CPU,
    rounded once to ``dtype``: the only sines and cosines :func:`angle_addition` needs."""
    fine = torch.arange(block, dtype=torch.float64)[:, None] * inv_freq  # r·ω, r < B
    coarse = torch.arange(n_blocks, dtype=torch.float64)[:, None] * (block * inv_freq)  # qB·ω
    return (
        torch.sin(fine).to(dtype),
        torch.cos(fine).to(dtype),
        torch.sin(coarse).to(dtype),
        torch.cos(coarse).to(dtype),
    )


def _subtables(n_blocks: int, d_model: int, base: float, device: torch.device) -> Subtables:
    """The four sub-tables on ``device``, cached so that a GPU call does no host work and no copy.

    They are always computed on the CPU (one float64 code path: the same bits on every device)
    and copied once; the coarse table is kept for the most blocks asked so far and sliced.
    """
    key = (d_model, base, str(device))
    cached = _SUBTABLES.get(key)
    if cached is not None and cached[2].shape[0] >= n_blocks:
        _SUBTABLES.move_to_end(key)
        sin_f, cos_f, sin_c, cos_c = cached
        return sin_f, cos_f, sin_c[:n_blocks], cos_c[:n_blocks]
    sin_f, cos_f, sin_c, cos_c = angle_addition_subtables(n_blocks, inverse_frequencies(d_model, base))
    tables = (sin_f.to(device), cos_f.to(device), sin_c.to(device), cos_c.to(device))
    if 2 * n_blocks * (d_model // 2) * 4 <= _SUBTABLES_MAX_BYTES:
        _SUBTABLES.pop(key, None)
        while len(_SUBTABLES) >= _SUBTABLES_MAX_ENTRIES:
            _SUBTABLES.popitem(last=False)
        _SUBTABLES[key] = tables
    return tables


def _angle_addition_table(max_len: int, d_model: int, base: float, device: torch.device) -> torch.Tensor:
    """float32 table built from two small exact tables by angle addition (see module docstring)."""
    n_blocks = -(-max_len // BLOCK)
    if torch.compiler.is_compiling() or device.type == "cpu":
        # on the CPU this is cheap (~0.1 ms) and every sin/cos stays visible to a tracer; traced, no cache
        sin_f, cos_f, sin_c, cos_c = angle_addition_subtables(n_blocks, inverse_frequencies(d_model, base))
        subtables = (sin_f.to(device), cos_f.to(device), sin_c.to(device), cos_c.to(device))
    else:  # a GPU: the sub-tables come from the cache, so the device does all the work of a call
        subtables = _subtables(n_blocks, d_model, base, device)
    return angle_addition(*subtables, max_len)


def angle_addition(
    sin_f: torch.Tensor, cos_f: torch.Tensor, sin_c: torch.Tensor, cos_c: torch.Tensor, max_len: int
) -> torch.Tensor:
    """Rows ``PE(qB + r)``, ``[max_len, 2·half]``, from the sub-tables of :func:`angle_addition_subtables`.

    Every entry is two products and a sum in the sub-tables' dtype, on their device. Eager, they are
    written into one preallocated table and one half-size scratch tensor; traced by ``torch.compile``
    the same expression is one out-of-place formula (writes into views break AOTAutograd).
    """
    n_blocks, half = sin_c.shape
    block = sin_f.shape[0]
    sin_c, cos_c = sin_c[:, None, :], cos_c[:, None, :]
    # sin(a + b) = sin a cos b + cos a sin b ;  cos(a + b) = cos a cos b - sin a sin b
    if torch.compiler.is_compiling():
        out = torch.stack((sin_c * cos_f + cos_c * sin_f, cos_c * cos_f - sin_c * sin_f), dim=-1)
        return out.reshape(n_blocks * block, 2 * half)[:max_len]
    out = torch.empty(n_blocks, block, half, 2, dtype=sin_f.dtype, device=sin_f.device)
    tmp = torch.empty(n_blocks, block, half, dtype=sin_f.dtype, device=sin_f.device)
    # Separate multiplies and adds (not addcmul): each is one IEEE rounding whatever the CPU's
    # vector unit, while a fused multiply-add is used by some kernels and not others — the
    # table is then bit-identical on every machine, and stored notebook outputs replay.
    torch.mul(sin_c, cos_f, out=out[..., 0]).add_(torch.mul(cos_c, sin_f, out=tmp))
    torch.mul(cos_c, cos_f, out=out[..., 1]).sub_(torch.mul(sin_c, sin_f, out=tmp))
    return out.view(n_blocks * block, 2 * half)[:max_len]


def sinusoidal_table(
    max_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The sinusoidal table ``PE[pos, :]`` for ``pos = 0 … max_len-1``, shape ``[max_len, d_model]``.

    Interleaved layout: ``PE[pos, 2i] = sin(pos·ω_i)``, ``PE[pos, 2i+1] = cos(pos·ω_i)``
    with ``ω_i = base**(-2i/d_model)``. A float32 table is within 5e-7 of the exact
    values for every position below ``2**20`` (angle addition from float64 sub-tables);
    float64, float16 and bfloat16 tables are the exact values rounded once.
    A table larger than :func:`pe_lessons.memory_limit` is refused (``ValueError``).
    """
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    device = check_device(device)
    if dtype == torch.float32:  # the table is padded to whole blocks, plus a half-size scratch tensor
        check_fits("max_len × d_model", (-(-max_len // BLOCK) * BLOCK, d_model), torch.float32, what="the table")
    else:  # angles, sin, cos and the table in float64
        check_fits("max_len × d_model", (max_len, d_model), torch.float64, what="the float64 table it is rounded from")
    if max_len == 0:
        return torch.empty(0, d_model, dtype=dtype, device=device)
    if dtype == torch.float32:
        return _angle_addition_table(max_len, d_model, base, device)
    # float64 / float16 / bfloat16: exact float64 values, rounded once
    work = float64_device(device)
    inv_freq = inverse_frequencies(d_model, base)  # float64, on the CPU
    positions = torch.arange(max_len, dtype=torch.float64, device=work)
    return exact_rows(positions, inv_freq).to(dtype=dtype, device=device)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table to token embeddings: ``dropout(x + PE[:seq])``.

    ``x`` is ``[batch, seq, d_model]`` with a floating dtype; the output has ``x``'s
    shape and dtype. Dropout follows ``self.training`` (it is off after ``.eval()``).

    Sequences longer than ``max_len`` are allowed: sinusoids exist at every position,
    so the table grows (to the next power of two ≥ ``seq``) on the input's device.
    The table is a non-persistent buffer: it follows ``.to(device)`` and is not
    saved in ``state_dict`` (it is a function of ``d_model`` and ``base``).

    Precision. The table stays float32 under ``.half()`` / ``.to(torch.bfloat16)``: rounding
    it to 16 bits would shift a float32 input's encoding by up to ~2.4e-4 (float16) or ~2e-3
    (bfloat16). It is cast to the input's dtype at use instead: a float32 input keeps the
    exact encoding (within 5e-7), a float16 input gets the float32 table rounded once.
    ``.double()`` recomputes the table in float64 (exact values, not float32 ones widened).
    """

    table: torch.Tensor

    def __init__(self, d_model: int, max_len: int = 2048, dropout: float = 0.0, base: float = 10000.0) -> None:
        super().__init__()
        self.d_model = check_d_model(d_model)
        self.base = check_base(base)
        max_len = check_int("max_len", max_len, minimum=1)
        dropout = check_real("dropout", dropout, minimum=0.0, below=1.0, what="a probability in [0, 1)")
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", sinusoidal_table(max_len, d_model, base=self.base), persistent=False)

    @property
    def max_len(self) -> int:
        """Rows the table holds now (it grows on demand)."""
        return self.table.shape[0]

    def _apply(self, fn, recurse=True):  # noqa: ANN001 - nn.Module's signature
        """``.to()``, ``.half()``, ``.cuda()``, …: the table follows devices, but is recomputed, not
        rounded: float16/bfloat16 keep a float32 table, float64 gets the exact float64 one."""
        before = self.table.dtype
        module = super()._apply(fn, recurse)
        after = self.table.dtype
        if after != before:
            want = torch.float64 if after == torch.float64 else torch.float32
            self.table = sinusoidal_table(
                self.max_len, self.d_model, base=self.base, dtype=want, device=self.table.device
            )
        return module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = check_embeddings(x, self.d_model)
        seq = x.shape[1]
        if seq > self.max_len or self.table.device != x.device:
            rows = max(self.max_len, 1 << (seq - 1).bit_length())
            check_fits(
                "x.shape[1] (the sequence length)", (rows, self.d_model), self.table.dtype, what="the grown table"
            )
            self.table = sinusoidal_table(rows, self.d_model, base=self.base, dtype=self.table.dtype, device=x.device)
        return self.dropout(x + self.table[:seq].to(x.dtype))

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, base={self.base:g}"
