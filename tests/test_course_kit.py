"""The course kit: Colab badges and setup cells, static chart images, solutions kept apart, student
copies, the HTML site and the maintainers' CI workflow."""

import contextlib
import copy
import html
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import freshenv  # noqa: E402
import nbkit  # noqa: E402

COURSE = nbkit.course_notebooks()
SOLUTIONS = nbkit.solution_notebooks()
ALL = COURSE + SOLUTIONS
VEGALITE = "application/vnd.vegalite.v5+json"
CHECK_CALL = re.compile(r"\b(check_[a-z0-9_]+)\s*\(")


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell):
    return "".join(cell["source"])


def ids(path):
    return nbkit.relpath(path)


# --- badge and setup cell -----------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL, ids=ids)
def test_badge_and_setup_cell_are_generated_from_pyproject(path):
    nb = load(path)
    assert not nbkit.sync_notebook(nb, nbkit.relpath(path)), f"run: python3 course.py sync {path.relative_to(ROOT)}"
    badge = f"[![Open In Colab]({nbkit.BADGE_IMAGE})](https://colab.research.google.com/github/"
    assert source(nb["cells"][0]).startswith(badge)
    assert nbkit.install_source() in source(nb["cells"][1])


def test_badge_opens_the_ref_the_setup_cell_installs():
    ref = nbkit.colab_ref()
    assert f"/blob/{ref}/notebooks/01_x.ipynb" in nbkit.badge_line("01_x.ipynb")
    assert (
        "/blob/main/notebooks/solutions/01_x_solutions.ipynb" in nbkit.badge_line("solutions/01_x_solutions.ipynb")
        or ref != "main"
    )
    assert nbkit.install_source() == f"git+{nbkit.repo_url()}@{ref}"
    assert f'source = "{nbkit.install_source()}"' in nbkit.setup_source()
    compile(nbkit.setup_source(), "<setup cell>", "exec")


def test_setup_cell_does_nothing_off_colab(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        exec(compile(nbkit.setup_source(), "<setup cell>", "exec"), {})
    assert calls == [] and out.getvalue() == ""


COLAB_RUN = """
import sys, types
sys.modules["google"] = types.ModuleType("google")
sys.modules["google.colab"] = types.ModuleType("google.colab")
import importlib.metadata as m
before = {name: m.version(name) for name in ("torch", "ipywidgets")}
print("BEGIN")
exec(compile(open(sys.argv[1]).read(), "<setup cell>", "exec"), {})
print("END")
import ipywidgets, pe_lessons, pe_lessons.exercises.nb01, torch
from pe_lessons.widgets import pe_explorer
ex = pe_explorer(d_model=16, positions=(0, 32))
ex.positions = (5000, 5032)
assert ex.window == ((5000, 5032), (0, 16)), ex.window
print("after", {name: m.version(name) for name in ("torch", "ipywidgets")} == before, ipywidgets.__version__,
      pe_lessons.__file__)
"""


@pytest.fixture(scope="module")
def bare_repo(tmp_path_factory):
    """A bare git repository with this working tree's package on branch main (as GitHub would hold it)."""
    work = freshenv.source_copy(tmp_path_factory.mktemp("repo") / "work")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "course"]):
        subprocess.run([*git, *args], cwd=work, check=True)
    bare = work.parent / "course.git"
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True)
    return bare, head.stdout.strip()


