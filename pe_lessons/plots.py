"""Altair charts of positional-encoding tables.

Every builder takes tensors, makes a small long-format pandas frame (values
rounded, at most :data:`MAX_ROWS` rows) and returns an ``alt.Chart``. Axis
names follow the series' vocabulary: ``pos``, ``dimension``, ``value``.

Importing this module enables the ``"pe_lessons"`` Altair renderer: each chart
is displayed as a Vega-Lite spec (interactive in JupyterLab) *and* a static JPEG image
made by ``vl-convert`` (visible on GitHub, in nbconvert's HTML and wherever
JavaScript does not run). On Colab it uses Altair's HTML renderer instead.
"""

from __future__ import annotations

import base64
import sys

import altair as alt
import pandas as pd
import torch

from ._checks import check_tensor

__all__ = ["MAX_ROWS", "enable_renderer", "table_frame", "heatmap", "dimension_lines", "similarity_heatmap"]

#: Largest number of data rows a chart may embed.
MAX_ROWS = 5000
#: Decimals kept in chart data: small notebooks, outputs stable across machines.
DECIMALS = 4


def _render(spec: dict, **metadata) -> dict:
    if "google.colab" in sys.modules:  # Colab shows HTML with Vega-Embed, not the Vega-Lite mimetype
        return alt.vegalite.v5.display.html_renderer(spec, **metadata)
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    bundle: dict = {
        alt.vegalite.v5.display.VEGALITE_MIME_TYPE: spec,
        "text/plain": f"<chart: {title}>" if title else "<chart>",
    }
    try:
        import vl_convert as vlc

        version = "v" + "_".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
        # JPEG: a quarter of a PNG's size for these charts, which keeps notebooks small
        image = vlc.vegalite_to_jpeg(spec, scale=1.0, quality=80, vl_version=version)
        bundle["image/jpeg"] = base64.b64encode(image).decode("ascii")
    except ImportError:  # the static image is a fallback; the chart itself still shows
        pass
    return bundle


def enable_renderer() -> None:
    """Make ``"pe_lessons"`` the active Altair renderer (Vega-Lite spec + static image)."""
    if "pe_lessons" not in alt.renderers.names():
        alt.renderers.register("pe_lessons", _render)
    alt.renderers.enable("pe_lessons")


enable_renderer()


def _check_table(table: object, name: str = "table") -> torch.Tensor:
    table = check_tensor(name, table)
    if table.dim() != 2:
        raise ValueError(f"{name} must be a 2-D tensor [pos, dimension], got shape {list(table.shape)}")
    return table.detach().to("cpu", torch.float64)


def table_frame(table: torch.Tensor, positions: torch.Tensor | None = None) -> pd.DataFrame:
    """Long-format frame with columns ``pos``, ``dimension``, ``value`` (values rounded)."""
    table = _check_table(table)
    n, d = table.shape
    pos = torch.arange(n) if positions is None else positions.reshape(-1).cpu()
    return pd.DataFrame(
        {
            "pos": pos.repeat_interleave(d).numpy(),
            "dimension": torch.arange(d).repeat(n).numpy(),
            "value": table.reshape(-1).numpy().round(DECIMALS),
        }
    )


