"""An interactive explorer of the sinusoidal table, built on ipywidgets.

:class:`Explorer` is a ``VBox`` of sliders — ``d_model``, ``base`` (a
log slider), the first position and the number of positions shown, and a range of
columns ``[from, to)`` — above an ``Output`` that holds a heatmap of
``PE[pos, dimension]`` for that window (:func:`explorer_chart`). Moving a
slider calls :meth:`Explorer.update`, which rebuilds the chart, keeps it in
``explorer.chart`` and puts it in the ``Output`` widget's state — no browser
or kernel needed, so tests can call it directly and read ``explorer.output.outputs``.

Widgets need a live kernel; where they cannot render (GitHub, a static HTML
export) the explorer's output shows its chart as a static image instead. It works
with ipywidgets 7.7 (what Colab ships) and 8.
"""

from __future__ import annotations

import sys

import altair as alt
import ipywidgets as widgets
import torch

from ._checks import check_base, check_d_model, check_int
from .plots import heatmap
from .rendering import render_chart, static_png
from .sinusoidal import position_angles

__all__ = ["MAX_POSITION", "MAX_CELLS", "explorer_chart", "Explorer", "pe_explorer"]

#: Default end of the position slider: windows stay cheap to compute on a laptop.
MAX_POSITION = 10_000
#: Most values one window may compute (64 MiB of float64) before it is reduced for the chart.
MAX_CELLS = 2**23
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
IPYWIDGETS_MAJOR = int(widgets.__version__.split(".")[0])


