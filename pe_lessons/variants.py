r"""Seven ways to build a "sinusoidal" table, five cheap tests, and :func:`diagnose`.

Every builder has the signature ``(max_len, d_model, base=10000.0, *, dtype=torch.float32)``
and returns ``Tensor[max_len, d_model]``, computed in float64 and rounded once to
``dtype`` (``paper`` *is* :func:`~pe_lessons.sinusoidal.sinusoidal_table`). With
``ω_i = base^{-2i/d}``, ``i = 0 … d/2-1`` (``d = d_model``) and ``h = d/2``:

- ``paper``: ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)`` (Vaswani et al. §3.5);
- ``concat_halves``: ``PE[p, i] = sin(p ω_i)``, ``PE[p, h+i] = cos(p ω_i)`` — a column
  permutation of ``paper`` (TensorFlow's tutorial), a convention, not a bug;
- ``tensor2tensor``: halves as above with ``ω_i = exp(-i·ln(base)/(h-1))`` (tensor2tensor, fairseq);
- ``sin_only``: ``PE[p, 2i] = PE[p, 2i+1] = sin(p ω_i)`` (bug: sin in the cos columns);
- ``doubled_exponent``: interleaved with ``ω_i = base^{-4i/d}`` (bug: the loop steps by 2
  *and* the exponent is ``2i/d``);
- ``column_exponent``: column ``j`` uses ``base^{-2j/d}``, so ``sin(p·base^{-4i/d})`` sits
  next to ``cos(p·base^{-(4i+2)/d})`` (bug);
- ``shifted_cos_exponent``: ``PE[p, 2i+1] = cos(p·base^{-(2i+1)/d})`` (bug: cos exponent ``(2i+1)/d``).

:func:`diagnose` compares a table with every variant's float64 table for the same
shape and base, with a tolerance of float32 accuracy (``1e-5 + 2.5e-7·pos``; wider for
float16/bfloat16 tables), and names the variant it matches. Correct tables as real code
stores them are named too, with what differs: a table whose row 0 is position ``p0 > 0``
(a continued sequence, a cached decode, fairseq's positions from ``padding_idx + 1``), rows
zeroed by a padding index (fairseq, M2M100, FSMT, Speech2Text), and pairs stored cos first
(torchtune's RoPE cache, Meta's ``freqs_cis`` viewed as reals).

The cheap tests :func:`pe0_is_0101`, :func:`pairs_on_unit_circle`, :func:`frequencies_match`
and :func:`matches_formula` assume the paper's **interleaved, sin-first layout starting at
position 0**: a correct concatenated (``[sin | cos]``) table fails them, and so does a correct
table that starts at another position. Only :func:`row_norms_constant` is layout-free.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ._checks import (
    check_base,
    check_d_model,
    check_fits,
    check_float_dtype,
    check_float_tensor,
    check_int,
    check_tensor,
)
from .sinusoidal import exact_rows, interleave, inverse_frequencies, powers_of_base, sinusoidal_table

__all__ = [
    "VARIANTS",
    "SOURCES",
    "EXPLANATIONS",
    "CHEAP_TESTS",
    "Diagnosis",
    "diagnose",
    "tolerance",
    "paper",
    "concat_halves",
    "tensor2tensor",
    "sin_only",
    "doubled_exponent",
    "column_exponent",
    "shifted_cos_exponent",
    "pe0_is_0101",
    "row_norms_constant",
    "pairs_on_unit_circle",
    "frequencies_match",
    "matches_formula",
]

Formula = Callable[[torch.Tensor, int, float], torch.Tensor]


# --------------------------------------------------------------------------- formulas (float64)
def _f_paper(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    return exact_rows(pos, inverse_frequencies(d, base))


def _f_concat_halves(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    angles = pos[:, None] * inverse_frequencies(d, base)[None, :]
    return torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1)


def _f_tensor2tensor(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    half = d // 2
    inv_freq = torch.exp(-torch.arange(half, dtype=torch.float64) * (math.log(base) / max(half - 1, 1)))
    angles = pos[:, None] * inv_freq[None, :]
    return torch.cat((torch.sin(angles), torch.cos(angles)), dim=-1)


def _f_sin_only(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    s = torch.sin(pos[:, None] * inverse_frequencies(d, base)[None, :])
    return interleave(s, s)


def _f_doubled_exponent(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    angles = pos[:, None] * powers_of_base(torch.arange(0, 2 * d, 4, dtype=torch.float64) / d, base)[None, :]
    return interleave(torch.sin(angles), torch.cos(angles))


def _f_column_exponent(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    angles = pos[:, None] * powers_of_base(2 * torch.arange(d, dtype=torch.float64) / d, base)[None, :]
    return interleave(torch.sin(angles[:, 0::2]), torch.cos(angles[:, 1::2]))


def _f_shifted_cos_exponent(pos: torch.Tensor, d: int, base: float) -> torch.Tensor:
    cos_freq = powers_of_base(torch.arange(1, d, 2, dtype=torch.float64) / d, base)
    return interleave(
        torch.sin(pos[:, None] * inverse_frequencies(d, base)[None, :]),
        torch.cos(pos[:, None] * cos_freq[None, :]),
    )


_FORMULAS: dict[str, Formula] = {
    "paper": _f_paper,
    "concat_halves": _f_concat_halves,
    "tensor2tensor": _f_tensor2tensor,
    "sin_only": _f_sin_only,
    "doubled_exponent": _f_doubled_exponent,
    "column_exponent": _f_column_exponent,
    "shifted_cos_exponent": _f_shifted_cos_exponent,
}


# --------------------------------------------------------------------------- builders
def _build(name: str, max_len: object, d_model: object, base: object, dtype: object) -> torch.Tensor:
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    dtype = check_float_dtype(dtype)
    check_fits("max_len × d_model", (max_len, d_model), torch.float64, what="the float64 table it is rounded from")
    pos = torch.arange(max_len, dtype=torch.float64)
    return _FORMULAS[name](pos, d_model, base).to(dtype)


def paper(max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The correct table: ``sin(p ω_i)`` in column ``2i``, ``cos(p ω_i)`` in ``2i+1``, ``ω_i = base^{-2i/d}``.

    This is :func:`pe_lessons.sinusoidal_table` itself (same values, bit for bit).
    """
    check_float_dtype(dtype)
    return sinusoidal_table(max_len, d_model, base=base, dtype=dtype)


