"""The course kit: Colab badges and setup cells, static chart images, solutions kept apart,
the HTML export and the maintainers' CI workflow."""

import contextlib
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import nbkit  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
VEGALITE = "application/vnd.vegalite.v5+json"


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell):
    return "".join(cell["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_badge_and_setup_cell_are_generated_from_pyproject(path):
    nb = load(path)
    assert not nbkit.sync_notebook(nb, path.name), f"run: python3 course.py sync {path.relative_to(ROOT)}"
    assert source(nb["cells"][0]).startswith(f"[![Open In Colab]({nbkit.BADGE_IMAGE})](https://colab.research.google.com/github/")
    assert nbkit.repo_url() in source(nb["cells"][1])


def run_setup_cell(code, monkeypatch, on_colab):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        exec(compile(code, "<setup cell>", "exec"), {})
    return calls, out.getvalue()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_installs_this_version_on_colab_only(path, monkeypatch):
    code = source(load(path)["cells"][1])
    calls, printed = run_setup_cell(code, monkeypatch, on_colab=True)
    assert len(calls) == 1
    cmd, kwargs = calls[0]
    assert cmd[1:4] == ["-m", "pip", "install"] and kwargs.get("check") is True
    assert cmd[-1] == f"pe-lessons @ git+{nbkit.repo_url()}@v{nbkit.version()}"
    calls, printed = run_setup_cell(code, monkeypatch, on_colab=False)
    assert calls == [] and printed == ""


def chart_outputs(path):
    for cell in load(path)["cells"]:
        for out in cell.get("outputs", []):
            if VEGALITE in out.get("data", {}):
                yield out["data"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chart_carries_a_static_image(path):
    for data in chart_outputs(path):
        assert "image/jpeg" in data or "image/png" in data, f"{path.name}: a chart without a static image"
        assert len(data[VEGALITE]["datasets"][next(iter(data[VEGALITE]["datasets"]))]) <= 5000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_solutions_are_tagged_collapsed_and_last(path):
    cells = load(path)["cells"]
    tagged = [i for i, c in enumerate(cells) if nbkit.SOLUTION_TAG in c["metadata"].get("tags", [])]
    assert tagged, f"{path.name} has no solution cells"
    assert tagged == list(range(tagged[0], len(cells))), "solution cells must close the notebook"
    for i in tagged:
        if cells[i]["cell_type"] == "code":
            assert cells[i]["metadata"].get("jupyter", {}).get("source_hidden") is True
            assert ".ok" in source(cells[i]), "a solution cell asserts that its checker accepts it"
    exercises = [c for c in cells[: tagged[0]] if c["cell_type"] == "code" and "check_" in source(c)]
    assert exercises, f"{path.name}: no exercise calls a checker before the solutions"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_drops_exactly_the_solutions(path):
    nb = load(path)
    student = nbkit.strip_solutions(nb)
    kept = [c for c in nb["cells"] if nbkit.SOLUTION_TAG not in c["metadata"].get("tags", [])]
    assert student["cells"] == kept and len(kept) < len(nb["cells"])
    assert all(nbkit.SOLUTION_TAG not in c["metadata"].get("tags", []) for c in student["cells"])


def test_html_export_shows_charts_and_the_index_links_notebooks_in_order():
    nbconvert = pytest.importorskip("nbconvert")
    nbformat = pytest.importorskip("nbformat")
    path = NOTEBOOKS[0]
    body, _ = nbconvert.HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(path, as_version=4))
    charts = len(list(chart_outputs(path)))
    assert charts >= 1 and body.count('src="data:image/jpeg;base64,') >= charts
    index = nbkit.index_html([(p.stem + ".html", nbkit.notebook_title(load(p))) for p in NOTEBOOKS])
    positions = [index.index(p.stem + ".html") for p in NOTEBOOKS]
    assert positions == sorted(positions)


def test_github_workflow_runs_the_same_test_command_as_ci():
    workflows = list((ROOT / ".github" / "workflows").glob("*.yml"))
    assert workflows, "no workflow in .github/workflows"
    flow = yaml.safe_load(workflows[0].read_text())
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert {"push", "pull_request"} <= set(triggers)
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "python3 course.py test" in runs
    assert "python3 course.py test" in (ROOT / ".ci" / "run").read_text()
    setup_python = [s for s in steps if s.get("uses", "").startswith("actions/setup-python")]
    assert setup_python and setup_python[0]["with"].get("cache") == "pip"
    env = {k: v for job in flow["jobs"].values() for k, v in job.get("env", {}).items()} | flow.get("env", {})
    assert "download.pytorch.org/whl/cpu" in env.get("PIP_EXTRA_INDEX_URL", ""), "CI should install a CPU torch"


def test_execute_stores_each_print_whole():
    """`course.py execute` joins a print that arrived in pieces, so stored outputs do not depend on timing."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("course", ROOT / "course.py")
    course = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course)
    outs = [
        {"output_type": "stream", "name": "stdout", "text": "a\n"},
        {"output_type": "stream", "name": "stdout", "text": "b\n"},
        {"output_type": "stream", "name": "stderr", "text": "w\n"},
        {"output_type": "execute_result", "data": {"text/plain": "1"}, "metadata": {}, "execution_count": 1},
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
    ]
    merged = course.merge_streams(outs)
    assert [o.get("text") for o in merged] == ["a\nb\n", "w\n", None, "c\n"]
    for path in NOTEBOOKS:
        for cell in load(path)["cells"]:
            streams = [o.get("name") if o["output_type"] == "stream" else None for o in cell.get("outputs", [])]
            assert not any(a is not None and a == b for a, b in zip(streams, streams[1:])), path.name
