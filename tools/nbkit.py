"""Notebook tooling behind course.py: header sync, student copies, HTML site.

The repository URL lives in one place, ``pyproject.toml`` ([project.urls] Repository);
the Colab badge of every notebook and its setup cell are generated from it (and from
``pe_lessons.__version__``) by :func:`sync_notebook`, and the tests check that the
committed notebooks match what it would generate.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOLUTION_TAG = "solution"
SETUP_TAG = "setup"
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"


def repo_url() -> str:
    """The Repository URL from pyproject.toml, e.g. ``https://github.com/owner/name``."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.M)
    if not match:
        raise RuntimeError("pyproject.toml has no [project.urls] Repository entry")
    return match.group(1).rstrip("/")


def version() -> str:
    text = (ROOT / "pe_lessons" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__\s*=\s*"([^"]+)"', text, flags=re.M).group(1)


def github_path() -> str:
    """``owner/name`` of the GitHub repository."""
    url = repo_url()
    if not url.startswith("https://github.com/"):
        raise RuntimeError(f"Colab badges need a GitHub repository URL, got {url}")
    return url.removeprefix("https://github.com/")


def badge_line(notebook_name: str) -> str:
    target = f"https://colab.research.google.com/github/{github_path()}/blob/main/notebooks/{notebook_name}"
    return f"[![Open In Colab]({BADGE_IMAGE})]({target})"


def pip_spec() -> str:
    """What the Colab setup cell installs: this repository at the tag of this version."""
    return f"pe-lessons @ git+{repo_url()}@v{version()}"


def setup_source() -> str:
    return (
        "# Colab only: install this course's helper package (elsewhere this cell does nothing).\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n"
        "    subprocess.run(\n"
        f'        [sys.executable, "-m", "pip", "install", "--quiet", "{pip_spec()}"],\n'
        "        check=True,\n"
        "    )"
    )


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def sync_notebook(nb: dict, notebook_name: str) -> bool:
    """Make the badge (first line of the first cell) and the setup cell (second cell) current.

    Returns whether anything changed. Raises ``ValueError`` for a notebook whose first two
    cells are not a markdown header and a code cell tagged ``setup``.
    """
    cells = nb["cells"]
    if len(cells) < 2 or cells[0]["cell_type"] != "markdown" or cells[1]["cell_type"] != "code":
        raise ValueError(f"{notebook_name}: expected a markdown header cell, then the setup code cell")
    if SETUP_TAG not in cells[1].get("metadata", {}).get("tags", []):
        raise ValueError(f"{notebook_name}: the second cell must be the setup cell, tagged '{SETUP_TAG}'")
    changed = False
    header = _source(cells[0]).split("\n")
    badge = badge_line(notebook_name)
    if header[0].startswith("[![Open In Colab]"):
        if header[0] != badge:
            header[0], changed = badge, True
    else:
        header = [badge, ""] + header
        changed = True
    if changed:
        cells[0]["source"] = "\n".join(header)
    if _source(cells[1]) != setup_source():
        cells[1]["source"] = setup_source()
        changed = True
    return changed


def strip_solutions(nb: dict) -> dict:
    """A student copy: the same notebook without the cells tagged ``solution``."""
    copy = json.loads(json.dumps(nb))
    copy["cells"] = [c for c in copy["cells"] if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])]
    return copy


def notebook_title(nb: dict) -> str:
    for line in _source(nb["cells"][0]).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return "untitled"


def index_html(entries: list[tuple[str, str]]) -> str:
    """The site's index page: the notebooks in order, linked."""
    items = "\n".join(f'    <li><a href="{html.escape(href)}">{html.escape(title)}</a></li>' for href, title in entries)
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>pe-lessons: positional encoding in Transformers</title>
<style>body {{ font-family: sans-serif; max-width: 48rem; margin: 2rem auto; line-height: 1.5; }}</style>
</head>
<body>
  <h1>pe-lessons: positional encoding in Transformers</h1>
  <p>An open course in Jupyter notebooks, from the sin/cos formula to rotary embeddings and
  fast GPU code. Read the notebooks in order:</p>
  <ol>
{items}
  </ol>
  <p>Source, setup and tests: <a href="{html.escape(repo_url())}">{html.escape(repo_url())}</a></p>
</body>
</html>
"""
