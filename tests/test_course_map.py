"""The README's course map agrees with every notebook's own header: the same notebooks, the same
minutes ("About N minutes") and the same prerequisite notebooks ("What you need")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ROW = re.compile(r"^\| (\d{2}) \| \[[^\]]+\]\(notebooks/(\d{2}_[^)]+\.ipynb)\) \|(.*)$")


def _numbers(text: str) -> set[str]:
    """Two-digit notebook numbers named in ``text``, ranges such as ``01–03`` expanded."""
    found = set()
    for first, last in re.findall(r"(?<![\w.])(\d{2})(?:\s*[–-]\s*(\d{2}))?(?!\w|\.\d)", text):
        found.update(f"{n:02d}" for n in range(int(first), int(last or first) + 1))
    return found


def readme_rows() -> dict[str, dict]:
    rows = {}
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            cells = [c.strip() for c in match.group(3).strip().strip("|").split("|")]
            rows[match.group(1)] = {"file": match.group(2), "minutes": int(cells[-2]), "needs": _numbers(cells[-1])}
    return rows


def header(path: Path) -> dict:
    """Minutes and prerequisite notebooks from the notebook's "**What you need**" paragraph."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = next(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown" and "What you need" in "".join(c["source"])
    )
    need = re.search(r"\*\*What you need\*\*:(.*?)(?:\n\n|\Z)", text, re.S).group(1)
    minutes = re.search(r"About (\d+) minutes", need)
    assert minutes, f"{path.name}: 'What you need' gives no 'About N minutes'"
    return {"minutes": int(minutes.group(1)), "needs": _numbers(need.replace(minutes.group(0), ""))}


def test_readme_lists_every_notebook_once():
    rows = readme_rows()
    assert sorted(rows) == [p.name[:2] for p in NOTEBOOKS]
    assert all(rows[p.name[:2]]["file"] == p.name for p in NOTEBOOKS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_readme_row_agrees_with_the_notebook_header(path):
    row, head = readme_rows()[path.name[:2]], header(path)
    assert row["minutes"] == head["minutes"], (
        f"{path.name}: README says {row['minutes']} min, the notebook {head['minutes']}"
    )
    assert row["needs"] == head["needs"], (
        f"{path.name}: README needs notebooks {sorted(row['needs'])}, the notebook's header {sorted(head['needs'])}"
    )


def test_the_parser_reads_ranges_and_skips_other_numbers():
    assert _numbers("notebooks 01–03 (the table) and 07; 2×2 matrices, 5e-7, 0.25, float32") == {"01", "02", "03", "07"}
    assert _numbers("Python, a little trigonometry") == set()
