"""Altair charts of positional-encoding tables, drawn honestly at any size.

Every builder takes tensors, makes a small long-format pandas frame (values
rounded to :data:`DECIMALS`, at most :data:`MAX_ROWS` rows) and returns an
Altair chart. Axis names follow the series' vocabulary: ``pos``, ``dimension``,
``value``.

Large tables are *reduced* before charting, never refused, and never by naive
subsampling, which aliases: see :mod:`pe_lessons.sampling` (:func:`reduce_table`,
:func:`apparent_period`). A notebook calls :func:`enable_renderer` once (the ``"pe_lessons"``
Altair renderer of :mod:`pe_lessons.rendering`), so that each chart is stored as its Vega-Lite
spec and a small static PNG; importing this module changes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd
import torch

from ._checks import (
    check_base,
    check_choice,
    check_d_model,
    check_int,
    check_optional,
    check_positive_int,
    check_real,
    check_tensor,
)
from .rendering import enable_renderer
from .sampling import (
    DECIMALS,
    REDUCTIONS,
    apparent_period,
    band_count,
    band_edges,
    band_sizes,
    check_table,
    reduce_table,
    table_frame,
)
from .sinusoidal import wavelengths

__all__ = [
    "MAX_ROWS",
    "DECIMALS",
    "REDUCTIONS",
    "enable_renderer",
    "table_frame",
    "reduce_table",
    "apparent_period",
    "heatmap",
    "dimension_lines",
    "wavelength_chart",
    "similarity_heatmap",
    "offset_curve",
    "decay_chart",
    "training_curves",
    "roofline",
    "attention_heatmaps",
    "accuracy_by_length",
]

#: Largest number of data rows a chart may embed.
MAX_ROWS = 5000
#: Column bands a reduced heatmap keeps by default: every column of widths up to 128.
DEFAULT_MAX_COLS = 128


def _title(title: str, subtitle: str | None) -> alt.TitleParams | str:
    return alt.TitleParams(text=title, subtitle=subtitle) if subtitle else title


def _band_words(k: int, noun: str) -> str:
    return f"{k} {noun}s" if k > 1 else f"1 {noun}"


def heatmap(
    table: torch.Tensor,
    *,
    title: str = "Positional encoding",
    width: int = 420,
    height: int = 260,
    how: str = "minmax",
    max_rows: int | None = None,
    max_cols: int | None = None,
    start_pos: int = 0,
    start_dim: int = 0,
) -> alt.Chart:
    """Position × dimension heatmap of a table (rows = positions, columns = dimensions).

    A table of at most :data:`MAX_ROWS` cells is drawn cell by cell. A larger one
    (or one with ``max_rows``/``max_cols`` set) is first reduced by
    :func:`reduce_table` to at most ``max_rows`` position bands and ``max_cols``
    (default 128) column bands, so the chart never holds more than
    :data:`MAX_ROWS` data rows; each block is drawn as two half-cells ``min`` |
    ``max`` (``how="minmax"``, the default: nothing the table does is hidden),
    coloured by its ``mean`` (``how="mean"``, a box filter: a column whose period
    lies between one and two bands leaks through as a false, slower wave), or — to
    show the aliasing illusion on purpose — by its first entry (``how="stride"``).
    Bands are labelled by their first position/column (``pos``, ``dimension``).
    ``start_pos``/``start_dim`` label a slice of a larger table.
    """
    table = check_table(table)
    how = check_choice("how", how, REDUCTIONS)
    max_rows = check_optional(check_positive_int, "max_rows", max_rows)
    max_cols = check_optional(check_positive_int, "max_cols", max_cols)
    start_pos = check_int("start_pos", start_pos, minimum=0)
    start_dim = check_int("start_dim", start_dim, minimum=0)
    _check_finite(table, "table")
    n, d = table.shape
    if max_rows is None and max_cols is None and n * d <= MAX_ROWS:
        nr, nc = n, d
    else:
        nc = band_count(d, max_cols if max_cols is not None else DEFAULT_MAX_COLS)
        nr = band_count(n, max_rows if max_rows is not None else max(1, MAX_ROWS // max(nc, 1)))
    if nr * nc > MAX_ROWS:
        raise ValueError(
            f"max_rows={max_rows} × max_cols={max_cols} leaves {nr} × {nc} blocks, "
            f"more than a chart may hold ({MAX_ROWS}); lower them"
        )
    if (nr, nc) == (n, d):
        frame = table_frame(table)
        frame["pos"] += start_pos
        frame["dimension"] += start_dim
        return _heatmap_cells(alt.Chart(frame, title=title), ["pos", "dimension", "value"], {}, width, height)
    frame = reduce_table(table, nr, nc, how=how, start_pos=start_pos, start_dim=start_dim)
    what = {"mean": "mean", "minmax": "min | max", "stride": "first value (naive subsampling)"}[how]
    subtitle = (
        f"each cell: {what} of {band_sizes(band_edges(n, nr), 'position')} × {band_sizes(band_edges(d, nc), 'column')}"
    )
    frame = frame.drop(columns=["pos_end", "dimension_end"])  # bands are equal (±1): ordinal rows suffice
    chart = alt.Chart(frame, title=_title(title, subtitle))
    offset: dict = {}
    if how == "minmax":  # each block as two half-height cells: min above, max below
        chart = chart.transform_fold(["min", "max"], as_=["stat", "value"])
        offset = {"yOffset": alt.YOffset("stat:N", sort=["min", "max"])}
        tooltip = ["pos", "dimension", "min", "max"]
    else:
        tooltip = ["pos", "dimension", "value"]
    return _heatmap_cells(chart, tooltip, offset, width, height)


def _heatmap_cells(chart: alt.Chart, tooltip: list[str], offset: dict, width: int, height: int) -> alt.Chart:
    """Rectangles at (``dimension``, ``pos``) coloured by ``value`` on the red–blue scale [-1, 1]."""
    return (
        chart.mark_rect()
        .encode(
            x=alt.X("dimension:O", title="dimension", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("pos:O", title="pos", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("value:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1]), title="value"),
            tooltip=tooltip,
            **offset,
        )
        .properties(width=width, height=height)
    )


def _check_dims(dims: object, d: int) -> list[int]:
    if isinstance(dims, (str, bytes)) or not isinstance(dims, Sequence):
        raise TypeError(f"dims must be a list of column indices, got {type(dims).__name__}")
    dims = [check_int("dims[]", j) for j in dims]
    if not dims:
        raise ValueError("dims must name at least one column")
    bad = [j for j in dims if not 0 <= j < d]
    if bad:
        raise ValueError(f"dims must be columns of the table (0 … {d - 1}), got {bad}")
    return dims


def dimension_lines(
    table: torch.Tensor,
    dims: list[int],
    *,
    title: str = "Value vs position",
    width: int = 480,
    height: int = 220,
    how: str = "minmax",
    max_rows: int | None = None,
    start_pos: int = 0,
) -> alt.Chart:
    """One line per chosen column: ``value`` against ``pos``.

    When ``positions × len(dims)`` exceeds :data:`MAX_ROWS` (or ``max_rows``
    position bands are asked for), positions are reduced in bands by
    :func:`reduce_table`: ``how="minmax"`` (default) draws the band's exact
    range as a shaded envelope, ``"mean"`` a line through band means, and
    ``"stride"`` the naive subsample (aliasing on purpose).
    """
    table = check_table(table)
    n, d = table.shape
    dims = _check_dims(dims, d)
    how = check_choice("how", how, REDUCTIONS)
    max_rows = check_optional(check_positive_int, "max_rows", max_rows)
    start_pos = check_int("start_pos", start_pos, minimum=0)
    # a min–max envelope drawn with step-after needs one more point per line: the end of its last band
    extra = 1 if how == "minmax" else 0
    if max_rows is None and n * len(dims) <= MAX_ROWS:
        nr = n
    else:
        nr = band_count(n, max_rows if max_rows is not None else max(1, MAX_ROWS // len(dims) - extra))
    if (nr + (extra if nr < n else 0)) * len(dims) > MAX_ROWS:
        raise ValueError(f"max_rows={max_rows} × {len(dims)} dims exceeds {MAX_ROWS} chart rows; lower max_rows")
    if nr == n:
        frame = table_frame(table[:, dims])
        frame["pos"] += start_pos
        frame["dimension"] = [dims[j] for j in frame["dimension"]]
        return (
            alt.Chart(frame, title=title)
            .mark_line()
            .encode(
                x=alt.X("pos:Q", title="pos"),
                y=alt.Y("value:Q", title="value"),
                color=alt.Color("dimension:N", title="dimension"),
                tooltip=["pos", "dimension", "value"],
            )
            .properties(width=width, height=height)
        )
    frame = reduce_table(table[:, dims], nr, how=how, start_pos=start_pos).drop(columns=["pos_end", "dimension_end"])
    frame["dimension"] = [dims[j] for j in frame["dimension"]]
    if how == "minmax":  # repeat each line's last band at pos = its end, so that step-after draws it too
        last = frame[frame["pos"] == frame["pos"].max()].assign(pos=start_pos + n)
        frame = pd.concat([frame, last], ignore_index=True)
    what = {"minmax": "min–max range", "mean": "mean", "stride": "first value (naive subsampling)"}[how]
    chart = alt.Chart(frame, title=_title(title, f"{what} of each band of {band_sizes(band_edges(n, nr), 'position')}"))
    x = alt.X("pos:Q", title="pos", scale=alt.Scale(domain=[start_pos, start_pos + n], nice=False, zero=False))
    color = alt.Color("dimension:N", title="dimension")
    if how == "minmax":
        return (
            chart.mark_area(opacity=0.6, interpolate="step-after")
            .encode(
                x=x,
                y=alt.Y("min:Q", title="value"),
                y2=alt.Y2("max:Q"),
                color=color,
                tooltip=["pos", "dimension", "min", "max"],
            )
            .properties(width=width, height=height)
        )
    return (
        chart.mark_line()
        .encode(x=x, y=alt.Y("value:Q", title="value"), color=color, tooltip=["pos", "dimension", "value"])
        .properties(width=width, height=height)
    )


def wavelength_chart(
    d_model: int,
    base: float = 10000.0,
    *,
    title: str | None = None,
    width: int = 420,
    height: int = 240,
    threshold: float | None = None,
) -> alt.LayerChart:
    r"""Wavelength ``λ_i = 2π·base^(2i/d_model)`` of each pair ``i``, on a log scale.

    On a log axis the geometric progression is a straight line from ``2π``
    (pair 0) towards ``2π·base`` (dashed rules mark both ends). ``threshold``
    (optional, in positions) adds a horizontal rule, e.g. the shortest period a
    picture can show; pairs below it are drawn in orange.
    """
    d_model = check_d_model(d_model)
    base = check_base(base)
    if threshold is not None:
        threshold = check_real("threshold", threshold, above=0.0, hint="a number of positions")
    lam = wavelengths(d_model, base)
    frame = pd.DataFrame(
        {
            "i": range(d_model // 2),
            "dimension": range(0, d_model, 2),
            "wavelength": lam.numpy().round(DECIMALS),
        }
    )
    title = title or f"Wavelength of each pair, d_model = {d_model}, base = {base:g}"
    y = alt.Y("wavelength:Q", title="wavelength (positions, log scale)", scale=alt.Scale(type="log"))
    x = alt.X("i:Q", title="i (pair; columns 2i, 2i+1)")
    tooltip = ["i", alt.Tooltip("dimension:Q", title="dimension (sin column)"), "wavelength"]
    color: Any = alt.Undefined
    if threshold is not None:
        frame["period"] = ["≤ threshold" if w <= threshold else "> threshold" for w in frame["wavelength"]]
        color = alt.Color(
            "period:N",
            title=f"λ vs {threshold:g}",
            scale=alt.Scale(domain=["≤ threshold", "> threshold"], range=["#f58518", "#4c78a8"]),
        )
        tooltip.append("period")
    points = alt.Chart(frame).mark_point(filled=True).encode(x=x, y=y, color=color, tooltip=tooltip)
    line = alt.Chart(frame).mark_line(color="#4c78a8", opacity=0.4).encode(x=x, y=y)
    rules = pd.DataFrame(
        {"wavelength": [round(2 * math.pi, DECIMALS), round(2 * math.pi * base, DECIMALS)], "label": ["2π", "2π·base"]}
    )
    if threshold is not None:
        rules.loc[len(rules)] = [round(float(threshold), DECIMALS), f"threshold {threshold:g}"]
    rule_base = alt.Chart(rules).encode(y=y)
    rule = rule_base.mark_rule(strokeDash=[4, 4], color="gray").encode(tooltip=["label", "wavelength"])
    labels = rule_base.mark_text(align="right", dx=-4, dy=-6, color="gray").encode(x=alt.value(width), text="label:N")
    return alt.layer(line, points, rule, labels, title=title).properties(width=width, height=height)


def _check_finite(table: torch.Tensor, name: str) -> None:
    """Refuse NaN/inf (a chart would show them as blanks or break its colour scale), naming the first."""
    finite = torch.isfinite(table)
    if not bool(finite.all()):
        pos, dim = (int(v) for v in (~finite).nonzero()[0])
        raise ValueError(
            f"{name} must hold finite values to be drawn; {name}[{pos}, {dim}] = {table[pos, dim].item()} "
            f"({int((~finite).sum())} non-finite entries)"
        )


def similarity_heatmap(
    similarity: torch.Tensor,
    *,
    title: str = "PE(p) · PE(q)",
    width: int = 300,
    height: int = 300,
    max_rows: int | None = None,
    row_title: str = "p (pos)",
    column_title: str = "q (pos)",
) -> alt.Chart:
    """Heatmap of a matrix of scores ``S[p, q]`` (e.g. ``PE(p)·PE(q)``); ``row_title`` and ``column_title``
    name its axes (rows ``p``, columns ``q`` by default; rotary scores use the query and key positions).

    Up to :data:`MAX_ROWS` cells are drawn one by one; a larger matrix (or one
    with ``max_rows`` set) is averaged over square-ish blocks (:func:`reduce_table`
    with ``how="mean"``) so that at most ``max_rows`` bands of ``p`` remain and
    the chart holds at most :data:`MAX_ROWS` cells.
    """
    sim = check_table(similarity, "similarity")
    _check_finite(sim, "similarity")
    max_rows = check_optional(check_positive_int, "max_rows", max_rows)
    n, m = sim.shape
    chart_title: str | alt.TitleParams = title
    if max_rows is None and n * m <= MAX_ROWS:
        nr, nc = n, m
    else:
        side = math.isqrt(MAX_ROWS)
        nr = band_count(n, max_rows if max_rows is not None else side)
        nc = band_count(m, max(1, MAX_ROWS // nr) if max_rows is not None else side)
    if (nr, nc) == (n, m):
        frame = table_frame(sim)
    else:
        frame = reduce_table(sim, nr, nc, how="mean").drop(columns=["pos_end", "dimension_end"])
        subtitle = f"each cell: mean of {band_sizes(band_edges(n, nr), 'position')} × {band_sizes(band_edges(m, nc), 'position')}"
        chart_title = _title(title, subtitle)
    frame = frame.rename(columns={"pos": "p", "dimension": "q", "value": "score"})
    return (
        alt.Chart(frame, title=chart_title)
        .mark_rect()
        .encode(
            x=alt.X("q:O", title=column_title, axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("p:O", title=row_title, axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("score:Q", scale=alt.Scale(scheme="viridis"), title="score"),
            tooltip=["p", "q", "score"],
        )
        .properties(width=width, height=height)
    )


def _lines(
    x: torch.Tensor,
    curves: dict[str, torch.Tensor],
    *,
    fields: tuple[str, str, str],
    names: tuple[str, str],
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool,
    width: int,
    height: int,
) -> alt.Chart:
    """One line per entry of ``curves`` (name → 1-D tensor, one value per ``x``); ``nan`` points dropped.

    ``fields`` names the frame's x, y and line columns; ``names`` the two arguments, for error messages.
    """
    x_field, y_field, line_field = fields
    x_name, curves_name = names
    if not isinstance(curves, dict) or not curves:
        raise TypeError(f"{curves_name} must be a non-empty dict {{name: 1-D tensor, one value per entry of {x_name}}}")
    frames = []
    for name, values in curves.items():
        values = check_tensor(f"{curves_name}[{name!r}]", values).detach().to("cpu", torch.float64).reshape(-1)
        if values.numel() != x.numel():
            raise ValueError(f"{curves_name}[{name!r}] has {values.numel()} values for {x.numel()} {x_name}")
        frame = pd.DataFrame({x_field: x.numpy(), y_field: values.numpy().round(DECIMALS), line_field: name})
        frames.append(frame.dropna())
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) > MAX_ROWS:
        raise ValueError(f"{len(frame)} points exceed {MAX_ROWS} chart rows; use fewer {x_name} or {curves_name}")
    scale = alt.Scale(type="log") if log_x else alt.Undefined
    return (
        alt.Chart(frame, title=title)
        .mark_line()
        .encode(
            x=alt.X(f"{x_field}:Q", title=x_title, scale=scale),
            y=alt.Y(f"{y_field}:Q", title=y_title),
            color=alt.Color(f"{line_field}:N", title="", sort=list(curves)),
            tooltip=[line_field, x_field, y_field],
        )
        .properties(width=width, height=height)
    )


def offset_curve(
    scores: dict[str, torch.Tensor],
    offsets: torch.Tensor,
    *,
    title: str = "Score against offset",
    x_title: str = "offset k = p − q",
    y_title: str = "score",
    width: int = 480,
    height: int = 220,
) -> alt.Chart:
    """Lines of scores against an integer axis (by default the offset ``k = p − q``), one per entry of ``scores``.

    ``scores`` maps a curve name to a 1-D tensor with one value per entry of ``offsets``.
    """
    offsets = check_tensor("offsets", offsets).detach().reshape(-1).cpu()
    return _lines(
        offsets,
        scores,
        fields=("k", "score", "curve"),
        names=("offsets", "scores"),
        title=title,
        x_title=x_title,
        y_title=y_title,
        log_x=False,
        width=width,
        height=height,
    )


def decay_chart(
    distance: torch.Tensor,
    curves: dict[str, torch.Tensor],
    *,
    title: str = "Bound against relative distance",
    x_title: str = "relative distance m − n",
    y_title: str = "value",
    log_x: bool = True,
    width: int = 480,
    height: int = 240,
) -> alt.Chart:
    """Lines of values against a positive distance axis (log scale by default), one per entry of ``curves``.

    ``curves`` maps a line name to a 1-D tensor with one value per entry of ``distance``
    (use ``nan`` where a line has no value; those points are dropped).
    """
    distance = check_tensor("distance", distance).detach().to("cpu", torch.float64).reshape(-1)
    if log_x and bool((distance <= 0).any()):
        raise ValueError("a log axis needs distances > 0; pass log_x=False or drop distance 0")
    return _lines(
        distance,
        curves,
        fields=("distance", "value", "line"),
        names=("distances", "curves"),
        title=title,
        x_title=x_title,
        y_title=y_title,
        log_x=log_x,
        width=width,
        height=height,
    )


def training_curves(
    frame: pd.DataFrame,
    *,
    metrics: tuple[str, ...] = ("loss", "accuracy"),
    color: str = "scheme",
    smooth: int = 1,
    title: str = "Training curves",
    width: int = 300,
    height: int = 200,
) -> alt.Chart:
    """Line charts of training metrics against ``step``, one panel per metric, one line per ``color`` value.

    ``frame`` has columns ``step``, ``color`` (e.g. ``scheme``) and each of ``metrics``
    (e.g. :func:`pe_lessons.toy.train`'s output with a ``scheme`` column added).
    ``smooth > 1`` plots the trailing mean over that many steps. Values are rounded to 2 decimals.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    missing = [c for c in ("step", color, *metrics) if c not in frame.columns]
    if missing:
        raise ValueError(f"frame lacks column(s) {missing}; it has {list(frame.columns)}")
    smooth = check_positive_int("smooth", smooth)
    parts = []
    for key, group in frame.sort_values("step").groupby(color, sort=False):
        values = group[list(metrics)].rolling(smooth, min_periods=1).mean()
        part = pd.concat([group[["step"]], values], axis=1).assign(**{color: key})
        parts.append(part.melt(id_vars=["step", color], value_vars=list(metrics), var_name="metric"))
    long = pd.concat(parts, ignore_index=True)
    long["value"] = long["value"].astype(float).round(2)
    if len(long) > MAX_ROWS:
        raise ValueError(f"{len(long)} chart rows exceeds {MAX_ROWS}; pass fewer steps (e.g. every 5th)")
    return (
        alt.Chart(long)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y("value:Q", title="value"),
            color=alt.Color(f"{color}:N", title=color),
            tooltip=["step", color, "metric", "value"],
        )
        .properties(width=width, height=height)
        .facet(column=alt.Column("metric:N", title=None, sort=list(metrics)), title=title)
        .resolve_scale(y="independent")
    )


