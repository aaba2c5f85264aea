"""Fresh Python environments for the packaging tests, without downloading the course's dependencies again.

:func:`fresh_venv` makes a new virtual environment (no ``PYTHONPATH``, no checkout on its path)
that sees the course environment's installed packages *except* ``pe_lessons``: each of them is
linked into one folder that a ``.pth`` file puts on the new environment's path. Installing the
course's wheel there (``pip install --no-index``) then proves that the wheel holds the package and
that its declared dependencies are satisfied, and everything the notebooks import comes from the
wheel — at the cost of a few symlinks instead of another gigabyte of torch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IPYWIDGETS7 = ["ipywidgets==7.7.1", "widgetsnbextension==3.6.10", "ipython-genutils==0.2.0"]  # what Colab ships


def _hidden(name: str) -> bool:
    """Entries of the course environment a fresh one must not see: this package and path hooks."""
    lower = name.lower()
    return lower.startswith(("pe_lessons", "pe-lessons", "__editable__")) or lower.endswith(".pth")


def python_of(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without PYTHONPATH (and the checkout's other path settings)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(extra)
    return env


def fresh_venv(path: Path, first: list[Path] = ()) -> Path:
    """A new venv at ``path`` whose path holds ``first`` and then the course environment minus pe_lessons."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = python_of(path)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
        env=clean_env(),
    ).stdout.strip()
    deps = path / "course-deps"
    deps.mkdir()
    source = Path(sysconfig.get_path("purelib"))
    for entry in source.iterdir():
        if not _hidden(entry.name):
            (deps / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    lines = [str(Path(p).resolve()) for p in first] + [str(deps)]
    Path(purelib, "_course_deps.pth").write_text("\n".join(lines) + "\n")
    return python


def pip_install(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        cwd=cwd,
    )


def source_copy(target: Path, with_notebooks: bool = False) -> Path:
    """The package's sources as in the working tree (not a stale build/ folder): pyproject, README, pe_lessons."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, target / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "pe_lessons", target / "pe_lessons", ignore=ignore)
    if with_notebooks:
        shutil.copytree(ROOT / "notebooks", target / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return target


def build_sdist_and_wheel(workdir: Path) -> tuple[Path, Path]:
    """Build the sdist from a copy of the sources, then the wheel from that sdist (as ``python -m build`` does).

    Uses the course environment's setuptools (no build isolation, nothing downloaded).
    """
    src = source_copy(workdir / "src")
    dist = workdir / "dist"
    dist.mkdir()
    code = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = (
        subprocess.run(
            [sys.executable, "-c", code, str(dist)],
            cwd=src,
            check=True,
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    sdist = dist / name
    with tarfile.open(sdist) as tar:
        tar.extractall(workdir / "unpacked", filter="data")
    (unpacked,) = (workdir / "unpacked").iterdir()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-w",
            str(dist),
            str(unpacked),
        ],
        check=True,
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    (wheel,) = dist.glob("*.whl")
    return sdist, wheel


def ipywidgets7_dir() -> Path:
    """A folder holding ipywidgets 7.7.1 (Colab's version), installed once with ``pip --target`` (cached in .venv)."""
    target = Path(sys.prefix) / "ipywidgets-7"
    if not (target / "ipywidgets" / "__init__.py").exists():
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                "--no-deps",
                "--target",
                str(target),
                *IPYWIDGETS7,
            ],
            capture_output=True,
            text=True,
            env=clean_env(),
        )
        if result.returncode != 0:
            shutil.rmtree(target, ignore_errors=True)
            raise RuntimeError(f"could not install {' '.join(IPYWIDGETS7)}:\n{result.stderr[-2000:]}")
    return target
