"""Real-browser checks in headless Chromium, all on loopback.

- JupyterLab: after "Run All", an Altair chart is drawn (an SVG or canvas in the output area)
  and moving a widget slider redraws the explorer's chart.
- JupyterLab: opening a notebook with charts and saving it, running nothing, leaves its outputs
  unchanged (JupyterLab's Vega renderer adds a PNG to any chart output without one).
- The static site (python3 course.py html): search reaches a notebook, previous/next links, math
  rendered by the MathJax copy served with it, charts with alt text, no other host asked.

Skips, saying why, where Playwright or a Chromium executable is missing (`.ci/run`
installs both on the project's machines).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbkit  # noqa: E402

VEGALITE = "application/vnd.vegalite.v5+json"
MAX_BYTES = 1_500_000
CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
# Flags for a closed network: no background connections, no GPU, no sandbox (CI runs as root).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
CHART = ".jp-OutputArea-output .vega-embed svg, .jp-OutputArea-output .vega-embed canvas"


def explorer_notebook() -> Path:
    if os.environ.get("PE_LESSONS_BROWSER_NOTEBOOK"):  # another notebook with a chart and a slider
        return Path(os.environ["PE_LESSONS_BROWSER_NOTEBOOK"]).resolve()
    found = sorted((ROOT / "notebooks").glob("04_*.ipynb"))
    if not found:
        pytest.skip("notebook 04 (the interactive explorer) is not in this checkout")
    return found[0]


def chromium_executable() -> str | None:
    explicit = os.environ.get("PE_LESSONS_CHROMIUM")
    if explicit:
        return explicit
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None  # Playwright may still have a browser of its own (playwright install chromium)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def lab_server(tmp_path: Path, notebook: Path, settings: dict | None = None):
    """JupyterLab serving a temporary copy of ``notebook`` on 127.0.0.1 only; yields (url, copy)."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
    root = tmp_path / "lab"
    root.mkdir()
    copy = root / notebook.name
    shutil.copy(notebook, copy)
    for plugin, values in (settings or {}).items():  # user settings, e.g. no windowing
        target = tmp_path / "settings" / f"{plugin.replace(':', '/')}.jupyterlab-settings"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--expose-app-in-browser",
        f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
        f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-2000:])
                time.sleep(0.5)
        yield f"{url}/lab/tree/{notebook.name}?token={token}", copy
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab serving a temporary copy of the explorer notebook, on 127.0.0.1 only."""
    with lab_server(tmp_path, explorer_notebook()) as (url, _):
        yield url


@contextlib.contextmanager
def chromium_page(failure_name: str):
    """A headless Chromium page (skips where there is none); a screenshot is kept when the body fails."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    with sync_api.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS, headless=True)
        except Exception as err:  # no system Chromium and no Playwright-managed one
            pytest.skip(f"no Chromium to drive ({type(err).__name__}: {str(err).splitlines()[0]})")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            yield page
        except Exception:
            shot = Path(os.environ.get("PE_LESSONS_BROWSER_SCREENSHOT", ROOT / "build" / failure_name))
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            raise
        finally:
            browser.close()


