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
    if not isinstance(points, pd.DataFrame) or not {"op", "intensity", "gflops"} <= set(points.columns):
        raise ValueError("points must be a DataFrame with columns op, intensity, gflops")
    if len(points) > MAX_ROWS:
        raise ValueError(f"points has {len(points)} rows, more than {MAX_ROWS}")
    for name, value in (("bandwidth_gbps", bandwidth_gbps), ("peak_gflops", peak_gflops)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name} must be a positive number, got {value!r}")
    if (points["intensity"] <= 0).any() or (points["gflops"] <= 0).any():
        raise ValueError("intensity and gflops must be positive (the axes are logarithmic)")
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
    dots = alt.Chart(data).mark_point(filled=True, size=70).encode(
        x=x, y=y, color=alt.Color("op:N", title="op"), tooltip=["op", "intensity", "gflops"]
    )
    labels = alt.Chart(data).mark_text(align="left", dx=7, dy=-7).encode(x=x, y=y, text="op:N")
    return alt.layer(line, dots, labels, title=title).properties(width=width, height=height)
