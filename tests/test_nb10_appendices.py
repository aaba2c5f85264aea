"""Notebook 10's appendices run after the exercises: a student who answers the exercises the way the solutions
do (rebinding short names such as ``d``, ``L``, ``s``, ``theta``, ``critical``) and then runs the appendices must
get the same printed results (stdout, and the table a cell ends on) and pass the same asserts as the committed
top-to-bottom run. Cost: it re-runs the whole notebook outside nbval (the study's results are read, not retrained;
appendix E's live seed 0 trains 200 steps), a few seconds more than the strict nbval run itself."""

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
    # and the value of that last expression (None if there is none)
    tree = ast.parse(_source(cell))
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    out, value = io.StringIO(), None
    with contextlib.redirect_stdout(out):
        exec(compile(tree, f"<cell {cell.get('id', '?')}>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    return out.getvalue(), value


def _stored_table(cell):
    # the text/plain of a table the cell ended on (a DataFrame: it also has text/html); None for a chart or nothing
    for o in cell.get("outputs", []):
        if o["output_type"] == "execute_result" and "text/html" in o["data"]:
            return "".join(o["data"]["text/plain"])
    return None


def _stored_stdout(cell):
    return "".join(
        "".join(o["text"]) for o in cell.get("outputs", []) if o["output_type"] == "stream" and o["name"] == "stdout"
    )


def _appendices_after(student_cells, before_appendices=lambda namespace: None):
    # the core path and the exercise cells as shipped, then the student's cells, then every appendix cell:
    # each must print what the committed run printed and end on the same table
    cells = _cells(NOTEBOOK)
    first_appendix = next(
        i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _source(c).startswith("## Appendix")
    )
    namespace: dict = {"__name__": "__main__"}
    for cell in cells[:first_appendix]:
        if cell["cell_type"] == "code":
            _run(cell, namespace)
    for cell in student_cells:
        _run(cell, namespace)
    before_appendices(namespace)
    appendix_cells = [c for c in cells[first_appendix:] if c["cell_type"] == "code"]
    assert len(appendix_cells) >= 5
    tables = 0
    for cell in appendix_cells:
        printed, value = _run(cell, namespace)
        if "nbval-ignore-output" not in cell["metadata"].get("tags", []):
            assert printed == _stored_stdout(cell), _source(cell)[:200]
            stored = _stored_table(cell)
            if stored is not None:
                assert repr(value) == stored, _source(cell)[:200]
                tables += 1
    assert tables >= 3  # appendices B, C and E end on a table
    return namespace


@pytest.mark.skipif(not SOLUTIONS.exists(), reason="the solutions notebook is not shipped here")
def test_appendices_run_after_the_solutions_answers(monkeypatch):
    monkeypatch.chdir(NOTEBOOK.parent)

    # the student answers the exercises as the solutions do
    def rebound(namespace):  # the solutions did rebind the short names the appendices also use
        assert namespace["d"] != 128 or namespace["s"] != 4

    _appendices_after([c for c in _cells(SOLUTIONS) if c["cell_type"] == "code"], rebound)


def test_appendices_run_after_exercise_1_answered_with_section_5s_loop(monkeypatch):
    # a student who answers Exercise 1 by reusing section 5's loop with their own configuration rebinds
    # CONFIGS, ratios, rows, c, rho, never … (review 2, point 11: appendix C then read the student's table)
    monkeypatch.chdir(NOTEBOOK.parent)
    student = {
        "cell_type": "code",
        "source": (
            'CONFIGS = {"exercise 1": {"d": 64, "base": 1e4, "L": 2048, "n": 16384, "s": 8.0}}\n'
            "ratios, rows = {}, []\n"
            "for config, c in CONFIGS.items():\n"
            '    theta_c = rope_frequencies(c["d"], c["base"])\n'
            '    never = c["L"] * theta_c / (2 * math.pi) < 1\n'
            "    for rule, theta_new in rule_frequencies(**c).items():\n"
            '        rho = c["n"] * theta_new / (c["L"] * theta_c)\n'
            "        ratios[config, rule] = rho\n"
            'out_of_range_pairs = (never & (ratios["exercise 1", "NTK"] > 1 + 1e-9)).nonzero().flatten().tolist()\n'
            "d, s, theta, critical = 64, 8.0, theta_c, 21\n"
        ),
    }
    namespace = _appendices_after([student])
    assert namespace["out_of_range_pairs"] == list(range(21, 31))
