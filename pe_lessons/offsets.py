r"""The linear-offset property of the sinusoidal table (Vaswani et al. 2017, §3.5).

With ``a = pos·ω_i`` and ``b = k·ω_i`` the angle-addition identities give, for pair ``i``
(column ``2i`` holds sin, column ``2i+1`` holds cos):

.. math::

    \begin{pmatrix} \sin(a+b) \\ \cos(a+b) \end{pmatrix}
    = \begin{pmatrix} \cos b & \sin b \\ -\sin b & \cos b \end{pmatrix}
      \begin{pmatrix} \sin a \\ \cos a \end{pmatrix}

so ``PE(pos + k) = M_k · PE(pos)`` where ``M_k`` is block-diagonal with that 2×2
rotation in block ``i``. ``M_k`` depends on ``k`` (not on ``pos``), is orthogonal,
``M_a M_b = M_(a+b)`` and ``M_(-k) = M_kᵀ``. As a consequence

.. math::

    PE(p) \cdot PE(q) = \sum_i \cos\big((p - q)\,\omega_i\big),

a function of ``p − q`` only (:func:`relative_similarity`, :func:`offset_similarity`).

The same identity is an algorithm (:func:`table_by_rotation`): compute ``B`` exact rows
and the rotations ``M_{qB}``, then every row ``qB + r`` is ``M_{qB} · PE(r)``.
:func:`best_linear_map` fits the best linear map from ``PE(pos)`` to ``PE(pos + k)``
by least squares, to test whether a (possibly bugged) table has the property at all.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ._checks import (
    check_base,
    check_d_model,
    check_fits,
    check_float_dtype,
    check_float_tensor,
    check_int,
    memory_limit,
)
from .sinusoidal import angle_addition, angle_addition_subtables, inverse_frequencies, position_angles

__all__ = [
    "offset_blocks",
    "offset_matrix",
    "offset_similarity",
    "relative_similarity",
    "LinearFit",
    "best_linear_map",
    "table_by_rotation",
]

#: Largest |k| accepted: int64 without overflow. Angles ``k·ω_i`` are reduced modulo 2π
#: exactly (:func:`pe_lessons.sinusoidal.position_angles`), so every such offset is exact.
MAX_OFFSET = 2**63 - 1


def _check_offset(name: str, value: object) -> int:
    value = check_int(name, value)
    if abs(value) > MAX_OFFSET:
        raise ValueError(f"{name} must satisfy |{name}| < 2**63 (an int64 offset), got {value}")
    return value


def _check_range(name: str, values: torch.Tensor) -> None:
    """int64 values other than -2**63 (whose absolute value, and negation, overflow int64)."""
    if values.numel() and int(values.min()) < -MAX_OFFSET:
        raise ValueError(f"{name} must satisfy |{name}| < 2**63 (int64 without overflow), got -2**63")


def offset_blocks(k: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """The 2×2 blocks of :func:`offset_matrix`, shape ``[d_model/2, 2, 2]``.

    Block ``i`` is ``[[cos(kω_i), sin(kω_i)], [-sin(kω_i), cos(kω_i)]]``; the angles
    ``k·ω_i`` are formed in float64, the result is rounded once to ``dtype``.
    """
    k = _check_offset("k", k)
    d_model = check_d_model(d_model)
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    check_fits("d_model", (d_model // 2, 2, 2), torch.float64, what="the blocks")
    angles = position_angles(torch.tensor([k]), d_model, base)[0]  # exact for every int64 k
    c, s = torch.cos(angles), torch.sin(angles)
    return torch.stack((torch.stack((c, s), -1), torch.stack((-s, c), -1)), -2).to(dtype)


def offset_matrix(k: int, d_model: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""``M_k``, shape ``[d_model, d_model]``: ``PE(pos + k) = M_k @ PE(pos)`` for every pos and integer k.

    Block-diagonal; block ``i`` (rows and columns ``2i, 2i+1``) is

    .. math:: \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i \end{pmatrix},
              \qquad \omega_i = \mathrm{base}^{-2i/d_{model}}.

    ``k`` may be negative (``M_{-k} = M_k^T``); angles are computed in float64.
    For a whole table ``T`` (rows = positions) the identity reads ``T[k:] = T[:-k] @ M_k.T``.
    """
    k = _check_offset("k", k)
    d_model = check_d_model(d_model)
    dtype = check_float_dtype(dtype)
    check_fits("d_model", (d_model, d_model), dtype, what="M_k")
    blocks = offset_blocks(k, d_model, base, dtype)
    out = torch.zeros(d_model, d_model, dtype=dtype)
    idx = torch.arange(0, d_model, 2)
    for r in (0, 1):
        for c in (0, 1):
            out[idx + r, idx + c] = blocks[:, r, c]
    return out


