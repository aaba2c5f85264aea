"""Notebook tooling behind course.py: header sync, execution, student copies, the HTML site.

The repository URL and the git ref live in one place, ``pyproject.toml`` ([project.urls]
Repository and [tool.pe-lessons] colab-ref); the Colab badge of every notebook and its setup
cell are generated from them by :func:`sync_notebook`, so the badge opens the notebook at the
same ref the setup cell installs the package from. The tests check that the committed notebooks
match what it would generate.

Layout: course notebooks ``notebooks/NN_name.ipynb``; their solutions in companion notebooks
``notebooks/solutions/NN_name_solutions.ipynb``. A course notebook's one cell tagged
``solutions-link`` points to its companion; student copies and the student site drop it.

Where nbformat, nbclient and nbconvert already do a job (read/write, execute, coalesce streams,
drop tagged cells, export HTML) this module uses them and only adds the course's conventions.
"""

from __future__ import annotations

import base64
import io
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SOLUTIONS = NOTEBOOKS / "solutions"
SETUP_TAG = "setup"
SOLUTION_TAG = "solution"  # an answer cell: never in a course notebook, dropped from copies should one appear
LINK_TAG = "solutions-link"  # the course notebook's pointer to its solutions notebook
STUDENT_DROP_TAGS = frozenset({SOLUTION_TAG, LINK_TAG})
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
SITE_TITLE = "pe-lessons: positional encoding in Transformers"
# MathJax 2 as shipped by the jupyter-server-mathjax package: copied next to the pages so math
# renders with no network; this configuration and output ship in that package.
MATHJAX_URL = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"


# --- which notebooks ---------------------------------------------------------------------------


def course_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def solution_notebooks() -> list[Path]:
    return sorted(SOLUTIONS.glob("[0-9][0-9]_*_solutions.ipynb"))


def all_notebooks() -> list[Path]:
    return course_notebooks() + solution_notebooks()


def solutions_for(course: Path) -> Path:
    """``notebooks/NN_name.ipynb`` -> ``notebooks/solutions/NN_name_solutions.ipynb``."""
    return course.parent / "solutions" / f"{course.stem}_solutions.ipynb"


def relpath(path: Path) -> str:
    """A notebook's path inside ``notebooks/``, with ``/`` separators (e.g. ``solutions/01_x_solutions.ipynb``)."""
    return path.resolve().relative_to(NOTEBOOKS.resolve()).as_posix()


# --- badge and setup cell ----------------------------------------------------------------------