@pytest.mark.parametrize("tagged", [False, True], ids=["no tags", "tagged"])
def test_setup_cell_on_colab_installs_the_badge_ref_and_keeps_torch_and_ipywidgets_7(bare_repo, tagged, tmp_path):
    bare, commit = bare_repo
    if tagged:
        subprocess.run(["git", "tag", "-f", f"v{nbkit.version()}", commit], cwd=bare, check=True, capture_output=True)
    else:
        subprocess.run(["git", "tag", "-d", f"v{nbkit.version()}"], cwd=bare, capture_output=True)
    assert (subprocess.run(["git", "tag"], cwd=bare, capture_output=True, text=True).stdout != "") == tagged
    try:
        ipywidgets7 = freshenv.ipywidgets7_dir()
    except RuntimeError as err:  # no network and no cached copy
        pytest.skip(str(err))
    python = freshenv.fresh_venv(tmp_path / "colab", first=[ipywidgets7])  # Colab: torch and ipywidgets 7 present
    url = "file://localhost" + bare.resolve().as_posix()  # pip refuses a PEP 508 URL with an empty host
    cell = nbkit.setup_source().replace(nbkit.install_source(), f"git+{url}@{nbkit.colab_ref()}")
    assert cell != nbkit.setup_source()
    (tmp_path / "cell.py").write_text(cell)
    (tmp_path / "run.py").write_text(COLAB_RUN)
    result = subprocess.run(
        [str(python), "run.py", "cell.py"], cwd=tmp_path, capture_output=True, text=True, env=freshenv.clean_env()
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    printed = result.stdout.split("BEGIN\n", 1)[1].split("END\n", 1)[0].splitlines()
    assert len(printed) == 1, printed
    assert printed[0].startswith(f"installed pe-lessons {nbkit.version()} from git+{url}@{nbkit.colab_ref()}")
    assert f"(commit {commit[:12]})" in printed[0] and "torch" in printed[0] and "ipywidgets 7.7.1" in printed[0]
    after = result.stdout.split("END\n", 1)[1].split()
    assert after[:3] == ["after", "True", "7.7.1"], after
    assert str(tmp_path / "colab") in after[3]


# --- charts ------------------------------------------------------------------------------------


def chart_outputs(path):
    for cell in load(path)["cells"]:
        for out in cell.get("outputs", []):
            if VEGALITE in out.get("data", {}):
                yield out["data"]


@pytest.mark.parametrize("path", ALL, ids=ids)
def test_every_chart_carries_a_small_static_png(path):
    for data in chart_outputs(path):
        assert "image/png" in data, f"{path.name}: a chart without a static PNG (JupyterLab would add one on save)"
        assert "image/jpeg" not in data
        assert len(data["image/png"]) < 120_000, f"{path.name}: a static image over 90 kB"
        assert len(data[VEGALITE]["datasets"][next(iter(data[VEGALITE]["datasets"]))]) <= 5000


# --- solutions ---------------------------------------------------------------------------------


def tagged(cells, tag):
    return [c for c in cells if tag in c["metadata"].get("tags", [])]


@pytest.mark.parametrize("path", COURSE, ids=ids)
def test_course_notebook_never_shows_an_answer(path):
    cells = load(path)["cells"]
    assert tagged(cells, nbkit.SOLUTION_TAG) == [], f"{path.name}: solution cells belong in solutions/"
    for cell in cells:
        for out in cell.get("outputs", []):
            assert "✅" not in json.dumps(out, ensure_ascii=False), f"{path.name}: an output says ✅ (an answer)"
        text = source(cell)
        assert "Solutions are at the very end" not in text and not re.search(r"^#+\s*Solutions\s*$", text, re.M)


@pytest.mark.parametrize("path", COURSE, ids=ids)
def test_solutions_are_one_link_away_and_cover_every_checker(path):
    cells = load(path)["cells"]
    links = tagged(cells, nbkit.LINK_TAG)
    solutions = nbkit.solutions_for(path)
    assert len(links) == 1 and links[0]["cell_type"] == "markdown", f"{path.name}: one '{nbkit.LINK_TAG}' cell"
    assert f"(solutions/{solutions.name})" in source(links[0])
    assert solutions.exists(), f"{path.name}: no {solutions.relative_to(ROOT)}"
    used = {name for c in cells if c["cell_type"] == "code" for name in CHECK_CALL.findall(source(c))}
    assert used, f"{path.name}: no exercise calls a checker"
    sol_cells = [c for c in load(solutions)["cells"] if c["cell_type"] == "code"]
    for name in sorted(used):
        asserting = [
            c for c in sol_cells if name in CHECK_CALL.findall(source(c)) and re.search(r"assert .*\.ok", source(c))
        ]
        assert asserting, f"{solutions.name}: no cell asserts that {name} accepts the solution"


@pytest.mark.parametrize("path", SOLUTIONS, ids=ids)
def test_solutions_notebook_layout(path):
    cells = load(path)["cells"]
    stem = path.stem.removesuffix("_solutions")
    assert (ROOT / "notebooks" / f"{stem}.ipynb").exists(), f"{path.name}: no course notebook {stem}.ipynb"
    assert re.search(rf"^# Solutions — {stem[:2]}: ", source(cells[0]), re.M)
    assert nbkit.SETUP_TAG in cells[1]["metadata"].get("tags", [])
    assert any("✅" in json.dumps(c.get("outputs", []), ensure_ascii=False) for c in cells), "no checker said ✅"


def synthetic_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 99 · Synthetic\n\nWhat you'll learn: nothing."),
        nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["setup"]}),
        nbformat.v4.new_markdown_cell("## Exercises"),
        nbformat.v4.new_markdown_cell(
            "Solutions: [here](solutions/99_x_solutions.ipynb)", metadata={"tags": [nbkit.LINK_TAG]}
        ),
        nbformat.v4.new_code_cell("check_x(1)", metadata={"tags": ["nbval-ignore-output"]}),
        nbformat.v4.new_code_cell("answer = 2", metadata={"tags": [nbkit.SOLUTION_TAG]}),
    ]
    return nb