def _positions(name: str, value: object) -> torch.Tensor:
    """An int ``n`` → ``0 … n-1``; a 1-D sequence/tensor of integers → those positions (int64)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = check_int(name, value, minimum=0)
        check_fits(name, (n,), torch.int64, what="the positions")
        return torch.arange(n, dtype=torch.int64)
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer positions, got dtype {value.dtype}")
        if value.dim() != 1:
            raise ValueError(f"{name} must be 1-D (a list of positions), got shape {list(value.shape)}")
        return value.detach().to("cpu", torch.int64)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = [check_int(f"{name}[{j}]", v) for j, v in enumerate(value)]
        for j, v in enumerate(items):
            if abs(v) > MAX_OFFSET:
                raise ValueError(f"{name}[{j}] must satisfy |{name}[{j}]| < 2**63 (int64), got {v}")
        return torch.tensor(items, dtype=torch.int64)
    raise TypeError(
        f"{name} must be an int n (positions 0 … n-1) or a 1-D sequence of integer positions, got {value!r}"
    )


def offset_similarity(offsets: object, d_model: int, base: float = 10000.0) -> torch.Tensor:
    r"""``s(k) = Σ_i cos(k·ω_i)`` for each offset (float64): the dot product of any two rows ``k`` apart.

    ``offsets`` is an int ``n`` (offsets ``0 … n-1``) or a 1-D sequence/tensor of integers.
    ``s(0) = d_model/2`` is the largest value; ``s(-k) = s(k)``.
    """
    ks = _positions("offsets", offsets)
    d_model = check_d_model(d_model)
    base = check_base(base)
    _check_range("offsets", ks)
    return _cos_sums(ks, d_model, base)


#: Largest number of angles formed at once (keeps memory bounded for long inputs).
_CHUNK_ANGLES = 2**22


def _cos_sums(ks: torch.Tensor, d_model: int, base: float) -> torch.Tensor:
    """``Σ_i cos(k·ω_i)`` for each integer ``k`` in ``ks`` (float64), in chunks of rows."""
    check_fits("offsets", [ks.numel()], torch.float64, what="the sums")
    check_fits("d_model", [d_model // 2], torch.float64, what="one offset's angles")
    out = torch.empty(ks.numel(), dtype=torch.float64)
    # chunks of angles (each a float64 [rows, d_model/2]) that fit the memory limit too
    step = max(1, min(_CHUNK_ANGLES, memory_limit() // 8) // (d_model // 2))
    for start in range(0, ks.numel(), step):
        out[start : start + step] = torch.cos(position_angles(ks[start : start + step], d_model, base)).sum(-1)
    return out


def relative_similarity(positions: object, d_model: int, base: float = 10000.0) -> torch.Tensor:
    r"""The matrix ``S[p, q] = PE(p)·PE(q) = Σ_i cos((p − q)·ω_i)`` (float64, ``[n, n]``).

    ``positions`` is an int ``n`` (positions ``0 … n-1``) or a 1-D sequence/tensor of
    integer positions. Computed from the closed form (differences ``p − q`` are exact
    integers), so it is symmetric, Toeplitz for consecutive positions, and largest
    (``d_model/2``) on the diagonal.
    """
    pos = _positions("positions", positions)
    d_model = check_d_model(d_model)
    base = check_base(base)
    n = pos.numel()
    check_fits("positions", (n, n), torch.float64, what="the similarity matrix")
    _check_range("positions", pos)
    if n and int(pos.max()) - int(pos.min()) > MAX_OFFSET:  # Python ints: p − q must not overflow int64
        raise ValueError(
            f"positions must be less than 2**63 apart (p − q is an int64), got {int(pos.min())} and {int(pos.max())}"
        )
    diff = pos[:, None] - pos[None, :]
    # one cosine sum per distinct offset (at most 2n − 1 for consecutive positions), not per (p, q):
    # memory stays O(n²) instead of O(n²·d_model)
    offsets, where = torch.unique(diff, return_inverse=True)
    return _cos_sums(offsets, d_model, base)[where]


class LinearFit(NamedTuple):
    """Result of :func:`best_linear_map`: ``matrix`` (``[d, d]``) and the relative ``residual``."""

    matrix: torch.Tensor
    residual: float


def best_linear_map(table: torch.Tensor, k: int) -> LinearFit:
    r"""Least-squares ``M`` with ``table[pos + k] ≈ M @ table[pos]`` over every valid pos.

    Fits in float64 over the ``n − |k|`` row pairs (``n = len(table)``) and returns
    ``LinearFit(matrix=M, residual=r)`` with the relative residual

    .. math:: r = \frac{\lVert Y - X M^T \rVert_F}{\lVert Y \rVert_F},

    ``X`` the rows at ``pos`` and ``Y`` those at ``pos + k``. A correct sinusoidal table
    gives ``r ≈ 0`` (``M ≈ M_k``); a table without the offset property gives ``r`` clearly > 0.
    Needs at least ``d`` row pairs (``n − |k| ≥ d``) so the fit is not underdetermined.
    """
    table = check_float_tensor("table", table)
    if table.dim() != 2:
        raise ValueError(f"table must be 2-D [pos, dimension], got shape {list(table.shape)}")
    k = check_int("k", k)
    n, d = table.shape
    if d == 0:
        raise ValueError("table must have at least one column")
    if n - abs(k) < d:
        raise ValueError(
            f"k = {k} leaves {max(n - abs(k), 0)} row pairs in a table of {n} rows; "
            f"a {d}-column fit needs at least {d} (use a longer table or a smaller |k|)"
        )
    check_fits("table", tuple(table.shape), torch.float64, what="its float64 copy")
    t = table.detach().to("cpu", torch.float64)
    x, y = (t[: n - k], t[k:]) if k >= 0 else (t[-k:], t[: n + k])
    if not torch.isfinite(t).all():
        raise ValueError("table must hold finite values")
    solution = torch.linalg.lstsq(x, y, driver="gelsd").solution  # x @ solution ≈ y, solution = Mᵀ
    matrix = solution.T.contiguous()
    norm = y.norm().item()
    residual = (y - x @ solution).norm().item() / norm if norm > 0 else 0.0
    return LinearFit(matrix, residual)


def table_by_rotation(
    max_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    block: int | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    r"""The sinusoidal table built by rotating a few exact rows, shape ``[max_len, d_model]``.

    Write ``pos = qB + r`` with ``0 ≤ r < B`` (``B = block``, default ``⌈√max_len⌉``). Then
    ``PE(qB + r) = M_{qB} · PE(r)``: only the ``B`` rows ``PE(0 … B-1)`` and the
    ``⌈max_len/B⌉`` rotations ``M_{qB}`` need sin/cos (in float64, ``≈ 2√max_len``
    evaluations per pair instead of ``max_len``); every other entry is two multiplies
    and an add in ``dtype``. In float32 each entry is within ~5e-7 of the exact value.
    This is the scheme :func:`pe_lessons.sinusoidal_table` uses for float32 tables.
    float16/bfloat16 tables are built in float32 and rounded once.
    """
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    if block is None:
        block = max(1, math.isqrt(max(max_len - 1, 0)) + 1)
    else:
        block = check_int("block", block, minimum=1)
    if max_len == 0:
        return torch.empty(0, d_model, dtype=dtype)
    block = min(block, max_len)  # a longer block adds rows that are cut off anyway (same table)
    work = torch.float64 if dtype == torch.float64 else torch.float32
    n_blocks = -(-max_len // block)
    check_fits("max_len × d_model", (n_blocks * block, d_model), work, what="the table")
    # the exact rows PE(r), r < B, and the rotations M_{qB} (cos and sin of qB·ω), each rounded once to `work`
    subtables = angle_addition_subtables(n_blocks, inverse_frequencies(d_model, base), block=block, dtype=work)
    # block i of M_{qB} applied to (sin rω, cos rω): (sin(qBω + rω), cos(qBω + rω)) by angle addition
    return angle_addition(*subtables, max_len).to(dtype)
