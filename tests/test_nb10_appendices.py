"""Notebook 10's appendices run after the exercises: a student who answers the exercises the way the solutions
do (rebinding short names such as ``d``, ``L``, ``s``, ``theta``, ``critical``) and then runs the appendices must
get the same printed results and pass the same asserts as the committed top-to-bottom run."""

import ast
import contextlib
import io
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "10_rope_context_extension.ipynb"
SOLUTIONS = ROOT / "notebooks" / "solutions" / "10_rope_context_extension_solutions.ipynb"


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell):
    return "".join(cell["source"])


def _run(cell, namespace):
    # a code cell as the kernel runs it (a last bare expression is evaluated, as for display); returns its stdout
    tree = ast.parse(_source(cell))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, f"<cell {cell.get('id', '?')}>", "exec"), namespace)
        if last is not None:
            eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    return out.getvalue()


def _stored_stdout(cell):
    return "".join(
        "".join(o["text"]) for o in cell.get("outputs", []) if o["output_type"] == "stream" and o["name"] == "stdout"
    )


@pytest.mark.skipif(not SOLUTIONS.exists(), reason="the solutions notebook is not shipped here")
def test_appendices_run_after_the_solutions_answers(monkeypatch):
    monkeypatch.chdir(NOTEBOOK.parent)
    cells = _cells(NOTEBOOK)
    first_appendix = next(
        i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _source(c).startswith("## Appendix")
    )
    namespace: dict = {"__name__": "__main__"}
    for cell in cells[:first_appendix]:  # the core path and the exercise cells as shipped
        if cell["cell_type"] == "code":
            _run(cell, namespace)
    for cell in _cells(SOLUTIONS):  # then the student answers the exercises as the solutions do
        if cell["cell_type"] == "code":
            _run(cell, namespace)
    assert namespace["d"] != 128 or namespace["s"] != 4  # the solutions did rebind the short names
    appendix_cells = [c for c in cells[first_appendix:] if c["cell_type"] == "code"]
    assert len(appendix_cells) >= 5
    for cell in appendix_cells:
        printed = _run(cell, namespace)
        if "nbval-ignore-output" not in cell["metadata"].get("tags", []):
            assert printed == _stored_stdout(cell), _source(cell)[:200]
