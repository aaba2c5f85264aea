"""A real-browser check: JupyterLab on loopback, a notebook run in headless Chromium.

Asserts what a student would see: after "Run All", an Altair chart is drawn (an SVG or
canvas in the output area) and moving a widget slider redraws the explorer's chart.
Skips, saying why, where Playwright or a Chromium executable is missing (`.ci/run`
installs both on the project's machines).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_CANDIDATES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
# Flags for a closed network: no background connections, no GPU, no sandbox (CI runs as root).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
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


@pytest.fixture
def jupyterlab(tmp_path):
    """JupyterLab serving a temporary copy of the explorer notebook, on 127.0.0.1 only."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed")
    notebook = explorer_notebook()
    shutil.copy(notebook, tmp_path / notebook.name)
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}", "--expose-app-in-browser",
           f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
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
        yield f"{url}/lab/tree/{notebook.name}?token={token}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_notebook_runs_in_a_real_browser_chart_renders_and_slider_reacts(jupyterlab):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install playwright)")
    executable = chromium_executable()
    with sync_api.sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        except Exception as err:  # no system Chromium and no Playwright-managed one
            pytest.skip(f"no Chromium to drive ({type(err).__name__}: {str(err).splitlines()[0]})")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(jupyterlab)
            page.wait_for_function("window.jupyterapp && window.jupyterapp.shell.currentWidget"
                                   " && window.jupyterapp.shell.currentWidget.sessionContext", timeout=60_000)
            # Start from a blank notebook so everything we see comes from this run.
            page.wait_for_function("""() => {
                const ctx = window.jupyterapp.shell.currentWidget.sessionContext;
                return ctx.session && ctx.session.kernel && ctx.session.kernel.status === 'idle';
            }""", timeout=60_000)
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
            assert page.locator(CHART).count() == 0
            page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # Every code cell executed: no "[*]" prompts left and the kernel idle.
            page.wait_for_function("""() => {
                const panel = window.jupyterapp.shell.currentWidget;
                const cells = panel.content.widgets.filter(c => c.model.type === 'code');
                return panel.sessionContext.session.kernel.status === 'idle'
                    && cells.every(c => c.model.executionCount !== null);
            }""", timeout=120_000)
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
            page.wait_for_function("([el, old]) => el.innerText !== old", arg=[readout.element_handle(), before_value],
                                   timeout=30_000)
            page.wait_for_function("([el, old]) => el.innerHTML !== old && el.querySelector('.vega-embed svg, .vega-embed canvas')",
                                   arg=[output.element_handle(), before_chart], timeout=60_000)
            assert readout.inner_text() != before_value
        except Exception:
            shot = Path(os.environ.get("PE_LESSONS_BROWSER_SCREENSHOT", ROOT / "build" / "browser-failure.png"))
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
            raise
        finally:
            browser.close()
