"""How a chart is stored in a notebook: a Vega-Lite spec plus a small static PNG.

The ``"pe_lessons"`` Altair renderer (:func:`enable_renderer`, which each notebook calls
once; ``pe_lessons.plots.enable_renderer`` is the same function) displays each chart as its Vega-Lite spec
(interactive in JupyterLab) *and* a palette PNG drawn by ``vl-convert``
(:func:`static_png`), visible on GitHub, in nbconvert's HTML and wherever JavaScript
does not run. On Colab it uses Altair's HTML renderer instead.
"""

from __future__ import annotations

import base64
import io
import sys

import altair as alt

__all__ = ["STATIC_COLORS", "static_png", "render_chart", "enable_renderer"]

#: Colours of a stored static chart image (a palette PNG: about a fifth of a JPEG's size for these charts).
STATIC_COLORS = 256


def static_png(spec: dict) -> str | None:
    """The chart as a small base64 palette PNG drawn by ``vl-convert`` (``None`` where it or Pillow is missing).

    Stored as ``image/png`` because JupyterLab's Vega renderer adds a (large, full-colour) PNG to
    every chart output that has none, which rewrites a notebook that was only opened and saved.
    """
    try:
        import vl_convert as vlc
        from PIL import Image
    except ImportError:  # the static image is a fallback; the chart itself still shows
        return None
    version = "v" + "_".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    image = Image.open(io.BytesIO(vlc.vegalite_to_png(spec, scale=1.0, vl_version=version))).convert("RGB")
    palette = image.quantize(colors=STATIC_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def render_chart(spec: dict, *, static_image: bool = True, **metadata) -> dict:
    """The display bundle of a Vega-Lite ``spec``: the spec itself, a text line and a static PNG.

    On Colab, Altair's HTML renderer (Vega-Embed) instead. ``static_image=False`` leaves the
    image out (a live view, e.g. inside a widget, needs none).
    """
    if "google.colab" in sys.modules:  # Colab shows HTML with Vega-Embed, not the Vega-Lite mimetype
        return alt.vegalite.v5.display.html_renderer(spec, **metadata)
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    bundle: dict = {
        alt.vegalite.v5.display.VEGALITE_MIME_TYPE: spec,
        "text/plain": f"<chart: {title}>" if title else "<chart>",
    }
    if static_image and (image := static_png(spec)):  # a live view (e.g. inside a widget) needs none
        bundle["image/png"] = image
    return bundle


def enable_renderer() -> None:
    """Make ``"pe_lessons"`` the active Altair renderer (Vega-Lite spec + static image)."""
    if "pe_lessons" not in alt.renderers.names():
        alt.renderers.register("pe_lessons", render_chart)
    alt.renderers.enable("pe_lessons")
