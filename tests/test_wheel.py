"""The package as a student gets it: sdist and wheel complete, installed (not editable) in a fresh
environment with no PYTHONPATH, and every notebook — course and solutions — replayed there by strict
nbval from a copy outside the checkout. `python3 course.py test` relies on this test for the replay.

The fresh environment reuses the course environment's installed dependencies (tools/freshenv.py), so
nothing is downloaded and torch stays the pinned CPU build.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import freshenv  # noqa: E402
import nbkit  # noqa: E402

NOTEBOOKS = nbkit.all_notebooks()
PACKAGE_FILES = sorted(
    p.relative_to(ROOT).as_posix()
    for p in (ROOT / "pe_lessons").rglob("*")
    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
)


def load_course():
    spec = importlib.util.spec_from_file_location("course", ROOT / "course.py")
    course = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course)
    return course


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    return freshenv.build_sdist_and_wheel(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="session")
def installed(built, tmp_path_factory):
    """A fresh venv with the wheel installed from file, offline; returns its python."""
    _, wheel = built
    python = freshenv.fresh_venv(tmp_path_factory.mktemp("venv") / "env")
    result = freshenv.pip_install(python, "--no-index", str(wheel))
    assert result.returncode == 0, f"installing the wheel failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return python


def test_sdist_and_wheel_hold_every_module_and_data_file(built):
    sdist, wheel = built
    assert PACKAGE_FILES and "pe_lessons/exercises/nb01.py" in PACKAGE_FILES
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = set(zf.namelist())
    with tarfile.open(sdist) as tar:
        in_sdist = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert [f for f in PACKAGE_FILES if f not in in_wheel] == []
    assert [f for f in PACKAGE_FILES if f not in in_sdist] == []
    assert {"pyproject.toml", "README.md"} <= in_sdist


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    code = (
        "import pe_lessons, pe_lessons.exercises.nb01, pe_lessons.widgets, importlib.metadata as m;"
        "print(pe_lessons.__file__); print(m.version('pe-lessons'))"
    )
    out = subprocess.run(
        [str(installed), "-c", code], cwd=tmp_path, capture_output=True, text=True, env=freshenv.clean_env()
    )
    assert out.returncode == 0, out.stderr[-3000:]
    where, version = out.stdout.splitlines()[:2]
    assert Path(where).resolve().is_relative_to(installed.parent.parent.resolve()), where
    assert not Path(where).resolve().is_relative_to(ROOT.resolve())
    assert version == nbkit.version()


@pytest.fixture(scope="session")
def replay(installed, tmp_path_factory):
    """Copies of every notebook replayed under strict nbval with the fresh environment's python; junit results."""
    work = tmp_path_factory.mktemp("replay")
    for path in NOTEBOOKS:
        target = work / "notebooks" / nbkit.relpath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (work / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", work / "tests" / "nbval_sanitize.cfg")
    cmd = [
        str(installed),
        "-m",
        "pytest",
        "notebooks",
        *load_course().NBVAL_ARGS,
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(work),
        "-q",
        "--junitxml",
        str(work / "report.xml"),
    ]
    result = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=freshenv.clean_env())
    report = ET.parse(work / "report.xml") if (work / "report.xml").exists() else None
    return result, report


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: nbkit.relpath(p))
def test_notebook_replays_from_the_installed_wheel(replay, path):
    result, report = replay
    assert report is not None, f"nbval did not run:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    name = nbkit.relpath(path)
    cases = [
        c
        for c in report.iter("testcase")
        if c.get("file", c.get("classname", "")).endswith(name)
        or name.replace("/", ".").removesuffix(".ipynb") in c.get("classname", "")
    ]
    assert cases, f"no replayed cells of {name} in the report:\n{result.stdout[-2000:]}"
    failed = [
        next(iter(c.findall("failure") + c.findall("error")))
        for c in cases
        if c.find("failure") is not None or c.find("error") is not None
    ]
    message = "\n\n".join((f.text or f.get("message", ""))[-3000:] for f in failed[:3])
    assert not failed, f"{len(failed)} cell(s) of {name} do not replay from the wheel:\n{message}"