def _check_range(name: str, value: object, stop: int | None = None) -> tuple[int, int]:
    """A half-open window ``(start, stop)`` of non-negative integers, ``start < stop (<= stop limit)``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (start, stop), got {value!r}")
    start, end = (check_int(f"{name}[{k}]", v, minimum=0) for k, v in enumerate(value))
    if not start < end or (stop is not None and end > stop):
        limit = "" if stop is None else f" <= {stop}"
        raise ValueError(f"{name} must satisfy 0 <= start < stop{limit}, got ({start}, {end})")
    return start, end


def _fmt_base(base: float) -> str:
    return f"{base:,.0f}" if base >= 100 else f"{base:.4g}"


def explorer_chart(
    d_model: int = 64,
    base: float = 10000.0,
    positions: tuple[int, int] = (0, 100),
    columns: tuple[int, int] | None = None,
    *,
    width: int = 420,
    height: int = 260,
    max_rows: int | None = None,
) -> alt.Chart:
    """Heatmap of ``PE[pos, dimension]`` for ``pos ∈ [positions)`` and ``dimension ∈ [columns)``.

    ``columns`` defaults to every column. Only the window is computed, in
    float64 (``sin``/``cos`` of ``pos·ω_i``, the angle reduced modulo 2π exactly for large
    positions, so a window past 2**53 shows its own rows), and a large window is reduced
    honestly by :func:`pe_lessons.plots.heatmap` (each band's min and max, never subsampling).
    """
    d_model = check_d_model(d_model)
    base = check_base(base)
    p0, p1 = _check_range("positions", positions)
    c0, c1 = _check_range("columns", (0, d_model) if columns is None else columns, d_model)
    if (p1 - p0) * (c1 - c0) > MAX_CELLS:
        cells = (p1 - p0) * (c1 - c0)
        raise ValueError(f"the window holds {cells} values, more than {MAX_CELLS}; narrow positions or columns")
    if p1 > 2**63 - 1:
        raise ValueError(f"positions must end at most at 2**63 - 1 (int64 positions), got stop = {p1}")
    cols = torch.arange(c0, c1)
    # pos·ω_i, reduced modulo 2π exactly for large positions (float(pos)·ω_i is off by |pos|·2⁻⁵² rad)
    angles = position_angles(torch.arange(p0, p1, dtype=torch.int64), d_model, base)[:, cols // 2]
    table = torch.where(cols % 2 == 0, torch.sin(angles), torch.cos(angles))
    title = f"PE, d_model = {d_model}, base = {_fmt_base(base)}: pos {p0}–{p1 - 1}, dimension {c0}–{c1 - 1}"
    return heatmap(table, title=title, width=width, height=height, max_rows=max_rows, start_pos=p0, start_dim=c0)


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _lengths(max_position: int, *extra: int) -> list[int]:
    """Window lengths the length slider offers: powers of two, ``max_position`` and any ``extra``."""
    lengths = {2**k for k in range(1, max_position.bit_length()) if 2**k < max_position}
    return sorted(lengths | {max_position, *extra})


class Explorer(widgets.VBox):
    """Sliders for ``d_model``, ``base``, the first position, the window length and the columns above a live heatmap.

    The positions drawn are ``[start, start + length)``: ``start`` is a slider over
    ``0 … max_position − 1`` whose number can be typed into, ``length`` picks from powers of
    two (and ``max_position``), so a window like 5000–5031 is two exact settings, not two
    handles one pixel apart. ``explorer.positions`` reads and sets that window as a pair.
    ``explorer.chart`` is the chart for the current values; change a slider (or set
    ``explorer.d_model.value``) and :meth:`update` runs. Works with ipywidgets 7.7 (Colab) and 8.
    """

    def __init__(
        self,
        d_model: int = 64,
        base: float = 10000.0,
        positions: tuple[int, int] = (0, 100),
        columns: tuple[int, int] | None = None,
        *,
        max_position: int = MAX_POSITION,
        max_d_model: int = 512,
        width: int = 420,
        height: int = 260,
    ) -> None:
        d_model = check_d_model(d_model)
        base = check_base(base)
        max_position = check_int("max_position", max_position, minimum=2)
        max_d_model = check_d_model(max_d_model, "max_d_model")
        if d_model > max_d_model:
            raise ValueError(f"d_model must be <= max_d_model = {max_d_model}, got {d_model}")
        if not 10.0 <= base <= 1e7:
            raise ValueError(f"base must lie in the slider's range 10 … 1e7, got {base:g}")
        p0, p1 = _check_range("positions", positions, max_position)
        c0, c1 = _check_range("columns", (0, d_model) if columns is None else columns, d_model)
        self._size = (width, height)
        self._busy = False
        style = {"description_width": "initial"}
        layout = widgets.Layout(width="48%")
        self.d_model = widgets.IntSlider(
            value=d_model,
            min=2,
            max=max_d_model,
            step=2,
            description="d_model",
            continuous_update=False,
            style=style,
            layout=layout,
        )
        self.base = widgets.FloatLogSlider(
            value=base,
            base=10,
            min=1,
            max=7,
            step=0.25,
            description="base",
            continuous_update=False,
            style=style,
            layout=layout,
            readout_format=",.0f",
        )
        self.start = widgets.IntSlider(
            value=p0,
            min=0,
            max=max_position - 1,
            description="first pos",
            continuous_update=False,
            style=style,
            layout=layout,
        )
        self.length = widgets.SelectionSlider(
            options=_lengths(max_position, p1 - p0),
            value=p1 - p0,
            description="positions shown",
            continuous_update=False,
            style=style,
            layout=layout,
        )
        self.columns = widgets.IntRangeSlider(
            value=(c0, c1),
            min=0,
            max=d_model,
            description="dimension [from, to)",
            continuous_update=False,
            style=style,
            layout=layout,
        )
        hint = "Tip: click a slider's number to type a value, e.g. first pos = 5000."
        self.output = widgets.Output()
        #: The window drawn now: ((first pos, stop), (first column, stop)), half-open.
        self.window = ((p0, p1), (c0, c1))
        self.chart: alt.Chart = explorer_chart(d_model, base, (p0, p1), (c0, c1), width=width, height=height)
        super().__init__(
            [
                widgets.HBox([self.d_model, self.base]),
                widgets.HBox([self.start, self.length]),
                widgets.HBox([self.columns, widgets.Label(hint)]),
                self.output,
            ]
        )
        self.d_model.observe(self._on_d_model, names="value")
        for slider in (self.base, self.start, self.length, self.columns):
            slider.observe(self.update, names="value")
        self._draw()

    @property
    def positions(self) -> tuple[int, int]:
        """The window of positions, ``(start, stop)`` half-open; setting it moves both sliders (one redraw)."""
        return self.start.value, self.start.value + self.length.value

    @positions.setter
    def positions(self, value: tuple[int, int]) -> None:
        p0, p1 = _check_range("positions", value)
        if p0 > self.start.max:
            raise ValueError(f"positions must start at most at {self.start.max}, got {p0}")
        self._busy = True
        try:
            if p1 - p0 not in self.length.options:
                self.length.options = sorted({*self.length.options, p1 - p0})
            self.start.value, self.length.value = p0, p1 - p0
        finally:
            self._busy = False
        self.update()

    def __repr__(self) -> str:  # the text a viewer without widgets shows; stable (no model ids), under 110 characters
        (p0, p1), (c0, c1) = self.window
        return (
            f"PE explorer: d_model={self.d_model.value}, base={_fmt_base(self.base.value)}, pos {p0}–{p1 - 1}, "
            f"dimension {c0}–{c1 - 1} (needs a live kernel)"
        )

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """The widget view, its full text and the chart as a static image (for GitHub and HTML exports)."""
        parent = getattr(super(), "_repr_mimebundle_", None)
        data = parent(**kwargs) if parent is not None else {}  # ipywidgets 8 registers the view here
        data = dict(data or {})
        data["text/plain"] = repr(self)  # never cut mid-word
        if "google.colab" not in sys.modules and (image := static_png(self.chart.to_dict())):
            data["image/png"] = image
        return data

    if IPYWIDGETS_MAJOR < 8:

        def _ipython_display_(self, **kwargs) -> None:  # ipywidgets 7 displays widgets through this hook
            from IPython.display import display

            data = self._repr_mimebundle_()
            data[WIDGET_VIEW] = {"version_major": 2, "version_minor": 0, "model_id": self.model_id}
            display(data, raw=True)
            self._handle_displayed(**kwargs)

    def _on_d_model(self, change: dict) -> None:
        """A new width: keep the column window inside it (a full window stays full), then redraw once."""
        old, new = change["old"], change["new"]
        self._busy = True
        try:
            c0, c1 = self.columns.value
            c1 = new if c1 == old else min(c1, new)
            c0 = min(c0, c1 - 1)
            if new > self.columns.max:
                self.columns.max = new
                self.columns.value = (c0, c1)
            else:
                self.columns.value = (c0, c1)
                self.columns.max = new
        finally:
            self._busy = False
        self.update()

    def update(self, change: dict | None = None) -> alt.Chart:
        """Rebuild the chart from the sliders (and redraw it in a kernel); returns it.

        An empty column window is widened to one column; one of more than :data:`MAX_CELLS`
        values (possible with a large ``max_position``) is shortened to the positions that fit.
        """
        if self._busy:
            return self.chart
        (p0, p1), (c0, c1) = self.positions, self.columns.value
        c1 = max(c1, c0 + 1)  # a range slider can be dragged to an empty window
        if c1 > self.d_model.value:
            c0, c1 = max(0, self.d_model.value - 1), self.d_model.value
        p1 = min(p1, p0 + MAX_CELLS // (c1 - c0))  # a wide max_position × d_model window: draw what fits
        width, height = self._size
        self.window = ((p0, p1), (c0, c1))
        self.chart = explorer_chart(self.d_model.value, self.base.value, (p0, p1), (c0, c1), width=width, height=height)
        self._draw()
        return self.chart

    def _draw(self) -> None:
        """Put the chart in the Output widget.

        The chart goes straight into the widget's ``outputs`` state (Vega-Lite spec and
        text, no static image: a live view needs none, and redraws stay fast): no
        display messages are captured, so this works the same in a kernel, under
        nbclient and in tests. Colab renders charts as HTML captured from ``display``.
        """
        if "google.colab" in sys.modules and _in_kernel():  # pragma: no cover - Colab only
            from IPython.display import display

            with self.output:
                self.output.clear_output(wait=True)
                display(self.chart)
            return
        data = render_chart(self.chart.to_dict(), static_image=False)  # the course's bundle, whatever renderer is on
        self.output.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)


def pe_explorer(
    d_model: int = 64,
    base: float = 10000.0,
    positions: tuple[int, int] = (0, 100),
    columns: tuple[int, int] | None = None,
    **options,
) -> Explorer:
    """The explorer widget (display it as a cell's last expression). See :class:`Explorer`."""
    return Explorer(d_model, base, positions, columns, **options)