def test_student_copy_drops_exactly_the_solution_link_and_solution_cells():
    nb = synthetic_notebook()
    student = nbkit.student_copy(nb)
    assert [source(c) for c in student.cells] == [source(c) for c in nb.cells[:3]] + ["check_x(1)"]
    assert len(nb.cells) == 6  # the original is untouched
    nbformat.validate(student)


@pytest.mark.parametrize("path", COURSE, ids=ids)
def test_student_copies_of_the_course_have_no_link_to_missing_solutions(path):
    student = nbkit.student_copy(nbformat.read(path, as_version=4))
    text = "\n".join(source(c) for c in student.cells)
    assert "solutions/" not in text and "_solutions.ipynb" not in text


def test_student_command_writes_copies_and_says_how_to_get_the_package(tmp_path, monkeypatch):
    course = load_course()
    monkeypatch.setattr(course, "ROOT", tmp_path)
    monkeypatch.setattr(course, "rerun_inside_venv", lambda args: None)
    src = tmp_path / "99_x.ipynb"
    nbformat.write(synthetic_notebook(), src)
    assert course.main(["student", str(src)]) == 0
    out = tmp_path / "build" / "student"
    assert sorted(p.name for p in out.iterdir()) == ["99_x.ipynb", "README.md", "requirements.txt"]
    assert nbkit.install_source() in (out / "README.md").read_text()
    assert f"pe-lessons @ {nbkit.install_source()}" in (out / "requirements.txt").read_text()
    assert len(nbformat.read(out / "99_x.ipynb", as_version=4).cells) == 4


# --- setup ------------------------------------------------------------------------------------


def load_course():
    import importlib.util

    spec = importlib.util.spec_from_file_location("course", ROOT / "course.py")
    course = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course)
    return course