def test_notebook_runs_in_a_real_browser_chart_renders_and_slider_reacts(jupyterlab):
    with chromium_page("browser-failure.png") as page:
        page.goto(jupyterlab)
        page.wait_for_function(
            "window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.sessionContext",
            timeout=60_000,
        )
        # Start from a blank notebook so everything we see comes from this run.
        page.wait_for_function(
            """() => {
            const ctx = window.jupyterapp.shell.currentWidget.sessionContext;
            return ctx.session && ctx.session.kernel && ctx.session.kernel.status === 'idle';
        }""",
            timeout=60_000,
        )
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
        assert page.locator(CHART).count() == 0
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        # Every code cell executed: no "[*]" prompts left and the kernel idle.
        page.wait_for_function(
            """() => {
            const panel = window.jupyterapp.shell.currentWidget;
            const cells = panel.content.widgets.filter(c => c.model.type === 'code');
            return panel.sessionContext.session.kernel.status === 'idle'
                && cells.every(c => c.model.executionCount !== null);
        }""",
            timeout=120_000,
        )
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count()
        assert page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").count() == 0
        assert errors == 0, "a cell wrote to stderr in the browser run"

        page.locator(CHART).first.wait_for(state="visible", timeout=60_000)
        assert page.locator(CHART).count() >= 1

        slider = page.locator(".widget-slider .noUi-handle").first
        slider.wait_for(state="visible", timeout=60_000)
        slider.scroll_into_view_if_needed()
        widget_area = page.locator(".jp-OutputArea-output:has(.widget-slider)").first
        readout = widget_area.locator(".widget-readout").first
        before_value = readout.inner_text()
        output = widget_area.locator(".widget-output").first
        output.locator(".vega-embed").first.wait_for(state="visible", timeout=60_000)
        before_chart = output.inner_html()
        slider.focus()
        slider.press("ArrowRight")
        page.wait_for_function(
            "([el, old]) => el.innerText !== old", arg=[readout.element_handle(), before_value], timeout=30_000
        )
        page.wait_for_function(
            "([el, old]) => el.innerHTML !== old && el.querySelector('.vega-embed svg, .vega-embed canvas')",
            arg=[output.element_handle(), before_chart],
            timeout=60_000,
        )
        assert readout.inner_text() != before_value


# --- opening and saving in JupyterLab ------------------------------------------------------------

CHART_CELLS = [
    "from pe_lessons import plots, sinusoidal_table\n\nplots.enable_renderer()",
    "plots.heatmap(sinusoidal_table(40, 16), title='PE, 40 positions')",
    "plots.wavelength_chart(64)",
]