def roofline(
    points: pd.DataFrame,
    *,
    bandwidth_gbps: float,
    peak_gflops: float,
    title: str = "Roofline",
    width: int = 440,
    height: int = 280,
) -> alt.LayerChart:
    """Roofline-style chart: attainable GFLOP/s = min(peak, bandwidth × intensity), and measured points.

    ``points`` has columns ``op``, ``intensity`` (FLOP per byte moved) and ``gflops``
    (measured). The roof is drawn from ``bandwidth_gbps`` (GB/s, e.g. a measured
    ``clone``) and ``peak_gflops`` (e.g. a measured matmul). Both axes are logarithmic.
    Points on the slanted part of the roof are memory-bound; on the flat part, compute-bound.
    """
    if not isinstance(points, pd.DataFrame):
        kind = type(points).__name__
        raise TypeError(f"points must be a pandas DataFrame with columns op, intensity, gflops, got {kind}")
    if not {"op", "intensity", "gflops"} <= set(points.columns):
        raise ValueError(f"points must have columns op, intensity, gflops; it has {list(points.columns)}")
    if len(points) > MAX_ROWS:
        raise ValueError(f"points has {len(points)} rows, more than {MAX_ROWS}")
    bandwidth_gbps = check_real("bandwidth_gbps", bandwidth_gbps, above=0.0)
    peak_gflops = check_real("peak_gflops", peak_gflops, above=0.0)
    for column in ("intensity", "gflops"):
        values = pd.to_numeric(points[column], errors="coerce").astype(float)
        bad = ~((values > 0) & (values < math.inf))  # NaN fails both
        if bad.any():
            row = points.loc[bad].iloc[0]
            raise ValueError(
                f"points[{column!r}] must hold finite, positive numbers (the axes are logarithmic); "
                f"op {row['op']!r} has {column} = {row[column]!r}"
            )
    low = min(float(points["intensity"].min()), peak_gflops / bandwidth_gbps) / 4
    high = max(float(points["intensity"].max()), peak_gflops / bandwidth_gbps) * 4
    knee = peak_gflops / bandwidth_gbps
    roof = pd.DataFrame(
        {
            "intensity": [low, knee, high],
            "gflops": [bandwidth_gbps * low, peak_gflops, peak_gflops],
        }
    ).round(DECIMALS)
    data = points[["op", "intensity", "gflops"]].copy()
    data[["intensity", "gflops"]] = data[["intensity", "gflops"]].astype(float).round(DECIMALS)
    x = alt.X("intensity:Q", title="arithmetic intensity (FLOP / byte)", scale=alt.Scale(type="log"))
    y = alt.Y("gflops:Q", title="GFLOP/s", scale=alt.Scale(type="log"))
    line = alt.Chart(roof).mark_line(color="gray").encode(x=x, y=y)
    dots = (
        alt.Chart(data)
        .mark_point(filled=True, size=70)
        .encode(x=x, y=y, color=alt.Color("op:N", title="op"), tooltip=["op", "intensity", "gflops"])
    )
    labels = alt.Chart(data).mark_text(align="left", dx=7, dy=-7).encode(x=x, y=y, text="op:N")
    return alt.layer(line, dots, labels, title=title).properties(width=width, height=height)