def test_lab_installs_what_a_student_needs_and_test_adds_the_tools(tmp_path, monkeypatch, capsys):
    course = load_course()
    venv = tmp_path / "venv"
    monkeypatch.setattr(course, "VENV", venv)
    monkeypatch.setattr(course, "STAMP", venv / ".stamp")
    calls = []

    def fake_run(cmd, **kwargs):
        cmd = [str(c) for c in cmd]
        calls.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            course.venv_python().parent.mkdir(parents=True)
            course.venv_python().touch()
        return 0

    monkeypatch.setattr(course, "run", fake_run)
    course.setup(dev=False)
    pip = calls[-1]
    assert pip[pip.index("-r") + 1] == "requirements.txt" and "--quiet" not in pip and "constraints.txt" in pip
    said = capsys.readouterr().out
    assert "torch" in said and "MB" in said and "minutes" in said  # what is installed, how big, how long
    settings = json.loads((venv / "share/jupyter/lab/settings/overrides.json").read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"  # no news pop-up
    calls.clear()
    course.setup(dev=False)
    assert calls == []  # up to date
    course.setup(dev=True)
    assert calls[-1][calls[-1].index("-r") + 1] == "requirements-dev.txt"
    calls.clear()
    course.setup(dev=False)
    assert calls == []  # an environment with the test tools serves the lab too
    dev = (ROOT / "requirements-dev.txt").read_text()
    student = (ROOT / "requirements.txt").read_text()
    for tool in ("pytest", "hypothesis", "nbval", "playwright"):
        assert tool in dev and tool not in student


# --- execution ---------------------------------------------------------------------------------


def test_execute_stores_each_print_whole_and_drops_tool_metadata(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["jupytext"] = {"formats": "ipynb,py"}
    code = "import sys, time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)\n"
    code += "print('w', file=sys.stderr)"
    nb.cells = [
        nbformat.v4.new_code_cell(
            code, metadata={"tags": ["t"], "lines_to_next_cell": 2, "execution": {"iopub.status.busy": "x"}}
        )
    ]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    nbkit.execute(path, timeout=60)
    done = nbformat.read(path, as_version=4)
    assert [(o["name"], o["text"]) for o in done.cells[0].outputs] == [("stdout", "0\n1\n2\n"), ("stderr", "w\n")]
    assert done.cells[0].metadata == {"tags": ["t"]}
    assert "jupytext" not in done.metadata and done.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", ALL, ids=ids)
def test_stored_prints_are_whole(path):
    for cell in load(path)["cells"]:
        streams = [o.get("name") if o["output_type"] == "stream" else None for o in cell.get("outputs", [])]
        assert not any(a is not None and a == b for a, b in zip(streams, streams[1:], strict=False)), path.name


# --- HTML site ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    course = COURSE[:3]
    nbkit.build_site(out / "student", course, instructor=False, log=lambda m: None)
    nbkit.build_site(out / "instructor", course, instructor=True, log=lambda m: None)
    return out, course


def links(page: str, css_class: str) -> list[str]:
    """The targets of the links of one class, e.g. the theme's "left-prev" / "right-next"."""
    return re.findall(rf'<a\s(?=[^>]*class="[^"]*\b{css_class}\b)[^>]*href="([^"]+)"', page)


def test_site_pages_have_sidebar_navigation_buttons_local_math_and_no_solutions(sites):
    out, course = sites
    titles = [nbkit.notebook_title(load(p)) for p in course]
    for i, path in enumerate(course):
        page = (out / "student" / f"{path.stem}.html").read_text(encoding="utf-8")
        assert html.unescape(re.search(r"<title>(.*?)</title>", page).group(1)).startswith(titles[i])
        # the sidebar lists every notebook, in order
        sidebar = page[page.index("bd-docs-nav") :]
        here = 'class="current reference internal" href="#"'
        positions = [sidebar.index(f'href="{p.stem}.html"') if p != path else sidebar.index(here) for p in course]
        assert positions == sorted(positions)
        assert links(page, "left-prev") == ([f"{course[i - 1].stem}.html"] if i > 0 else ["index.html"])
        assert links(page, "right-next") == ([f"{course[i + 1].stem}.html"] if i + 1 < len(course) else [])
        # the page's own buttons: Colab at the badge's ref, and the download of this notebook
        colab = nbkit.badge_line(path.name).split("](")[-1].rstrip(")")
        assert f'href="{colab}"' in page
        assert f'href="_sources/{path.name}"' in page
        # math and everything else from the site itself: no CDN
        assert 'src="_static/mathjax/MathJax.js?config=' in page
        assert re.findall(r'<(?:script|link)\b[^>]*(?:src|href)="(?:https?:)?//[^"]*"', page) == []
        assert "_solutions" not in page and nbkit.WIDGET_VIEW not in page
        assert "google.colab" not in page, "the setup cell is left off the page"
        # charts: each stored chart is an image with alt text
        charts = sum(1 for _ in chart_outputs(path))
        alts = re.findall(r'<img alt="Chart: ([^"]+)" src="_images/', page)
        assert len(alts) >= charts and all(a.strip() for a in alts)
        # the download is the student copy, with its setup cell
        download = nbformat.read(out / "student" / "_sources" / path.name, as_version=4)
        assert not tagged(download.cells, nbkit.LINK_TAG) and nbkit.SETUP_TAG in download.cells[1].metadata["tags"]
    assert (out / "student" / "_static" / "mathjax" / "MathJax.js").exists()
    assert (out / "student" / "search.html").exists() and (out / "student" / "searchindex.js").exists()
    assert not (out / "student" / "solutions").exists()
    index = (out / "student" / "index.html").read_text()
    body = index[index.index("<article") :]
    positions = [body.index(f'href="{p.stem}.html"') for p in course]
    assert positions == sorted(positions) and "solutions/" not in index
    assert "The course map" in index and "How to run it" in index


def test_instructor_site_links_the_solutions(sites):
    out, course = sites
    present = [p for p in course if nbkit.solutions_for(p).exists()]
    if not present:
        pytest.skip("no solutions notebooks for these notebooks in this checkout")
    index = (out / "instructor" / "index.html").read_text()
    assert "Solutions (instructor build)" in index
    for path in present:
        name = nbkit.solutions_for(path).stem
        assert f'href="solutions/{name}.html"' in index
        page = (out / "instructor" / "solutions" / f"{name}.html").read_text(encoding="utf-8")
        assert f'href="../{path.stem}.html"' in page  # (Sphinx loads MathJax only on pages with math)
        course_page = (out / "instructor" / f"{path.stem}.html").read_text(encoding="utf-8")
        assert f'href="solutions/{name}.html"' in course_page  # the link cell points to the page, not the .ipynb


def test_home_page_course_map_is_the_readme_table():
    rows = [r for r in nbkit.course_map().splitlines() if re.match(r"\|\s*\d\d\s*\|", r)]
    assert [r.split("|")[1].strip() for r in rows] == [p.name[:2] for p in COURSE]
    for row, path in zip(rows, COURSE):
        assert f"]({path.name})" in row  # linked to the page, not to notebooks/...


def test_setup_cell_is_collapsed_in_lab_and_a_form_on_colab():
    for path in [*COURSE, *SOLUTIONS]:
        cell = load(path)["cells"][1]
        assert cell["metadata"].get("jupyter", {}).get("source_hidden") is True, path.name
        assert cell["metadata"].get("cellView") == "form", path.name
        assert source(cell).startswith("# @title "), path.name


def test_widget_outputs_become_their_static_chart():
    nb = nbformat.v4.new_notebook()
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "mark": "point",
        "data": {"values": [{"x": 1}]},
        "encoding": {"x": {"field": "x", "type": "quantitative"}},
    }
    view = {"version_major": 2, "version_minor": 0, "model_id": "box"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "w", outputs=[nbformat.v4.new_output("display_data", data={nbkit.WIDGET_VIEW: view, "text/plain": "w"})]
        )
    ]
    nb.metadata["widgets"] = {
        "application/vnd.jupyter.widget-state+json": {
            "state": {
                "box": {"state": {"children": ["IPY_MODEL_out"]}},
                "out": {"state": {"outputs": [{"output_type": "display_data", "data": {VEGALITE: spec}}]}},
            }
        }
    }
    nbkit.widgets_to_static(nb)
    data = nb.cells[0].outputs[0]["data"]
    assert nbkit.WIDGET_VIEW not in data and nbkit.decode_png(data["image/png"])[0] > 10
    assert "widgets" not in nb.metadata
    keep = copy.deepcopy(nb)
    nbkit.widgets_to_static(nb)
    assert nb == keep


# --- CI ----------------------------------------------------------------------------------------


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
    minutes = [job.get("timeout-minutes", 360) for job in flow["jobs"].values()]
    assert max(minutes) <= 30