def executed_chart_notebook(tmp_path: Path) -> Path:
    """A small notebook with two charts, executed with the course's renderer (as `course.py execute` does)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Charts")] + [nbformat.v4.new_code_cell(c) for c in CHART_CELLS]
    path = tmp_path / "src" / "charts.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    nbkit.execute(path, timeout=120)
    return path


def outputs_of(path: Path) -> list:
    import nbformat

    nb = nbformat.read(path, as_version=4)  # joins multi-line strings, so the comparison ignores line splitting
    return [cell.get("outputs", []) for cell in nb.cells]


CHART_NOTEBOOKS = [pytest.param("synthetic", id="synthetic")] + [
    pytest.param(p, id=p.name) for p in nbkit.course_notebooks() if p.name.startswith("04_")
]


@pytest.mark.parametrize("which", CHART_NOTEBOOKS)
def test_open_and_save_in_jupyterlab_leaves_chart_outputs_unchanged(which, tmp_path):
    notebook = executed_chart_notebook(tmp_path) if which == "synthetic" else which
    charts = sum(VEGALITE in out.get("data", {}) for outs in outputs_of(notebook) for out in outs)
    assert charts >= 2
    before, size = outputs_of(notebook), notebook.stat().st_size
    # every cell rendered at once (no windowing), so every chart is drawn before the save
    settings = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}
    with lab_server(tmp_path, notebook, settings) as (url, copy), chromium_page("browser-save-failure.png") as page:
        page.goto(url)
        page.wait_for_function(
            "window.jupyterapp && window.jupyterapp.shell.currentWidget"
            " && window.jupyterapp.shell.currentWidget.context"
            " && window.jupyterapp.shell.currentWidget.context.isReady",
            timeout=60_000,
        )
        page.wait_for_function(
            f"document.querySelectorAll('.jp-OutputArea-output .vega-embed').length >= {charts}", timeout=60_000
        )
        page.wait_for_timeout(3000)  # the Vega renderer adds its PNG after drawing, asynchronously
        dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        deadline = time.monotonic() + 30
        while copy.stat().st_mtime_ns == notebook.stat().st_mtime_ns and time.monotonic() < deadline:
            time.sleep(0.2)
    assert not dirty, "opening the notebook marked it modified"
    after = outputs_of(copy)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [], f"saving changed the outputs of cells {changed}"
    assert copy.stat().st_size <= max(MAX_BYTES, size), f"saved size {copy.stat().st_size} bytes"


# --- the static site -----------------------------------------------------------------------------


@contextlib.contextmanager
def static_server(folder: Path):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


RAW_MATH = re.compile(r"\\\(|\$[^$\n]+\$")
MATHJAX_DONE = (
    "() => window.MathJax && MathJax.Hub && MathJax.Hub.queue"
    " && MathJax.Hub.queue.pending === 0 && !MathJax.Hub.queue.running"
)


def test_site_search_navigation_math_and_charts_work_offline(tmp_path):
    """The student site as a reader uses it, with every host but this machine blocked: the home page,
    a search for "YaRN" that leads to notebook 10, previous/next, typeset math and a chart."""
    course = nbkit.course_notebooks()
    target = next((p for p in course if "YaRN" in p.read_text(encoding="utf-8")), None)
    if target is None or course.index(target) == 0:
        pytest.skip("no notebook after the first mentions YaRN in this checkout")
    site = tmp_path / "site"
    nbkit.build_site(site, course, log=lambda m: None)
    title = nbkit.notebook_title(json.loads(target.read_text()))
    before = course[course.index(target) - 1]
    with static_server(site) as base, chromium_page("browser-site-failure.png") as page:
        elsewhere = []

        def only_loopback(route):
            if urllib.parse.urlparse(route.request.url).hostname in ("127.0.0.1", None):
                route.continue_()
            else:
                elsewhere.append(route.request.url)
                route.abort()

        page.route("**/*", only_loopback)
        page.goto(f"{base}/index.html")
        assert page.title().endswith(nbkit.SITE_TITLE)
        sidebar = page.locator("nav.bd-docs-nav a.reference.internal")
        assert sidebar.count() >= len(course)
        # search: the sidebar's search field, a query, the results page, the notebook
        page.locator(".bd-sidebar-primary .search-button-field").first.click()
        box = page.locator("input[name='q']:visible").first
        box.fill("YaRN")
        box.press("Enter")
        page.wait_for_url("**/search.html?q=YaRN*")
        hit = page.locator(f"#search-results a[href*='{target.stem}.html']").first
        hit.wait_for(timeout=60_000)
        hit.click()
        page.wait_for_load_state("load")
        assert page.title().startswith(title)
        for _ in range(2):  # the notebook, then again after previous -> next
            # math: typeset by the MathJax copy served with the site, nothing left raw, no error
            page.wait_for_function(MATHJAX_DONE, timeout=60_000)
            assert page.locator(".MathJax, .MathJax_Display").count() > 0
            assert page.locator(".MathJax_Error, .merror").count() == 0
            raw = [t for t in page.locator("article .math").all_inner_texts() if RAW_MATH.search(t)]
            assert raw == [], f"math left as text: {raw[:3]}"
            # charts: stored as images that load, each with alt text
            charts = page.locator("article .cell_output img")
            assert charts.count() > 0
            assert all(charts.nth(k).evaluate("img => img.naturalWidth > 0") for k in range(charts.count()))
            assert all((charts.nth(k).get_attribute("alt") or "").startswith("Chart: ") for k in range(charts.count()))
            page.locator("a.left-prev").click()
            page.wait_for_load_state("load")
            assert page.title().startswith(nbkit.notebook_title(json.loads(before.read_text())))
            page.locator("a.right-next").click()
            page.wait_for_load_state("load")
            assert page.title().startswith(title)
        colab = page.locator("a[href^='https://colab.research.google.com/github/']")
        assert colab.count() == 1 and colab.get_attribute("href").endswith(f"/notebooks/{target.name}")
    assert elsewhere == [], f"the site asked other hosts: {elsewhere[:5]}"
