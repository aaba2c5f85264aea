"""pe_lessons.widgets: the explorer's static chart, its update callback (no browser needed), bad input.

Runs under ipywidgets 8 (the course environment) and, through test_the_explorer_works_under_ipywidgets_7,
again under ipywidgets 7.7.1, the version Colab ships."""

import os
import subprocess
import sys
from pathlib import Path

import ipywidgets as widgets
import pytest
import torch

from pe_lessons import sinusoidal_table
from pe_lessons.plots import MAX_ROWS
from pe_lessons.widgets import Explorer, explorer_chart, pe_explorer


def test_explorer_chart_window_matches_the_table():
    chart = explorer_chart(16, 10000.0, (10, 30), (2, 6))
    frame = chart.data
    assert frame["pos"].min() == 10 and frame["pos"].max() == 29
    assert sorted(frame["dimension"].unique()) == [2, 3, 4, 5]
    want = sinusoidal_table(30, 16, dtype=torch.float64)[10:30, 2:6].reshape(-1).numpy().round(4)
    assert (frame["value"].to_numpy() == want).all()
    title = chart.to_dict()["title"]
    assert "d_model = 16" in title and "pos 10–29" in title and "dimension 2–5" in title


def test_explorer_chart_large_window_is_reduced():
    chart = explorer_chart(512, 10000.0, (0, 10000))
    assert len(chart.data) <= MAX_ROWS and "min | max" in chart.to_dict()["title"]["subtitle"]


def test_function_returns_a_widget_with_sliders_and_output():
    ex = pe_explorer()
    assert isinstance(ex, Explorer) and isinstance(ex, widgets.VBox)
    assert isinstance(ex.output, widgets.Output)
    assert isinstance(ex.base, widgets.FloatLogSlider) and ex.base.value == 10000.0
    assert ex.d_model.value == 64 and ex.columns.value == (0, 64) and ex.positions == (0, 100)
    assert (ex.start.value, ex.length.value) == (0, 100) and 100 in ex.length.options
    assert repr(ex) == "PE explorer: d_model=64, base=10,000, pos 0–99, dimension 0–63 (needs a live kernel)"
    assert len(repr(ex)) <= 110  # ipywidgets cuts a longer text fallback mid-word


def test_moving_a_slider_updates_the_chart():
    ex = pe_explorer(d_model=16, positions=(0, 50))
    before = ex.chart.to_dict()
    ex.base.value = 100.0  # observe() calls update()
    after = ex.chart.to_dict()
    assert before != after and "base = 100" in after["title"]
    ex.positions = (200, 260)
    assert ex.chart.data["pos"].min() == 200 and ex.chart.data["pos"].max() == 259
    ex.start.value = 5000  # the tour's window: start 5000, 32 positions, two exact settings
    ex.length.value = 32
    assert ex.window[0] == (5000, 5032) and ex.chart.data["pos"].max() == 5031
    ex.columns.value = (0, 2)
    assert sorted(ex.chart.data["dimension"].unique()) == [0, 1]
    assert ex.update() is ex.chart  # the callback can be called directly


def test_changing_d_model_keeps_the_column_window_valid():
    ex = pe_explorer(d_model=16)
    ex.d_model.value = 128  # a full window stays full
    assert ex.columns.value == (0, 128) and ex.columns.max == 128
    assert ex.chart.data["dimension"].max() == 127
    ex.columns.value = (100, 120)
    ex.d_model.value = 32  # a window past the new width is clipped into it
    assert ex.columns.value[1] <= 32 and ex.columns.value[0] < ex.columns.value[1]
    assert ex.chart.data["dimension"].max() <= 31


def test_a_window_beyond_max_cells_is_shortened_not_an_error():
    from pe_lessons.widgets import MAX_CELLS

    ex = pe_explorer(d_model=512, positions=(0, 100), max_position=100_000)
    ex.positions = (0, 100_000)  # 51.2 M values: more than one window may compute
    (p0, p1), (c0, c1) = ex.window
    assert (p0, c0, c1) == (0, 0, 512) and p1 == MAX_CELLS // 512
    assert "pos 0–16383" in ex.chart.to_dict()["title"]["text"]


def test_an_empty_column_window_is_widened_not_an_error():
    ex = pe_explorer(d_model=8, positions=(40, 42))
    ex.columns.value = (3, 3)
    assert ex.window == ((40, 42), (3, 4)) and len(ex.chart.data) == 2


def test_window_lengths_are_exact_choices_and_the_full_range_is_one_of_them():
    ex = pe_explorer(d_model=16, positions=(0, 32))
    assert {2, 32, 1024, 10000} <= set(ex.length.options) and max(ex.length.options) == 10000
    ex.length.value = 10000  # "widen the positions to 0–10000"
    assert ex.window[0] == (0, 10000) and "min | max" in ex.chart.to_dict()["title"]["subtitle"]
    with pytest.raises(ValueError, match="positions"):
        ex.positions = (10000, 10001)
    with pytest.raises(TypeError, match="positions"):
        ex.positions = 5


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: explorer_chart(7), ValueError),
        (lambda: explorer_chart(8, base=0.5), ValueError),
        (lambda: explorer_chart(8, positions=(5, 5)), ValueError),
        (lambda: explorer_chart(8, positions=5), TypeError),
        (lambda: explorer_chart(8, columns=(0, 9)), ValueError),
        (lambda: explorer_chart(8, positions=(0, 2**22)), ValueError),
        (lambda: pe_explorer(d_model=1024), ValueError),
        (lambda: pe_explorer(base=2.0), ValueError),
        (lambda: pe_explorer(positions=(0, 20000)), ValueError),
    ],
)
def test_bad_input_is_named(call, error):
    with pytest.raises(error):
        call()


def test_output_widget_holds_the_current_chart_without_a_jpeg():
    ex = pe_explorer(d_model=8, positions=(0, 20))
    (out,) = ex.output.outputs
    vegalite = "application/vnd.vegalite.v5+json"
    assert out["output_type"] == "display_data" and "image/jpeg" not in out["data"]
    assert out["data"][vegalite] == ex.chart.to_dict()
    ex.d_model.value = 12
    (out,) = ex.output.outputs
    assert "d_model = 12" in out["data"][vegalite]["title"]
    assert out["data"]["text/plain"].startswith("<chart: PE, d_model = 12")


def test_display_bundle_has_the_view_full_text_and_a_static_png():
    from IPython.core.formatters import DisplayFormatter

    ex = pe_explorer(d_model=16, positions=(0, 32))
    shown = []
    if hasattr(ex, "_ipython_display_"):  # ipywidgets 7: the widget displays itself
        import IPython.display

        original = IPython.display.display
        IPython.display.display = lambda data, raw=False: shown.append(data)
        try:
            ex._ipython_display_()
        finally:
            IPython.display.display = original
        (data,) = shown
    else:
        data, _ = DisplayFormatter().format(ex)
    assert data["text/plain"] == repr(ex)
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.model_id
    assert data["image/png"].startswith("iVBORw0KGgo")  # the chart, for GitHub and the HTML site


def test_the_explorer_works_under_ipywidgets_7():
    """This module again, with ipywidgets 7.7.1 (Colab's version) first on the path."""
    if os.environ.get("PE_LESSONS_IPYWIDGETS") == "7":
        assert widgets.__version__ == "7.7.1"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import freshenv

    try:
        target = freshenv.ipywidgets7_dir()
    except RuntimeError as err:  # no network and no cached copy
        pytest.skip(str(err))
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PE_LESSONS_IPYWIDGETS="7", PYTHONPATH=os.pathsep.join([str(target), str(root)]))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