def heatmap(table: torch.Tensor, *, title: str = "Positional encoding", width: int = 420, height: int = 260) -> alt.Chart:
    """Position × dimension heatmap of a table (rows = positions, columns = dimensions)."""
    table = _check_table(table)
    n, d = table.shape
    if n * d > MAX_ROWS:
        raise ValueError(
            f"table has {n}×{d} = {n * d} cells, more than a chart may hold ({MAX_ROWS}); "
            "pass a slice or a reduced table"
        )
    frame = table_frame(table)
    return (
        alt.Chart(frame, title=title)
        .mark_rect()
        .encode(
            x=alt.X("dimension:O", title="dimension", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("pos:O", title="pos", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("value:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1]), title="value"),
            tooltip=["pos", "dimension", "value"],
        )
        .properties(width=width, height=height)
    )


def dimension_lines(table: torch.Tensor, dims: list[int], *, title: str = "Value vs position", width: int = 480, height: int = 220) -> alt.Chart:
    """One line per chosen column: ``value`` against ``pos``."""
    table = _check_table(table)
    n, d = table.shape
    bad = [j for j in dims if not 0 <= j < d]
    if bad:
        raise ValueError(f"dims must be columns of the table (0 … {d - 1}), got {bad}")
    if n * len(dims) > MAX_ROWS:
        raise ValueError(f"{n} positions × {len(dims)} dims exceeds {MAX_ROWS} chart rows; slice the table")
    frame = table_frame(table[:, dims])
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


def similarity_heatmap(similarity: torch.Tensor, *, title: str = "PE(p) · PE(q)", width: int = 300, height: int = 300) -> alt.Chart:
    """Heatmap of a square matrix of scores ``S[p, q]`` (e.g. ``PE(p)·PE(q)``)."""
    sim = _check_table(similarity, "similarity")
    n, m = sim.shape
    if n * m > MAX_ROWS:
        raise ValueError(f"similarity has {n * m} cells, more than {MAX_ROWS}; use fewer positions")
    frame = table_frame(sim).rename(columns={"pos": "p", "dimension": "q", "value": "score"})
    return (
        alt.Chart(frame, title=title)
        .mark_rect()
        .encode(
            x=alt.X("q:O", title="q (pos)", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("p:O", title="p (pos)", axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("score:Q", scale=alt.Scale(scheme="viridis"), title="score"),
            tooltip=["p", "q", "score"],
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
    if not isinstance(scores, dict) or not scores:
        raise TypeError("scores must be a non-empty dict {name: 1-D tensor of scores, one per offset}")
    frames = []
    for name, values in scores.items():
        values = check_tensor(f"scores[{name!r}]", values).detach().to("cpu", torch.float64).reshape(-1)
        if values.numel() != offsets.numel():
            raise ValueError(f"scores[{name!r}] has {values.numel()} values for {offsets.numel()} offsets")
        frames.append(pd.DataFrame({"k": offsets.numpy(), "score": values.numpy().round(DECIMALS), "curve": name}))
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) > MAX_ROWS:
        raise ValueError(f"{len(frame)} points exceed {MAX_ROWS} chart rows; use fewer offsets or curves")
    return (
        alt.Chart(frame, title=title)
        .mark_line()
        .encode(
            x=alt.X("k:Q", title=x_title),
            y=alt.Y("score:Q", title=y_title),
            color=alt.Color("curve:N", title="", sort=list(scores)),
            tooltip=["curve", "k", "score"],
        )
        .properties(width=width, height=height)
    )


__all__ += ["offset_curve"]


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
    if not isinstance(curves, dict) or not curves:
        raise TypeError("curves must be a non-empty dict {name: 1-D tensor, one value per distance}")
    if log_x and bool((distance <= 0).any()):
        raise ValueError("a log axis needs distances > 0; pass log_x=False or drop distance 0")
    frames = []
    for name, values in curves.items():
        values = check_tensor(f"curves[{name!r}]", values).detach().to("cpu", torch.float64).reshape(-1)
        if values.numel() != distance.numel():
            raise ValueError(f"curves[{name!r}] has {values.numel()} values for {distance.numel()} distances")
        frame = pd.DataFrame({"distance": distance.numpy(), "value": values.numpy().round(DECIMALS), "line": name})
        frames.append(frame.dropna())
    frame = pd.concat(frames, ignore_index=True)
    if len(frame) > MAX_ROWS:
        raise ValueError(f"{len(frame)} points exceed {MAX_ROWS} chart rows; use fewer distances or lines")
    scale = alt.Scale(type="log") if log_x else alt.Scale()
    return (
        alt.Chart(frame, title=title)
        .mark_line()
        .encode(
            x=alt.X("distance:Q", title=x_title, scale=scale),
            y=alt.Y("value:Q", title=y_title),
            color=alt.Color("line:N", title="", sort=list(curves)),
            tooltip=["line", "distance", "value"],
        )
        .properties(width=width, height=height)
    )


__all__ += ["decay_chart"]


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
    if isinstance(smooth, bool) or not isinstance(smooth, int) or smooth < 1:
        raise ValueError(f"smooth must be an integer >= 1 (steps to average), got {smooth!r}")
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

__all__ += ["training_curves"]