def _pyproject() -> str:
    return (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def repo_url() -> str:
    """The Repository URL from pyproject.toml, e.g. ``https://github.com/owner/name``."""
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', _pyproject(), flags=re.M)
    if not match:
        raise RuntimeError("pyproject.toml has no [project.urls] Repository entry")
    return match.group(1).rstrip("/")


def colab_ref() -> str:
    """The git ref (branch or tag) badges open and setup cells install: [tool.pe-lessons] colab-ref."""
    match = re.search(r'^colab-ref\s*=\s*"([^"]+)"', _pyproject(), flags=re.M)
    if not match:
        raise RuntimeError('pyproject.toml has no [tool.pe-lessons] colab-ref = "..." entry')
    return match.group(1)


def version() -> str:
    """The package's version (written once, in pyproject.toml), from the installed metadata."""
    from importlib import metadata

    return metadata.version("pe-lessons")


def github_path() -> str:
    """``owner/name`` of the GitHub repository."""
    url = repo_url()
    if not url.startswith("https://github.com/"):
        raise RuntimeError(f"Colab badges need a GitHub repository URL, got {url}")
    return url.removeprefix("https://github.com/")


def badge_line(notebook: str) -> str:
    """The Colab badge for ``notebook`` (its path inside ``notebooks/``), opening ``colab_ref()``."""
    target = f"https://colab.research.google.com/github/{github_path()}/blob/{colab_ref()}/notebooks/{notebook}"
    return f"[![Open In Colab]({BADGE_IMAGE})]({target})"


def install_source() -> str:
    """What the Colab setup cell installs from: this repository at the ref the badge opens."""
    return f"git+{repo_url()}@{colab_ref()}"


SETUP_TITLE = "Setup (Colab only): install the course's helper package; elsewhere this cell does nothing"
# How the setup cell is shown: collapsed in JupyterLab (source_hidden) and as a one-line form on Colab
# (a "# @title" first line, which Colab reads with or without the space and ruff formats with one, and
# the cell in form view), so the first thing a student reads is the lesson.
SETUP_METADATA = {"jupyter": {"source_hidden": True}, "cellView": "form"}

SETUP_TEMPLATE = """\
# @title {title}
import sys

if "google.colab" in sys.modules:
    import importlib
    import importlib.metadata as metadata
    import json
    import subprocess
    import tempfile

    source = "{source}"  # the same ref as this notebook's Colab badge
    # Keep Colab's own torch and ipywidgets (7.x: Colab does not support ipywidgets 8): pip adds only what is missing.
    keep = {{}}
    for name in ("torch", "ipywidgets"):
        try:
            keep[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
        pins.write("".join(f"{{name}}=={{v}}\\n" for name, v in keep.items()))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "-c", pins.name, f"pe-lessons @ {{source}}"],
        check=True,
    )
    importlib.invalidate_caches()
    assert all(metadata.version(name) == v for name, v in keep.items()), "pip replaced Colab's torch or ipywidgets"
    dist = metadata.distribution("pe-lessons")
    commit = json.loads(dist.read_text("direct_url.json") or "{{}}").get("vcs_info", {{}}).get("commit_id", "?")
    kept = ", ".join(f"{{name}} {{v}}" for name, v in keep.items()) or "nothing"
    print(f"installed pe-lessons {{dist.version}} from {{source}} (commit {{commit[:12]}}); kept Colab's {{kept}}")"""


def setup_source() -> str:
    return SETUP_TEMPLATE.format(source=install_source(), title=SETUP_TITLE)


def _source(cell) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def sync_notebook(nb: dict, notebook: str) -> bool:
    """Make the badge (first line of the first cell) and the setup cell (second cell) current.

    The setup cell is also made to stay out of the way: collapsed in JupyterLab, a one-line form on Colab
    (``SETUP_METADATA``).

    ``notebook`` is the path inside ``notebooks/`` (``01_x.ipynb`` or ``solutions/01_x_solutions.ipynb``).
    Returns whether anything changed. Raises ``ValueError`` for a notebook whose first two
    cells are not a markdown header and a code cell tagged ``setup``.
    """
    cells = nb["cells"]
    if len(cells) < 2 or cells[0]["cell_type"] != "markdown" or cells[1]["cell_type"] != "code":
        raise ValueError(f"{notebook}: expected a markdown header cell, then the setup code cell")
    if SETUP_TAG not in _tags(cells[1]):
        raise ValueError(f"{notebook}: the second cell must be the setup cell, tagged '{SETUP_TAG}'")
    changed = False
    header = _source(cells[0]).split("\n")
    badge = badge_line(notebook)
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
    meta = cells[1].setdefault("metadata", {})
    for key, value in SETUP_METADATA.items():
        want = {**meta.get(key, {}), **value} if isinstance(value, dict) else value
        if meta.get(key) != want:
            meta[key], changed = want, True
    return changed


# --- execution ---------------------------------------------------------------------------------


def prepare_for_execution(nb) -> None:
    """Metadata only tools care about goes; the kernelspec stays explicit (Lab and Colab do not ask)."""
    import nbformat
    from nbconvert.preprocessors import ClearMetadataPreprocessor

    ClearMetadataPreprocessor(  # drops e.g. execution timestamps and authoring tools' keys
        preserve_cell_metadata_mask={"tags", "jupyter", "collapsed", "editable", "deletable", "cellView"},
        preserve_nb_metadata_mask={"language_info", "kernelspec"},
    ).preprocess(nb, {})
    nb.metadata = nbformat.from_dict(nb.metadata)  # the preprocessor leaves plain dicts
    for cell in nb.cells:
        cell.metadata = nbformat.from_dict(cell.metadata)
    nb.metadata["kernelspec"] = nbformat.from_dict(KERNELSPEC)


def execute(path: Path, timeout: int) -> float:
    """Execute ``path`` in place in a fresh kernel (cwd: its folder); returns the seconds it took.

    Each print is stored as one stream output (nbconvert's CoalesceStreamsPreprocessor), since
    a kernel may deliver it in pieces and nbval compares the stored output with a fresh run.
    """
    import time

    import nbformat
    from nbclient import NotebookClient
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    nb = nbformat.read(path, as_version=4)
    prepare_for_execution(nb)
    start = time.perf_counter()
    NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNELSPEC["name"],
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    seconds = time.perf_counter() - start
    CoalesceStreamsPreprocessor().preprocess(nb, {})
    nbformat.write(nb, path)
    return seconds


# --- student copies ----------------------------------------------------------------------------


def student_copy(nb):
    """The notebook without the cells tagged ``solutions-link`` or ``solution`` (nbconvert's TagRemovePreprocessor)."""
    import copy

    from nbconvert.preprocessors import TagRemovePreprocessor

    nb = copy.deepcopy(nb)
    TagRemovePreprocessor(remove_cell_tags=set(STUDENT_DROP_TAGS), enabled=True).preprocess(nb, {})
    return nb


def student_readme() -> str:
    """The README written next to the student copies: how to get ``pe_lessons`` without the repository."""
    return f"""# pe-lessons: the notebooks

Open a notebook in Jupyter. The notebooks import the course's helper package `pe_lessons`:

- **On Colab** the first code cell of each notebook installs it.
- **Anywhere else**, install it once into the Python environment your Jupyter uses:

      pip install "pe-lessons @ {install_source()}" jupyterlab

  (or `pip install -r requirements.txt` in this folder), then start `jupyter lab` here.
"""


def student_requirements() -> str:
    return f"pe-lessons @ {install_source()}\njupyterlab>=4.2\nipykernel>=6.29\n"


# --- HTML site ---------------------------------------------------------------------------------


def notebook_title(nb: dict) -> str:
    for line in _source(nb["cells"][0]).splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return "untitled"


def _png_from_vegalite(spec: dict) -> str | None:
    try:
        from pe_lessons.rendering import static_png
    except ImportError:  # pragma: no cover - the site is built in the course environment
        return None
    return static_png(spec)


def widgets_to_static(nb) -> None:
    """Widgets cannot run in a static page: show each widget output's static image instead.

    An output that holds a widget view keeps its other representations (the explorer stores its
    chart as ``image/png``); a view without any image gets one drawn from the Vega-Lite chart the
    widget's Output stored in the notebook's widget state, if there is one. The widget state goes,
    so the page loads no widget JavaScript.
    """
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            view = data.pop(WIDGET_VIEW)
            if not any(k.startswith("image/") for k in data):
                for spec in _widget_vegalite(state, view.get("model_id")):
                    png = _png_from_vegalite(spec)
                    if png:
                        data["image/png"] = png
                        break
    nb.metadata.pop("widgets", None)


def _widget_vegalite(state: dict, model_id: str | None, depth: int = 0):
    """Vega-Lite specs found in the stored Output widgets under ``model_id`` (children first to last)."""
    model = state.get(model_id or "", {}).get("state", {})
    for out in model.get("outputs", []) or []:
        spec = out.get("data", {}).get("application/vnd.vegalite.v5+json")
        if spec:
            yield spec
    if depth < 8:
        for child in model.get("children", []) or []:
            yield from _widget_vegalite(state, str(child).removeprefix("IPY_MODEL_"), depth + 1)


def _drop_badge(nb) -> str | None:
    """Remove the Colab badge line from the header cell (an image from another host); returns its link."""
    first = nb.cells[0]
    lines = _source(first).split("\n")
    match = re.match(r"\[!\[Open In Colab\]\([^)]*\)\]\(([^)]+)\)\s*$", lines[0]) if lines else None
    if not match:
        return None
    first.source = "\n".join(lines[1:]).lstrip("\n")
    return match.group(1)


SITE_CONF = Path(__file__).resolve().parent / "site"  # Sphinx's conf.py and the home page's text
HIDE_ON_SITE = "remove-cell"  # MyST-NB's tag for a cell the page leaves out (the Colab setup cell)


def _chart_title(spec: dict) -> str | None:
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(map(str, title))
    return str(title) if title else None


def site_page(nb, student: bool):
    """A notebook as the site shows it: a student copy (if ``student``), no setup cell, widgets as their
    static image, no badge (the page has its own Colab button), and each chart image with alt text
    (its chart's title, or a plain description)."""
    import nbformat

    nb = student_copy(nb) if student else nbformat.from_dict(nb)
    _drop_badge(nb)
    widgets_to_static(nb)
    for cell in nb.cells:
        if SETUP_TAG in _tags(cell):
            cell.metadata.setdefault("tags", []).append(HIDE_ON_SITE)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                spec = data.get("application/vnd.vegalite.v5+json") or {}
                alt = _chart_title(spec) or "chart of the cell's result"
                cell.metadata.setdefault("mystnb", {})["image"] = {"alt": f"Chart: {alt}"}
    return nb


def course_map() -> str:
    """The course map of the README (its table of notebooks), with links to the site's pages."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## The notebooks", 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return re.sub(r"\]\(notebooks/([^)]+?)\.ipynb\)", r"](\1.ipynb)", "\n".join(rows))


def home_page(course: list[Path], solutions: list[Path]) -> str:
    """The site's home page (MyST Markdown): tools/site/index.md with the course map and the table of contents."""
    parts = {"Part I: the classic": [p for p in course if int(p.name[:2]) <= 8]}
    parts["Part II: what practice moved to"] = [p for p in course if int(p.name[:2]) > 8]
    if solutions:
        parts["Solutions (instructor build)"] = solutions
    toc = "\n\n".join(
        f"```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n\n" + "\n".join(_doc_name(p) for p in paths) + "\n```"
        for caption, paths in parts.items()
        if paths
    )
    template = (SITE_CONF / "index.md").read_text(encoding="utf-8")
    return template.format(course_map=course_map(), repo=repo_url(), toc=toc)


def _doc_name(path: Path) -> str:
    return path.with_suffix("").relative_to(NOTEBOOKS).as_posix()


def build_site(out: Path, course: list[Path], instructor: bool = False, log=print) -> list[Path]:
    """Build the course site in ``out`` with Sphinx (MyST-NB, book theme) from the stored outputs.

    Student site: the course notebooks as student copies (no ``solutions-link``/``solution`` cells),
    no solutions. Instructor site: the notebooks as they are and their solutions. Returns the pages.
    """
    import subprocess
    import sys
    import tempfile

    import nbformat

    sols = [s for s in map(solutions_for, course) if s.exists()] if instructor else []
    with tempfile.TemporaryDirectory(prefix="pe-site-") as tmp:
        src = Path(tmp)
        for path in [*course, *sols]:
            target = src / path.relative_to(NOTEBOOKS)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(site_page(nbformat.read(path, as_version=4), student=not instructor), target)
        (src / "index.md").write_text(home_page(course, sols), encoding="utf-8")
        _copy_mathjax(src / "_static" / "mathjax")
        cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(SITE_CONF)]
        cmd += ["-D", f"html_theme_options.repository_url={repo_url()}"]
        cmd += ["-D", f"html_theme_options.repository_branch={colab_ref()}"]
        cmd += ["-D", f"html_static_path={src / '_static'}"]  # a relative one would be read from SITE_CONF
        cmd += [str(src), str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"sphinx failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        for line in done.stderr.splitlines():
            log(line.replace(tmp + "/", ""))
    pages = [out / "index.html", *(out / f"{_doc_name(p)}.html" for p in [*course, *sols])]
    for page in pages:
        log(f"wrote {page}")
    return pages


def _copy_mathjax(target: Path) -> None:
    import jupyter_server_mathjax

    source = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (target / "MathJax.js").exists():
        shutil.copytree(source, target, dirs_exist_ok=True)


def decode_png(b64: str):
    """Width and height of a base64 PNG (for tests and checks)."""
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(b64))) as image:
        if image.format != "PNG":
            raise ValueError(f"not a PNG: {image.format}")
        return image.size