def attention_heatmaps(
    weights: dict[str, torch.Tensor],
    *,
    queries: Sequence[int] | torch.Tensor | None = None,
    title: str = "Attention weights",
    columns: int = 3,
    cell: int = 6,
    decimals: int = 3,
) -> alt.FacetChart:
    """One heatmap of attention weights per entry of ``weights`` (name → ``[q, k]`` tensor), side by side.

    Rows are queries, columns keys (key positions ``0 … k-1``). ``queries`` gives the positions of
    the rows (default ``0 … q-1``), e.g. when only the last rows of a long sequence are shown.
    All panels share one colour scale (weights in ``[0, 1]``); values are rounded to ``decimals``.
    """
    if not isinstance(weights, dict) or not weights:
        raise TypeError("weights must be a non-empty dict {name: [q, k] tensor of attention weights}")
    columns = check_int("columns", columns, minimum=1)
    cell = check_int("cell", cell, minimum=1)
    decimals = check_int("decimals", decimals, minimum=0)
    frames, shape = [], None
    for name, w in weights.items():
        w = check_tensor(f"weights[{name!r}]", w).detach().to("cpu", torch.float64)
        if w.dim() != 2:
            raise ValueError(f"weights[{name!r}] must be a [q, k] matrix, got shape {list(w.shape)}")
        if shape is not None and tuple(w.shape) != shape:
            raise ValueError(f"all weights must have the same shape; {name!r} has {list(w.shape)}, not {list(shape)}")
        shape = tuple(w.shape)
        rows = torch.arange(shape[0]) if queries is None else torch.as_tensor(queries).reshape(-1)
        if rows.numel() != shape[0]:
            raise ValueError(f"queries has {rows.numel()} positions for {shape[0]} rows of weights")
        q_idx, k_idx = torch.meshgrid(rows, torch.arange(shape[1]), indexing="ij")
        step = 2 ** max(0, math.ceil(math.log2(shape[1] / 8)))  # at most about 8 key labels
        frames.append(
            pd.DataFrame(
                {
                    "query": q_idx.reshape(-1).numpy(),
                    "key": k_idx.reshape(-1).numpy(),
                    "weight": w.reshape(-1).numpy().round(decimals),
                    "panel": name,
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) > MAX_ROWS:
        raise ValueError(f"{len(frame)} cells exceed {MAX_ROWS} chart rows; show fewer queries, keys or panels")
    assert shape is not None
    return (
        alt.Chart(frame)
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key position", axis=alt.Axis(values=list(range(0, shape[1], step)), labelAngle=0)),
            y=alt.Y("query:O", title="query position", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="viridis", domain=[0, 1]), title="weight"),
            tooltip=["panel", "query", "key", "weight"],
        )
        .properties(width=cell * shape[1], height=cell * shape[0])
        .facet(facet=alt.Facet("panel:N", title=None, sort=list(weights)), columns=columns, title=title)
    )


