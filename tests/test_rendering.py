"""pe_lessons.rendering: a chart is stored as its Vega-Lite spec, a text line and a small palette PNG."""

import base64

import altair as alt

from pe_lessons import plots, sinusoidal_table
from pe_lessons.rendering import enable_renderer, render_chart, static_png


def test_renderer_bundle_has_spec_text_and_a_small_png():
    enable_renderer()
    assert alt.renderers.active == "pe_lessons"
    bundle = alt.renderers.get()(plots.heatmap(sinusoidal_table(4, 4), title="tiny").to_dict())
    assert bundle["text/plain"] == "<chart: tiny>" and "image/jpeg" not in bundle
    png = base64.b64decode(bundle["image/png"])  # JupyterLab adds a PNG only to outputs that have none
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[25] == 3  # colour type 3: a palette image
    assert alt.vegalite.v5.display.VEGALITE_MIME_TYPE in bundle


def test_importing_plots_leaves_the_renderer_alone():
    import importlib

    alt.renderers.enable("default")
    try:
        importlib.reload(plots)
        assert alt.renderers.active == "default"  # the notebook enables it, explicitly
        enable_renderer()
        assert alt.renderers.active == "pe_lessons"
    finally:
        enable_renderer()


def test_a_live_view_gets_no_static_image():
    spec = plots.heatmap(sinusoidal_table(4, 4), title="live").to_dict()
    assert "image/png" not in render_chart(spec, static_image=False)
    png = static_png(spec)
    assert png is not None and base64.b64decode(png)[:8] == b"\x89PNG\r\n\x1a\n"
