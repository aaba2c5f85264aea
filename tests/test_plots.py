"""pe_lessons.plots: frames, honest reduction of large tables, chart specs, and bad input."""

import math

import pandas as pd
import pytest
import torch

from pe_lessons import plots, sinusoidal_table
from pe_lessons.plots import MAX_ROWS


def spec(chart):
    """The chart's Vega-Lite dict and its (only) data rows."""
    d = chart.to_dict()
    (rows,) = d["datasets"].values() if "datasets" in d else ([],)
    return d, rows


def encodings(d):
    if "layer" in d:
        return [layer.get("encoding", {}) for layer in d["layer"]]
    return [d["encoding"]]


def test_small_heatmap_draws_every_cell_with_names_and_tooltips():
    table = sinusoidal_table(50, 32)
    d, rows = spec(plots.heatmap(table, title="PE for 50 positions"))
    assert len(rows) == 1600 and d["title"] == "PE for 50 positions"
    enc = d["encoding"]
    assert (enc["x"]["field"], enc["x"]["title"], enc["y"]["field"], enc["y"]["title"]) == (
        "dimension",
        "dimension",
        "pos",
        "pos",
    )
    assert enc["color"]["title"] == "value" and enc["color"]["scale"]["domain"] == [-1, 1]
    assert [t["field"] for t in enc["tooltip"]] == ["pos", "dimension", "value"]
    assert all(round(r["value"], 4) == r["value"] for r in rows)


def test_heatmap_slice_offsets_label_positions_and_dimensions():
    table = sinusoidal_table(1010, 16)[1000:, 4:8]
    frame = plots.heatmap(table, start_pos=1000, start_dim=4).data
    assert frame["pos"].min() == 1000 and frame["pos"].max() == 1009
    assert sorted(frame["dimension"].unique()) == [4, 5, 6, 7]


@pytest.mark.parametrize("how", plots.REDUCTIONS)
def test_large_heatmap_is_reduced_below_max_rows(how):
    table = sinusoidal_table(45000, 128)
    chart = plots.heatmap(table, how=how)
    d, rows = spec(chart)
    assert 0 < len(rows) <= MAX_ROWS and len(chart.data) == len(rows)
    assert d["title"]["text"] == "Positional encoding" and "positions" in d["title"]["subtitle"]
    enc = d["encoding"]
    assert enc["x"]["title"] == "dimension" and enc["y"]["title"] == "pos" and enc["color"]["title"] == "value"
    assert (enc["x"]["type"], enc["y"]["type"]) == ("ordinal", "ordinal") and "tooltip" in enc
    assert ("yOffset" in enc) == (how == "minmax")
    frame = chart.data
    assert list(frame.columns) == ["pos", "dimension"] + (["min", "max"] if how == "minmax" else ["value"])
    assert frame["pos"].min() == 0 and frame["pos"].max() < 45000 and frame["dimension"].max() == 127


def test_heatmap_rejects_limits_that_exceed_max_rows():
    with pytest.raises(ValueError, match="max_rows"):
        plots.heatmap(sinusoidal_table(10000, 64), max_rows=1000, max_cols=64)


def test_dimension_lines_small_and_reduced():
    small = plots.dimension_lines(sinusoidal_table(120, 50), [0, 6], title="two columns")
    d, rows = spec(small)
    assert len(rows) == 240 and d["mark"]["type"] == "line" and d["title"] == "two columns"
    assert d["encoding"]["x"]["title"] == "pos" and d["encoding"]["y"]["title"] == "value"
    assert sorted({r["dimension"] for r in rows}) == [0, 6]
    big = sinusoidal_table(45000, 128)
    for how, mark in [("minmax", "area"), ("mean", "line"), ("stride", "line")]:
        chart = plots.dimension_lines(big, [0, 64, 127], how=how)
        d, rows = spec(chart)
        assert len(rows) <= MAX_ROWS and d["mark"]["type"] == mark
        assert d["encoding"]["x"]["title"] == "pos" and d["encoding"]["y"]["title"] == "value"
        assert sorted({r["dimension"] for r in rows}) == [0, 64, 127]
        assert "tooltip" in d["encoding"]
    lines = plots.dimension_lines(big, [0], max_rows=100, start_pos=5)
    assert len(lines.data) == 101 and lines.data["pos"].min() == 5
    # step-after needs the end of the last band: it is repeated at pos = start_pos + n, so no band is lost
    end = lines.data[lines.data["pos"] == 5 + 45000]
    last = lines.data.iloc[99]
    assert len(end) == 1 and (end["min"].item(), end["max"].item()) == (last["min"], last["max"])
    assert last["pos"] == 5 + 45000 - 450
    lines = plots.dimension_lines(big, [0, 1], how="mean", max_rows=100)
    assert len(lines.data) == 200 and lines.data["pos"].max() == 45000 - 450  # a line needs no end point


