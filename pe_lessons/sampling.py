"""Drawing a large table honestly: bands of positions summarised, never naively subsampled.

A column ``sin(pos·ω)`` sampled every ``k`` positions is the sequence ``sin(n·kω)``;
when ``kω > π`` (fewer than two samples per period, below the Nyquist rate) that
sequence is identical to a *slower* sinusoid of angular step ``|kω − 2πm|`` for the
nearest integer ``m``: a picture of it shows a pattern that is not in the table
(aliasing; :func:`apparent_period` measures the period a curve seems to have).
:func:`reduce_table` therefore summarises each band of ``k`` consecutive positions
by its exact ``min``/``max`` (a fast column then fills ``[-1, 1]`` in every band) or
by its ``mean`` (a box filter: a column much faster than a band fades towards 0,
but any column with a period under two bands leaks through as a weaker, false
wave — min/max is the honest default). ``how="stride"`` —
keep one row per band — exists only to demonstrate the illusion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import torch

from ._checks import check_choice, check_int, check_optional, check_positive_int, check_real, check_tensor

__all__ = [
    "DECIMALS",
    "REDUCTIONS",
    "table_frame",
    "reduce_table",
    "apparent_period",
    "check_table",
    "band_count",
    "band_edges",
    "band_sizes",
]

#: Decimals kept in chart data: small notebooks, outputs stable across machines.
DECIMALS = 4
#: How :func:`reduce_table` summarises a band of positions (``"stride"`` only to show aliasing).
REDUCTIONS = ("minmax", "mean", "stride")


def check_table(table: object, name: str = "table") -> torch.Tensor:
    """A 2-D real tensor ``[pos, dimension]`` with values to draw, as float64 on the CPU."""
    table = check_tensor(name, table)
    if table.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor [pos, dimension], got shape {list(table.shape)}")
    if table.is_complex():
        raise TypeError(f"{name} must hold real values, got dtype {table.dtype}")
    if table.device.type == "meta":
        raise ValueError(f"{name} is on the meta device: it has a shape but no values to draw")
    return table.detach().to("cpu", torch.float64)


def band_count(n: int, max_bands: int | None) -> int:
    """How many bands ``n`` rows (or columns) become: all of them, or at most ``max_bands``."""
    return n if max_bands is None or n <= max_bands else max_bands


def band_edges(n: int, bands: int) -> torch.Tensor:
    """Band edges ``ceil(b·n/bands)``, ``b = 0 … bands``: consecutive bands whose sizes differ by at most 1."""
    return -((-torch.arange(bands + 1) * n) // max(bands, 1))


def band_sizes(edges: torch.Tensor, noun: str) -> str:
    """How many rows the bands between ``edges`` hold, in words (``"4 positions"``, ``"3–4 columns"``)."""
    sizes = edges.diff()
    lo, hi = int(sizes.min()), int(sizes.max())
    return f"{lo} {noun}" + ("" if lo == 1 else "s") if lo == hi else f"{lo}–{hi} {noun}s"


def _rounded(values: torch.Tensor, decimals: int | None):
    array = values.reshape(-1).numpy()
    return array if decimals is None else array.round(decimals)


def table_frame(table: torch.Tensor, positions: torch.Tensor | None = None) -> pd.DataFrame:
    """Long-format frame with columns ``pos``, ``dimension``, ``value`` (values rounded).

    ``positions`` (optional, one per row) labels the rows; by default ``0 … n-1``.
    """
    table = check_table(table)
    n, d = table.shape
    if positions is None:
        pos = torch.arange(n)
    else:
        pos = check_tensor("positions", positions).reshape(-1).cpu()
        if pos.numel() != n:
            raise ValueError(f"positions must hold one label per table row ({n}), got {pos.numel()}")
    return pd.DataFrame(
        {
            "pos": pos.repeat_interleave(d).numpy(),
            "dimension": torch.arange(d).repeat(n).numpy(),
            "value": table.reshape(-1).numpy().round(DECIMALS),
        }
    )


def reduce_table(
    table: torch.Tensor,
    max_rows: int | None = None,
    max_cols: int | None = None,
    *,
    how: str = "minmax",
    start_pos: int = 0,
    start_dim: int = 0,
    decimals: int | None = DECIMALS,
) -> pd.DataFrame:
    """Summarise a table by bands of positions (and of columns), as a long-format frame.

    The ``n`` rows are cut into ``min(n, max_rows)`` consecutive bands whose sizes
    differ by at most one — band ``b`` starts at ``ceil(b·n/bands)`` — and columns
    likewise with ``max_cols`` (``None`` keeps every row or column), so at most
    ``max_rows × max_cols`` blocks remain. Each block becomes one frame row with its
    extent ``pos`` … ``pos_end`` and ``dimension`` … ``dimension_end`` (ends
    exclusive, offset by ``start_pos``/``start_dim``), and:

    - ``how="minmax"``: ``min`` and ``max``, the exact extremes of the block
      (before rounding to ``decimals``): nothing the table does is hidden;
    - ``how="mean"``: ``value``, the block average (a box blur: columns much faster
      than a band fade towards 0, but a column with a period under two bands is only
      weakened, and what is left of it is aliased: a fainter false wave);
    - ``how="stride"``: ``value``, the block's first entry — naive subsampling,
      which aliases any column whose period is shorter than two bands (kept only
      to demonstrate that illusion).
    """
    table = check_table(table)
    max_rows = check_optional(check_positive_int, "max_rows", max_rows)
    max_cols = check_optional(check_positive_int, "max_cols", max_cols)
    how = check_choice("how", how, REDUCTIONS)
    start_pos = check_int("start_pos", start_pos, minimum=0)
    start_dim = check_int("start_dim", start_dim, minimum=0)
    if decimals is not None:
        decimals = check_int("decimals", decimals, minimum=0)
    n, d = table.shape
    nr, nc = band_count(n, max_rows), band_count(d, max_cols)
    rows, cols = band_edges(n, nr), band_edges(d, nc)
    frame = pd.DataFrame(
        {
            "pos": (start_pos + rows[:-1]).repeat_interleave(nc).numpy(),
            "pos_end": (start_pos + rows[1:]).repeat_interleave(nc).numpy(),
            "dimension": (start_dim + cols[:-1]).repeat(nr).numpy(),
            "dimension_end": (start_dim + cols[1:]).repeat(nr).numpy(),
        }
    )
    if n == 0 or d == 0:
        columns = ["min", "max"] if how == "minmax" else ["value"]
        return frame.assign(**{c: pd.Series(dtype="float64") for c in columns})
    row_band = (torch.arange(n) * nr // n)[:, None].expand(n, d)  # row r lies in band floor(r·nr/n)
    col_band = (torch.arange(d) * nc // d)[None, :].expand(nr, d)

    def blocks(reduce: str) -> torch.Tensor:  # [nr, nc]: `reduce` over each block of the table
        by_rows = table.new_empty(nr, d).scatter_reduce_(0, row_band, table, reduce, include_self=False)
        return by_rows.new_empty(nr, nc).scatter_reduce_(1, col_band, by_rows, reduce, include_self=False)

    if how == "minmax":
        frame["min"] = _rounded(blocks("amin"), decimals)
        frame["max"] = _rounded(blocks("amax"), decimals)
    elif how == "mean":
        counts = rows.diff()[:, None] * cols.diff()[None, :]
        frame["value"] = _rounded(blocks("sum") / counts, decimals)
    else:
        frame["value"] = _rounded(table[rows[:-1]][:, cols[:-1]], decimals)
    return frame


def apparent_period(values: torch.Tensor | Sequence[float], spacing: float = 1.0) -> float:
    """The period a sampled curve *appears* to have, from its zero crossings.

    ``values`` are samples taken every ``spacing`` positions. With the mean
    removed, each sign change is located by linear interpolation (a curve that
    only touches 0 does not cross it; a run of exact zeros counts once); a curve with
    ``c ≥ 2`` crossings spread over a span ``s`` has period ``2s / (c − 1)``
    (two crossings per period). Returns ``math.inf`` when fewer than two
    crossings are visible (no period can be read off).
    """
    if isinstance(values, torch.Tensor):
        if values.dim() != 1:
            raise ValueError(f"values must be 1-D, got shape {list(values.shape)}")
        if values.dtype.is_complex or values.dtype == torch.bool or values.device.type == "meta":
            raise TypeError(f"values must hold real numbers with data, got {values.dtype} on {values.device.type}")
        v = values.detach().to("cpu", torch.float64)
    elif isinstance(values, Sequence) and not isinstance(values, (str, bytes)):
        try:
            v = torch.tensor([float(x) for x in values], dtype=torch.float64)
        except (TypeError, ValueError, OverflowError) as err:
            raise TypeError(f"values must be a 1-D tensor or a sequence of real numbers ({err})") from None
    else:
        raise TypeError(f"values must be a 1-D tensor or a sequence of numbers, got {type(values).__name__}")
    spacing = check_real("spacing", spacing, above=0.0)
    if v.numel() and not bool(torch.isfinite(v).all()):
        raise ValueError("values must be finite numbers (no NaN or infinity): a crossing cannot be located in them")
    v = v - v.mean()
    nz = torch.nonzero(v != 0, as_tuple=True)[0]  # exact zeros are skipped: a sign change across them counts once
    a_at, b_at = nz[:-1], nz[1:]
    change = torch.sign(v[a_at]) != torch.sign(v[b_at])
    a_at, b_at = a_at[change], b_at[change]
    if a_at.numel() < 2:
        return math.inf
    a, b = v[a_at], v[b_at]
    # neighbours: linear interpolation; a run of zeros between them: its middle
    crossing = torch.where(b_at == a_at + 1, a_at + a / (a - b), (a_at + b_at) / 2)
    times = crossing.to(torch.float64) * spacing
    return float(2 * (times[-1] - times[0]) / (a_at.numel() - 1))