def accuracy_by_length(
    frame: pd.DataFrame,
    *,
    title: str = "Accuracy against sequence length",
    x_title: str = "evaluation length (tokens)",
    width: int = 420,
    height: int = 240,
) -> alt.Chart:
    """One line with points per ``scheme``: the mean ``accuracy`` over seeds against ``length`` (log axis).

    ``frame`` has columns ``scheme``, ``length`` and ``accuracy`` (one row per run, e.g. per seed);
    ``nan`` accuracies (a model that cannot run at that length) are dropped, so a scheme measured at
    one length only still shows as a point. Means are rounded to 2 decimals.
    """
    if not isinstance(frame, pd.DataFrame) or not {"scheme", "length", "accuracy"} <= set(frame.columns):
        raise ValueError("frame must be a DataFrame with columns scheme, length, accuracy")
    order = list(dict.fromkeys(frame["scheme"]))
    means = (
        frame.dropna(subset=["accuracy"])
        .groupby(["scheme", "length"], sort=False)["accuracy"]
        .mean()
        .round(2)
        .reset_index()
    )
    if len(means) > MAX_ROWS:
        raise ValueError(f"{len(means)} points exceed {MAX_ROWS} chart rows")
    if (means["length"] <= 0).any():
        raise ValueError("lengths must be positive (the axis is logarithmic)")
    lengths = sorted(int(n) for n in frame["length"].unique())
    return (
        alt.Chart(means, title=title)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "length:Q",
                title=x_title,
                scale=alt.Scale(type="log", domain=[lengths[0], lengths[-1]]),
                axis=alt.Axis(values=lengths),
            ),
            y=alt.Y("accuracy:Q", title="accuracy", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("scheme:N", title="scheme", sort=order),
            tooltip=["scheme", "length", "accuracy"],
        )
        .properties(width=width, height=height)
    )