def test_dimension_lines_default_reduction_fits_max_rows_with_the_end_points():
    table = torch.zeros(10000, 5)
    for how in plots.REDUCTIONS:
        frame = plots.dimension_lines(table, [0, 1, 2, 3, 4], how=how).data
        assert len(frame) <= MAX_ROWS and frame.groupby("dimension").size().nunique() == 1
    exact = plots.dimension_lines(torch.zeros(1000, 5), [0, 1, 2, 3, 4], how="minmax").data
    assert len(exact) == 5000 and exact["pos"].max() == 999  # small enough: every position, no bands


def test_wavelength_chart_log_scale_and_values():
    chart = plots.wavelength_chart(50, threshold=300)
    d = chart.to_dict()
    assert d["title"] == "Wavelength of each pair, d_model = 50, base = 10000"
    frame = chart.layer[1].data
    assert list(frame.columns[:3]) == ["i", "dimension", "wavelength"] and len(frame) == 25
    assert frame["wavelength"].iloc[3] == round(2 * math.pi * 10000 ** (6 / 50), 4)  # ≈ 18.97: column 6
    assert (frame["period"] == "≤ threshold").sum() == 11  # pairs 0–10 have λ ≤ 300
    enc = encodings(d)[1]
    assert enc["y"]["scale"]["type"] == "log" and enc["y"]["title"].startswith("wavelength")
    assert enc["x"]["field"] == "i" and "tooltip" in enc
    with pytest.raises(ValueError, match="d_model"):
        plots.wavelength_chart(7)
    with pytest.raises(ValueError, match="base"):
        plots.wavelength_chart(8, base=1.0)
    with pytest.raises(ValueError, match="threshold"):
        plots.wavelength_chart(8, threshold=-1)


def test_similarity_heatmap_small_and_large():
    pe = sinusoidal_table(40, 16, dtype=torch.float64)
    d, rows = spec(plots.similarity_heatmap(pe @ pe.T))
    assert len(rows) == 1600 and d["encoding"]["color"]["title"] == "score"
    pe = sinusoidal_table(1000, 16, dtype=torch.float64)
    chart = plots.similarity_heatmap(pe @ pe.T)
    d, rows = spec(chart)
    assert len(rows) <= MAX_ROWS and "mean" in d["title"]["subtitle"]
    assert list(chart.data.columns) == ["p", "q", "score"]
    assert len(plots.similarity_heatmap(pe @ pe.T, max_rows=20).data) <= MAX_ROWS


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: plots.heatmap([[0.0, 1.0]]), TypeError),
        (lambda: plots.heatmap(torch.zeros(3)), ValueError),
        (lambda: plots.heatmap(torch.zeros(2, 3, 4)), ValueError),
        (lambda: plots.heatmap(torch.zeros(4, 4), how="median"), ValueError),
        (lambda: plots.heatmap(torch.zeros(4, 4), max_rows=0), ValueError),
        (lambda: plots.heatmap(torch.zeros(4, 4), max_rows=2.5), TypeError),
        (lambda: plots.heatmap(torch.zeros(4, 4), start_pos=-1), ValueError),
        (lambda: plots.dimension_lines(torch.zeros(5, 4), [4]), ValueError),
        (lambda: plots.dimension_lines(torch.zeros(5, 4), [-1]), ValueError),
        (lambda: plots.dimension_lines(torch.zeros(5, 4), []), ValueError),
        (lambda: plots.dimension_lines(torch.zeros(5, 4), 2), TypeError),
        (lambda: plots.dimension_lines(torch.zeros(5, 4), [1.0]), TypeError),
        (lambda: plots.dimension_lines("table", [0]), TypeError),
        (lambda: plots.similarity_heatmap(torch.zeros(4)), ValueError),
    ],
)
def test_bad_input_is_named(call, error):
    with pytest.raises(error):
        call()


def test_low_precision_and_integer_tables_are_accepted():
    for dtype in (torch.float16, torch.bfloat16, torch.int64):
        frame = plots.heatmap(torch.ones(3, 2, dtype=dtype)).data
        assert isinstance(frame, pd.DataFrame) and (frame["value"] == 1.0).all()


def test_line_charts_of_named_curves():
    from pe_lessons.plots import decay_chart, offset_curve

    k = torch.arange(-3, 4)
    spec = offset_curve({"a": k.double() ** 2, "b": -k.double()}, k).to_dict()
    data = next(iter(spec["datasets"].values()))
    assert len(data) == 14 and {row["curve"] for row in data} == {"a", "b"}
    assert spec["encoding"]["x"]["field"] == "k" and "scale" not in spec["encoding"]["x"]
    d = torch.tensor([1.0, 2.0, 4.0])
    spec = decay_chart(d, {"bound": torch.tensor([3.0, float("nan"), 1.0])}).to_dict()
    assert len(next(iter(spec["datasets"].values()))) == 2  # the nan point is dropped
    assert spec["encoding"]["x"]["scale"] == {"type": "log"}
    with pytest.raises(ValueError, match="a log axis needs distances > 0"):
        decay_chart(torch.tensor([0.0, 1.0]), {"x": torch.ones(2)})
    with pytest.raises(ValueError, match=r"scores\['a'\] has 2 values for 7 offsets"):
        offset_curve({"a": torch.ones(2)}, k)
    with pytest.raises(TypeError, match="curves must be a non-empty dict"):
        decay_chart(d, {})