def concat_halves(
    max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """``[sin(p ω_0) … sin(p ω_{h-1}) | cos(p ω_0) … cos(p ω_{h-1})]`` with the paper's ``ω_i``.

    A convention, not a bug (TensorFlow's Transformer tutorial): ``paper(…)[:, P]`` with
    ``P = [0, 2, 4, …, d-2, 1, 3, …, d-1]``.
    """
    return _build("concat_halves", max_len, d_model, base, dtype)


def tensor2tensor(
    max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Concatenated halves with ``ω_i = exp(-i·ln(base)/(h-1))``, ``h = d/2`` (tensor2tensor, fairseq).

    The frequencies still run from 1 to exactly ``1/base`` but with ratio ``base^{-1/(h-1)}``
    instead of ``base^{-2/d}``: a different (also working) convention. For ``h = 1`` the
    denominator is taken as 1, as tensor2tensor does.
    """
    return _build("tensor2tensor", max_len, d_model, base, dtype)


def sin_only(max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Bug: ``sin(p ω_i)`` in column ``2i`` **and** ``2i+1`` (``encodings[:, 1::2] = torch.sin(…)``)."""
    return _build("sin_only", max_len, d_model, base, dtype)


def doubled_exponent(
    max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Bug: ``for i in range(0, d_model, 2)`` with exponent ``2*i/d_model``: pair ``k`` gets ``base^{-4k/d}``."""
    return _build("doubled_exponent", max_len, d_model, base, dtype)


def column_exponent(
    max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Bug: column ``j`` uses exponent ``2j/d``: ``sin(p·base^{-4i/d})`` next to ``cos(p·base^{-(4i+2)/d})``."""
    return _build("column_exponent", max_len, d_model, base, dtype)


def shifted_cos_exponent(
    max_len: int, d_model: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Bug: the cos column uses exponent ``(2i+1)/d``: ``cos(p·base^{-(2i+1)/d})`` next to ``sin(p ω_i)``."""
    return _build("shifted_cos_exponent", max_len, d_model, base, dtype)


#: name → builder. Correct conventions first (``paper``, ``concat_halves``, ``tensor2tensor``),
#: then the bugs; :func:`diagnose` breaks ties in this order.
VARIANTS: dict[str, Callable[..., torch.Tensor]] = {
    "paper": paper,
    "concat_halves": concat_halves,
    "tensor2tensor": tensor2tensor,
    "sin_only": sin_only,
    "doubled_exponent": doubled_exponent,
    "column_exponent": column_exponent,
    "shifted_cos_exponent": shifted_cos_exponent,
}

#: name → where the variant is found in the wild (see the course's reference facts).
SOURCES: dict[str, str] = {
    "paper": (
        "Vaswani et al. 2017, §3.5 (https://arxiv.org/abs/1706.03762); The Annotated Transformer; the PyTorch "
        "tutorial's PositionalEncoding; Hugging Face DistilBERT and XLM (create_sinusoidal_embeddings); as cos-first "
        "pairs: torchtune's RotaryPositionalEmbeddings cache and Meta Llama's freqs_cis viewed as reals"
    ),
    "concat_halves": (
        "TensorFlow's Transformer tutorial (https://www.tensorflow.org/text/tutorials/transformer); Hugging Face "
        "Marian, Pegasus, RoFormer and GPT-J sinusoidal tables ([sin | cos] halves, the paper's frequencies)"
    ),
    "tensor2tensor": (
        "tensor2tensor get_timing_signal_1d (https://github.com/tensorflow/tensor2tensor); fairseq "
        "SinusoidalPositionalEmbedding (https://github.com/facebookresearch/fairseq, padding row zeroed, positions "
        "from padding_idx + 1); Hugging Face FSMT, M2M100, Speech2Text and Whisper"
    ),
    "sin_only": "the source notebook of this course; https://github.com/luopeixiang/im2latex/issues/10",
    "doubled_exponent": (
        "S. Herath, 'Positional Encoding in the Transformer Model' (Medium, 2024); the sin columns of "
        "https://github.com/SamLynnEvans/Transformer/issues/7"
    ),
    "column_exponent": (
        "https://github.com/Kyubyong/transformer/issues/38; "
        "https://github.com/jadore801120/attention-is-all-you-need-pytorch/issues/32; "
        "https://github.com/SamLynnEvans/Transformer/issues/7 (loop by 2, 2*i for sin, 2*(i+1) for cos)"
    ),
    "shifted_cos_exponent": (
        "https://github.com/maxjcohen/transformer/issues/62 (cos over arange(1, d_model, 2)); study notes on "
        "Transformer variants (formula only)"
    ),
}

#: name → what it is, its symptom, the usual line of code, and the fix.
EXPLANATIONS: dict[str, str] = {
    "paper": (
        "This is the paper's table: sin(pos·ω_i) in column 2i and cos(pos·ω_i) in column 2i+1, "
        "with ω_i = base^(-2i/d_model). PE(0) is [0, 1, 0, 1, …], every row has norm sqrt(d_model/2), "
        "and PE(pos+k) is a rotation of PE(pos). Nothing to fix."
    ),
    "concat_halves": (
        "Not a bug: the paper's frequencies in the concatenated layout [sin … sin | cos … cos] "
        "(torch.cat((sin, cos), dim=-1) instead of writing into columns 0::2 and 1::2). It is a fixed "
        "column permutation of the paper's table, so a model learns the same things; only a test that "
        "expects sin/cos pairs in adjacent columns (PE(0) = [0, 1, 0, 1, …]) tells it apart. Keep one "
        "layout everywhere, e.g. when loading weights trained with the other one."
    ),
    "tensor2tensor": (
        "A different convention, not the paper's: concatenated [sin | cos] halves with frequencies "
        "exp(-i·ln(base)/(d_model/2 - 1)), i.e. `log_timescale_increment = log(base) / (num_timescales - 1)`. "
        "The slowest frequency is exactly 1/base, and the frequencies differ from the paper's by up to "
        "a few per cent (3.5 % at d_model = 512). Models trained with it work; just do not mix it with "
        "paper-style weights. To get the paper's table divide by d_model/2, not d_model/2 - 1, and interleave."
    ),
    "sin_only": (
        "The odd columns hold sin instead of cos, so each odd column copies the even column before it: "
        "half of the width carries no new information. Symptoms: PE(0) is all zeros, row norms wander "
        "instead of staying at sqrt(d_model/2), and no linear map takes PE(pos) to PE(pos+k). The usual "
        "line is `pe[:, 1::2] = torch.sin(position * div_term)`; it should be torch.cos."
    ),
    "doubled_exponent": (
        "Frequencies too low: pair k uses base^(-4k/d_model) instead of base^(-2k/d_model), so the upper "
        "half of the pairs is nearly constant and wavelengths reach base² instead of base. The table "
        "still looks healthy: PE(0) = [0, 1, 0, 1, …] and every row has norm sqrt(d_model/2). The usual "
        "code loops `for i in range(0, d_model, 2)` (i is already the column 2k) and then writes "
        "`10000 ** (2 * i / d_model)`, doubling the exponent. Use i/d_model with that loop, or loop over "
        "pairs i = 0 … d_model/2-1 with 2*i/d_model."
    ),
    "column_exponent": (
        "Each column j uses its own exponent 2j/d_model, so every column turns at the wrong frequency: the "
        "sin column of pair i at base^(-4i/d_model) (the doubled exponent) and its cos column at "
        "base^(-(4i+2)/d_model), slower still. The two columns of a pair no longer share an angle: "
        "(sin, cos) is not a point on the unit circle and row norms wander. The usual line is "
        "`angle = pos / 10000 ** (2 * j / d_model)` over all columns j (or a loop over columns i with "
        "`2 * i` for sin and `2 * (i + 1)` for cos). The exponent must use the pair index: "
        "`2 * (j // 2) / d_model`."
    ),
    "shifted_cos_exponent": (
        "The cos columns use exponent (2i+1)/d_model instead of 2i/d_model, so the cos column of a pair "
        "turns slower than its sin column: sin² + cos² ≠ 1 within a pair, row norms wander and the "
        "offset-k rotation is lost. It comes from misreading the formula as cos(pos / 10000^((2i+1)/d_model)); "
        "in the paper 2i+1 is only the column index, the exponent is 2i/d_model for both columns of a pair."
    ),
}


# --------------------------------------------------------------------------- tolerances and cheap tests
_ATOL = {torch.float64: 1e-5, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
#: per-position slack: a table whose angles were formed in float32 is off by up to ~8e-8·pos.
_PER_POS = 2.5e-7


def tolerance(positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Largest accepted ``|table - formula|`` at each position: ``atol(dtype) + 2.5e-7·pos``.

    ``atol`` is 1e-5 for float32 **and** float64 tables (a float64 table computed in float32
    and cast is still a correct table), 2e-3 for float16 and 1.6e-2 for bfloat16. The term in
    ``pos`` admits tables whose angles ``pos·ω`` were formed in float32, the common
    textbook code, whose error grows like ``pos·ulp``.
    """
    positions = check_tensor("positions", positions)
    dtype = check_float_dtype(dtype)
    return _ATOL[dtype] + _PER_POS * positions.detach().to("cpu", torch.float64)


def _table_arg(table: object, *, min_rows: int = 1) -> torch.Tensor:
    table = check_float_tensor("table", table)
    if table.dim() != 2:
        raise ValueError(f"table must be a 2-D tensor [max_len, d_model], got shape {list(table.shape)}")
    n, d = table.shape
    if d < 2 or d % 2:
        raise ValueError(f"table must have an even number of columns (sin/cos pairs), got {d}")
    if n < min_rows:
        raise ValueError(f"table must have at least {min_rows} rows, got {n}")
    return table


def _as64(table: torch.Tensor) -> torch.Tensor:
    return table.detach().to("cpu", torch.float64)


def _close(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, positions: torch.Tensor | None = None) -> bool:
    tol = _ATOL[dtype] if positions is None else tolerance(positions, dtype)[:, None]
    return bool(((a - b).abs() <= tol).all())


def pe0_is_0101(table: torch.Tensor) -> bool:
    """Cheap test 1: the first row is ``[0, 1, 0, 1, …]`` (every angle is 0 at position 0).

    Assumes the interleaved, sin-first layout and a table that starts at position 0: a correct
    ``[sin | cos]`` table starts ``[0, …, 0, 1, …, 1]`` and fails it, as does a continued sequence.
    """
    table = _table_arg(table)
    row = _as64(table)[0]
    want = torch.tensor([0.0, 1.0], dtype=torch.float64).repeat(row.numel() // 2)
    return _close(row, want, table.dtype)


def row_norms_constant(table: torch.Tensor) -> bool:
    """Cheap test 2: every row has norm ``sqrt(d_model/2)`` (one unit vector per pair).

    Layout-free: it holds for any column order and any start position (but not for a zeroed
    padding row).
    """
    table = _table_arg(table)
    norms = _as64(table).norm(dim=1)
    return _close(norms, torch.full_like(norms, math.sqrt(table.shape[1] / 2)), table.dtype)


def pairs_on_unit_circle(table: torch.Tensor) -> bool:
    """Cheap test 3: ``PE[:, 2i]² + PE[:, 2i+1]² = 1`` for every pair (sin and cos of one angle).

    Assumes the interleaved layout (pairs in adjacent columns; sin or cos first, any start
    position): a correct ``[sin | cos]`` table pairs ``sin(pω_i)`` with ``sin(pω_{i+1})`` here and fails.
    """
    table = _table_arg(table)
    t = _as64(table)
    radius = t[:, 0::2] ** 2 + t[:, 1::2] ** 2
    return bool(((radius - 1).abs() <= 2 * _ATOL[table.dtype]).all())


def frequencies_match(table: torch.Tensor, base: float = 10000.0) -> bool:
    """Cheap test 4: the sin columns turn at the paper's frequencies.

    Row 1 holds ``sin(ω_i)`` in column ``2i``; since ``0 < ω_i ≤ 1 < π/2``,
    ``asin(PE[1, 2i]) = ω_i = base^{-2i/d}``. Needs at least 2 rows. Assumes the interleaved,
    sin-first layout starting at position 0 (row 1 must be position 1).
    """
    table = _table_arg(table, min_rows=2)
    base = check_base(base)
    measured = torch.asin(_as64(table)[1, 0::2].clamp(-1, 1))
    want = inverse_frequencies(table.shape[1], base)
    return bool(((measured - want).abs() <= 2 * _ATOL[table.dtype]).all())


def matches_formula(table: torch.Tensor, base: float = 10000.0) -> bool:
    """Cheap test 5: every entry is within :func:`tolerance` of the float64 formula.

    The formula is the paper's (interleaved, sin first, rows = positions 0, 1, …): any other
    correct convention fails it; :func:`diagnose` recognises those.
    """
    table = _table_arg(table)
    base = check_base(base)
    pos = torch.arange(table.shape[0], dtype=torch.float64)
    return _close(_as64(table), _f_paper(pos, table.shape[1], base), table.dtype, pos)


#: name → cheap test ``(table, base) -> bool`` (True: the table passes). Each catches some bugs.
CHEAP_TESTS: dict[str, Callable[..., bool]] = {
    "PE(0) = [0,1,0,1,…]": pe0_is_0101,
    "row norms = sqrt(d/2)": row_norms_constant,
    "sin²+cos² = 1 per pair": pairs_on_unit_circle,
    "frequencies = base^(-2i/d)": frequencies_match,
    "matches float64 formula": matches_formula,
}
#: The cheap tests that take the frequency base as their second argument.
_BASE_TESTS = (frequencies_match, matches_formula)


# --------------------------------------------------------------------------- diagnose
@dataclass(frozen=True)
class Diagnosis:
    """What :func:`diagnose` found.

    ``variant``: a name from :data:`VARIANTS`, or ``"unknown"``. ``explanation``: what is
    wrong, the symptom, the usual line of code and the fix (or, for ``"unknown"``, the
    closest variant and which cheap tests fail). ``nearest``: the variant with the smallest
    error relative to the tolerance (equal to ``variant`` on a match). ``max_error``: the
    largest ``|table - nearest's table|`` (on a match, over the rows compared). ``also_matches``:
    other variants the table matches as well (variants that coincide for this shape and base).

    For a correct convention stored the way real code stores it, ``variant`` names the
    convention and three fields say what differs from the textbook table: ``start`` (the
    position of row 0, counting on through zeroed rows; 0 for the textbook table, negative
    when leading rows are left padding, as in fairseq's left-padded source sentences),
    ``zeroed_rows`` (rows that are all zero, e.g. a padding row; they are left out of the
    comparison) and ``cos_first`` (each pair stored as ``(cos, sin)`` instead of ``(sin, cos)``).
    ``differences`` lists them in words.
    """

    variant: str
    explanation: str
    nearest: str
    max_error: float
    also_matches: tuple[str, ...] = ()
    start: int = 0
    zeroed_rows: tuple[int, ...] = ()
    cos_first: bool = False

    @property
    def differences(self) -> tuple[str, ...]:
        """What differs from the textbook table of ``variant`` (empty for an exact match)."""
        found = []
        first = next(r for r in range(len(self.zeroed_rows) + 1) if r not in self.zeroed_rows)
        if self.start > 0 or (self.start < 0 and first == 0):
            found.append(f"row 0 is position {self.start}, not 0")
        elif self.start < 0:  # leading padding rows: the first real row carries the first position
            found.append(f"row {first} (the first non-zero row) is position {first + self.start}")
        if self.zeroed_rows:
            found.append(f"{_rows_text(self.zeroed_rows)} all zeros")
        if self.cos_first:
            found.append("each pair is stored cos first, then sin")
        return tuple(found)


_CHUNK_ROWS = 4096
_SCREEN_ROWS = 64
#: correct conventions that :func:`diagnose` also recognises shifted, with zeroed rows, or cos first.
_CONVENTIONS = ("paper", "concat_halves", "tensor2tensor")
#: largest start position :func:`diagnose` looks for. The tolerance grows with the position (float32
#: angles), so a match far out says less; 2^17 = 131,072 covers a cached decode in a 128k context.
_MAX_START = 2**17


def _rows_text(rows: tuple[int, ...]) -> str:
    shown = ", ".join(str(r) for r in rows[:5]) + (", …" if len(rows) > 5 else "")
    return f"row {shown} is" if len(rows) == 1 else f"rows {shown} ({len(rows)}) are"


def _distance_to_variant(
    table: torch.Tensor,
    name: str,
    base: float,
    rows: int | None = None,
    *,
    start: int = 0,
    keep: torch.Tensor | None = None,
    cos_first: bool = False,
) -> tuple[float, float]:
    """(largest |diff| / tolerance, largest |diff|) between ``table[:rows]`` and variant ``name``.

    Row ``r`` is compared with position ``start + r``; rows where ``keep`` is False are skipped;
    ``cos_first`` swaps sin and cos within each pair of the variant's table first.
    """
    n, d = table.shape
    n = n if rows is None else min(n, rows)
    ratio, err = 0.0, 0.0
    for first in range(0, n, _CHUNK_ROWS):
        last = min(n, first + _CHUNK_ROWS)
        block = table[first:last].detach().to("cpu", torch.float64)
        pos = torch.arange(start + first, start + last, dtype=torch.float64)
        want = _FORMULAS[name](pos, d, base)
        if cos_first:
            want = _swap_order(want, name)
        diff = (block - want).abs().nan_to_num(nan=math.inf)
        if keep is not None:
            diff = diff[keep[first:last]]
            pos = pos[keep[first:last]]
        if diff.numel():
            ratio = max(ratio, (diff / tolerance(pos, table.dtype)[:, None]).max().item())
            err = max(err, diff.max().item())
    return ratio, err


def _pairs_in_halves(name: str) -> bool:
    """Does variant ``name`` store sin and cos of a pair in two halves (``i``, ``h + i``), not adjacent columns?"""
    return name in ("concat_halves", "tensor2tensor")


def _swap_order(t: torch.Tensor, name: str) -> torch.Tensor:
    """Swap sin and cos within each pair: adjacent columns (interleaved) or the two halves."""
    h = t.shape[1] // 2
    if _pairs_in_halves(name):
        return torch.cat((t[:, h:], t[:, :h]), dim=1)
    return t.view(t.shape[0], h, 2).flip(-1).reshape(t.shape)


def _sin_cos(t: torch.Tensor, name: str, cos_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
    h = t.shape[1] // 2
    a, b = (t[:, :h], t[:, h:]) if _pairs_in_halves(name) else (t[:, 0::2], t[:, 1::2])
    return (b, a) if cos_first else (a, b)


def _frequencies(name: str, d: int, base: float) -> torch.Tensor:
    """The frequency of each pair of a correct convention (float64)."""
    one = torch.ones(1, dtype=torch.float64)
    s, c = _sin_cos(_FORMULAS[name](one, d, base), name, cos_first=False)
    return torch.atan2(s[0], c[0])  # the angle at position 1 is ω_i (every ω_i ≤ 1 < π)


def _max_start(pairs: int, dtype: torch.dtype) -> int:
    """Largest start position worth searching: ``P·(tol(P)/π)^pairs ≤ 1e-4``, at most :data:`_MAX_START`.

    A position fits one pair by chance with probability about ``tol/π``; with few pairs and the
    wide tolerance far out, some position below ``P`` would fit a noisy table by chance (for
    ``d_model = 4``, position 84,823 ≈ 13,500·2π looks like position 0 within 2e-3).
    """
    limit = _MAX_START
    while limit > 1 and limit * (tolerance(torch.tensor([float(limit)]), dtype).item() / math.pi) ** pairs > 1e-4:
        limit //= 2
    return limit


def _estimate_start(sin_row: torch.Tensor, cos_row: torch.Tensor, omega: torch.Tensor, limit: int) -> int | None:
    """The integer position ``p`` with ``(sin, cos)(p·ω_i) ≈ (sin_row, cos_row)`` for every pair, or None.

    Phase unwrapping: the slowest pair gives ``p`` modulo its period (one candidate per period
    below ``limit``), each faster pair refines it (a pair at most 16 times faster
    than the last one used, so a rounding error of the slower estimate cannot skip a turn), and
    the candidate whose rounded position fits every pair best wins.
    """
    theta = torch.atan2(sin_row, cos_row)
    if not bool(torch.isfinite(theta).all()):
        return None
    order = torch.argsort(omega).tolist()
    chain = [order[0]]
    for prev, nxt in zip(order[:-1], order[1:], strict=True):
        if omega[nxt] / omega[chain[-1]] > 16 and prev != chain[-1]:
            chain.append(prev)
    if order[-1] != chain[-1]:
        chain.append(order[-1])
    slow = chain[0]
    period = 2 * math.pi / omega[slow].item()
    turns = torch.arange(min(256, int(limit / period) + 1), dtype=torch.float64)
    p = (torch.remainder(theta[slow], 2 * math.pi) + 2 * math.pi * turns) / omega[slow]
    for k in chain[1:]:
        m = torch.round((p * omega[k] - theta[k]) / (2 * math.pi))
        p = (theta[k] + 2 * math.pi * m) / omega[k]
    q = torch.round(p)
    miss = torch.remainder(q[:, None] * omega[None, :] - theta[None, :] + math.pi, 2 * math.pi) - math.pi
    best = int(miss.abs().amax(dim=1).argmin())
    return int(q[best].item())


def _match_convention(table: torch.Tensor, base: float) -> Diagnosis | None:
    """A correct convention that matches ``table`` with a start offset, zeroed rows or cos-first pairs."""
    n, d = table.shape
    t = table.detach().to("cpu", torch.float64)
    zero = t.abs().amax(dim=1) <= _ATOL[table.dtype]
    if int(zero.sum()) > n // 4:  # mostly zeros: nothing to recognise
        return None
    keep = ~zero
    first = int(keep.nonzero()[0])
    zeroed = tuple(int(r) for r in zero.nonzero().flatten())
    best: tuple[float, float, str, int, bool] | None = None  # (ratio, error, name, start, cos_first)
    limit = _max_start(d // 2, table.dtype)
    for name in _CONVENTIONS:
        omega = _frequencies(name, d, base)
        for cos_first in (False, True):
            s, c = _sin_cos(t[first : first + 1], name, cos_first)
            position = _estimate_start(s[0], c[0], omega, limit)
            if position is None or not 0 <= position <= limit + first:
                continue
            start = position - first
            if start == 0 and not zeroed and not cos_first:
                continue  # the plain table: already compared
            shifted = functools.partial(
                _distance_to_variant, table, name, base, start=start, keep=keep, cos_first=cos_first
            )
            if shifted(_SCREEN_ROWS)[0] > 1.0:
                continue
            ratio, err = shifted()
            if ratio <= 1.0 and (best is None or ratio < best[0]):
                best = (ratio, err, name, start, cos_first)
    if best is None:
        return None
    _, err, name, start, cos_first = best  # the closest fit, if several conventions fit
    found = Diagnosis(name, "", name, err, (), start, zeroed, cos_first)
    what = "; ".join(found.differences)
    text = f"A correct table in the {name} convention, stored the way real code stores it: {what}. "
    if start:
        text += (
            f"Rows that start at position {first + start} are what a continued sequence or a cached decode "
            "adds; fairseq, M2M100 and FSMT number positions from padding_idx + 1 (left padding rows are zero). "
        )
    if zeroed:
        text += "A zeroed row is the padding row of fairseq-style tables (emb[padding_idx] = 0). "
    if cos_first:
        text += (
            "Cos-first pairs are how torchtune caches rotary angles (stack([cos, sin], -1)) and what "
            "Meta's freqs_cis (cos + i·sin) looks like viewed as reals. "
        )
    text += (
        "None of this is a bug as long as the code that reads the table expects it. Apart from that: "
        + EXPLANATIONS[name]
        + f" Seen in: {SOURCES[name]}."
    )
    return Diagnosis(name, text, name, err, (), start, zeroed, cos_first)


def diagnose(table: torch.Tensor, base: float = 10000.0) -> Diagnosis:
    """Name the variant that built ``table`` (``[max_len ≥ 8, d_model ≥ 4 even]``), or ``"unknown"``.

    The table is compared entry by entry with each variant's float64 table for the same
    shape and ``base``; it matches a variant when every entry is within
    :func:`tolerance` (float32 accuracy for float32 and float64 tables). If several
    variants match (they can coincide, e.g. for a base very close to 1), the first in
    :data:`VARIANTS` order wins — correct conventions before bugs — and the others are
    listed in ``also_matches``. Note that a base is part of the question: a ``paper``
    table built with ``base = b²`` *is* the ``doubled_exponent`` table of ``base = b``.

    When no variant matches as it stands, the correct conventions (``paper``,
    ``concat_halves``, ``tensor2tensor``) are tried the way real code stores them: row 0 at
    another position ``p0`` (estimated from the first non-zero row by phase unwrapping; any
    ``p0`` up to ``2^17``, less for narrow tables where a far position could fit by chance, since
    the tolerance grows with the position), up to a quarter of the rows zeroed (a padding row),
    and pairs stored cos first; the closest fit wins. A match names the convention; ``start``,
    ``zeroed_rows``, ``cos_first`` and the explanation say what differs. The bugs are only
    recognised at position 0.
    """
    table = _table_arg(table, min_rows=8)
    base = check_base(base)
    if table.shape[1] < 4:
        raise ValueError(f"table must have at least 4 columns to be diagnosed, got {table.shape[1]}")
    # screen every variant on the first rows, then check the survivors on the whole table
    screen = {name: _distance_to_variant(table, name, base, _SCREEN_ROWS) for name in _FORMULAS}
    full = {name: _distance_to_variant(table, name, base) for name in _FORMULAS if screen[name][0] <= 1.0}
    matches = [name for name, (ratio, _) in full.items() if ratio <= 1.0]
    if matches:
        name = matches[0]
        text = EXPLANATIONS[name] + f" Seen in: {SOURCES[name]}."
        if len(matches) > 1:
            text += (
                f" At this shape and base the table also matches {', '.join(matches[1:])}: these variants "
                "coincide here, and the first in VARIANTS order is reported."
            )
        return Diagnosis(name, text, name, full[name][1], tuple(matches[1:]))
    stored = _match_convention(table, base)
    if stored is not None:
        return stored
    # no match: compare with every variant over the whole table (the screen only gives a lower
    # bound), so that `nearest` really is the variant with the smallest error relative to the tolerance
    full.update({name: _distance_to_variant(table, name, base) for name in _FORMULAS if name not in full})
    nearest = min(_FORMULAS, key=lambda name: full[name][0])  # ties: first in order
    error = full[nearest][1]
    failing = [
        label for label, test in CHEAP_TESTS.items() if not (test(table, base) if test in _BASE_TESTS else test(table))
    ]
    if error < 0.1:
        closest = (
            f"It is close to {nearest}, but off by up to {error:.2g}, more than float32 rounding allows "
            "(noise? angles computed in float16/bfloat16, or in float32 at very large positions?). "
        )
    else:
        closest = f"It is not close to any of them (even the nearest, {nearest}, is off by {error:.2g} somewhere). "
    text = (
        f"This table matches none of the {len(_FORMULAS)} known variants for base = {base:g}, not even a correct "
        f"convention shifted to another start position, with zeroed rows or with cos first. {closest}"
        f"Cheap tests that fail: {', '.join(failing) or 'none'}. Other causes: another base, "
        "random or zero values, or a bug that is not in this gallery."
    )
    return Diagnosis("unknown", text, nearest, error)