def _points(**column):
    frame = pd.DataFrame({"op": ["add", "matmul"], "intensity": [0.1, 50.0], "gflops": [5.0, 900.0]})
    for name, values in column.items():
        frame[name] = values
    return frame


def test_roofline_draws_roof_and_points():
    chart = plots.roofline(_points(), bandwidth_gbps=20.0, peak_gflops=1000.0).to_dict()
    roof, dots = chart["layer"][0], chart["layer"][1]
    datasets = chart["datasets"]
    assert len(datasets[roof["data"]["name"]]) == 3 and len(datasets[dots["data"]["name"]]) == 2


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(bandwidth_gbps=float("inf")), ValueError, "bandwidth_gbps must be a finite"),
        (dict(bandwidth_gbps=float("nan")), ValueError, "bandwidth_gbps must be a finite"),
        (dict(peak_gflops=0.0), ValueError, "peak_gflops"),
        (dict(peak_gflops="1e3"), TypeError, "peak_gflops must be a real number"),
        (dict(bandwidth_gbps=True), TypeError, "bandwidth_gbps"),
        (dict(points=_points(intensity=[float("nan"), 1.0])), ValueError, r"points\['intensity'\].*'add'"),
        (dict(points=_points(gflops=[1.0, float("inf")])), ValueError, r"points\['gflops'\].*'matmul'"),
        (dict(points=_points(gflops=[1.0, -2.0])), ValueError, "gflops"),
        (dict(points=_points(intensity=["x", 1.0])), ValueError, "intensity"),
        (dict(points=_points().drop(columns="op")), ValueError, "columns op, intensity, gflops"),
        (dict(points=[1, 2]), TypeError, "DataFrame"),
    ],
)
def test_roofline_refuses_what_it_cannot_draw(kwargs, error, words):
    args = dict(points=_points(), bandwidth_gbps=20.0, peak_gflops=1000.0) | kwargs
    with pytest.raises(error, match=words):
        plots.roofline(args.pop("points"), **args)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_heatmap_refuses_non_finite_values_and_names_one(bad):
    table = torch.zeros(40, 8)
    table[5, 3] = bad
    with pytest.raises(ValueError, match=r"table\[5, 3\]"):
        plots.heatmap(table)
    big = torch.zeros(70000, 8)
    big[60000, 1] = bad
    with pytest.raises(ValueError, match=r"table\[60000, 1\]"):
        plots.heatmap(big)
    with pytest.raises(ValueError, match="meta"):
        plots.heatmap(torch.zeros(4, 4, device="meta"))


def test_heatmap_defaults_to_min_max_bands_because_band_means_leak():
    from pe_lessons.sampling import apparent_period, reduce_table

    table = sinusoidal_table(10000, 16, dtype=torch.float64)
    chart = plots.heatmap(table)
    assert "min | max" in chart.to_dict()["title"]["subtitle"] and {"min", "max"} <= set(chart.data.columns)
    means = reduce_table(table, max_rows=312, how="mean")
    k = 10000 / 312  # about 32 positions per band
    col = {j: torch.tensor(means.loc[means.dimension == j, "value"].to_numpy()) for j in (2, 4)}
    # period 62.8 (under two bands): its band means keep 0.6 of its amplitude, flickering from band to band
    assert col[4].abs().max() > 0.6
    # period 19.9 (under one band): not averaged away but aliased, a false wave of period ~83
    assert 0.15 < col[2].abs().max() < 0.25 and abs(apparent_period(col[2], spacing=k) - 83) < 2
    spans = reduce_table(table, max_rows=312, how="minmax").eval("span = max - min")
    assert (spans[spans.dimension < 4].span > 1.9).all()  # min/max: a column faster than a band fills it


def test_similarity_heatmap_names_its_axes():
    chart = plots.similarity_heatmap(torch.eye(4), row_title="m (query pos)", column_title="n (key pos)")
    encoding = chart.to_dict()["encoding"]
    assert encoding["y"]["title"] == "m (query pos)" and encoding["x"]["title"] == "n (key pos)"
    default = plots.similarity_heatmap(torch.eye(4)).to_dict()["encoding"]
    assert default["y"]["title"] == "p (pos)" and default["x"]["title"] == "q (pos)"
