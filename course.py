#!/usr/bin/env python3
"""One entry point for the course: set up, open, test, re-execute.

    python3 course.py lab        set up .venv (what a student needs) and open the course in JupyterLab
    python3 course.py test       set up .venv with the test tools and run every test (ruff, mypy, pytest + strict nbval)
    python3 course.py setup      only set up .venv (--dev: with the test tools)
    python3 course.py execute    re-execute notebooks (and solutions) in place, in fresh kernels
    python3 course.py sync       regenerate each notebook's Colab badge and setup cell
    python3 course.py student    write student copies without solutions to build/student/
    python3 course.py html       export the notebooks to a static site in build/site/
                                 (--instructor: with the solutions, in build/site-instructor/)

Needs only python3 (3.10+). The environment lives in ``.venv`` next to this file
and is rebuilt when requirements, constraints or pyproject change. By default
it installs the exact versions in ``constraints.txt`` (the ones the stored
outputs were made with); ``--unpinned`` uses only the ranges of
``requirements.txt`` (for a Python those pins do not support).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
NOTEBOOKS = ROOT / "notebooks"
STAMP = VENV / ".pe-lessons-setup"
SETUP_INPUTS = ["requirements.txt", "requirements-dev.txt", "constraints.txt", "pyproject.toml"]
NOTEBOOK_TIMEOUT_S = 300
NBVAL_ARGS = [
    "--nbval",
    "--nbval-current-env",
    "--nbval-sanitize-with",
    "tests/nbval_sanitize.cfg",
    "--nbval-cell-timeout",
    str(NOTEBOOK_TIMEOUT_S),
]
# What each environment holds, for the message before pip runs (download sizes are rough).
WHAT = {
    "student": "the course: torch (the big one: about 200 MB as a CPU build, 2+ GB with CUDA on Linux from PyPI), "
    "numpy, pandas, Altair + vl-convert (~30 MB), ipywidgets, JupyterLab (~30 MB)",
    "dev": "the course plus the test tools: pytest, hypothesis, nbval, Playwright (~40 MB), transformers (~12 MB), "
    "ruff, mypy",
}


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(cmd: list[str | Path], **kwargs) -> int:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kwargs)


def _digest(pinned: bool) -> str:
    digest = hashlib.sha256(f"pinned={pinned}".encode())
    for name in SETUP_INPUTS:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()


def setup(pinned: bool = True, dev: bool = False) -> Path:
    """Create .venv and install the course into it (skipped when already up to date).

    ``dev=False`` installs what a student needs (requirements.txt); ``dev=True`` adds the test
    tools (requirements-dev.txt). An environment set up for tests also serves the lab.
    """
    want = _digest(pinned)
    python = venv_python()
    have = STAMP.read_text().split() if python.exists() and STAMP.exists() else []
    if have[-1:] == [want] and (not dev or "dev" in have):
        return python
    kind = "dev" if dev or "dev" in have else "student"
    if not python.exists():
        print(f"Creating a virtual environment in {VENV.name}/ ...", flush=True)
        if run([sys.executable, "-m", "venv", VENV]) != 0:
            sys.exit("could not create the virtual environment (on Debian/Ubuntu: sudo apt install python3-venv)")
    print(
        f"Installing into {VENV.name}/ {WHAT[kind]}.\nThe first time takes a few minutes (pip's progress follows); "
        "later runs reuse it.",
        flush=True,
    )
    cmd: list[str | Path] = [
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "-r",
        "requirements-dev.txt" if kind == "dev" else "requirements.txt",
    ]
    if pinned:
        cmd += ["-c", "constraints.txt"]
    cmd += ["-e", "."]
    if run(cmd) != 0:
        sys.exit("installing the requirements failed (see pip's message above)")
    lab_settings(VENV)
    STAMP.write_text(f"{kind} {want}\n")
    return python


def lab_settings(venv: Path) -> None:
    """JupyterLab defaults for the course: no news pop-up, no update check (overrides.json of this environment)."""
    path = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault("@jupyterlab/apputils-extension:notification", {}).update(
        {"fetchNews": "false", "checkForUpdates": False}
    )
    path.write_text(json.dumps(settings, indent=2) + "\n")


def tools():
    sys.path.insert(0, str(ROOT / "tools"))
    import nbkit

    return nbkit


def notebooks(names: list[str]) -> list[Path]:
    """The named notebooks, or every course notebook and every solutions notebook."""
    if not names:
        return tools().all_notebooks()
    return [Path(n).resolve() for n in names]


def shown(path: Path) -> str:
    """A path as the user should see it: relative to the checkout when inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def course_env() -> dict[str, str]:
    """Environment for kernels and tests: this checkout's pe_lessons comes first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    return env


def cmd_setup(args: argparse.Namespace) -> int:
    print("ready:", setup(pinned=not args.unpinned, dev=args.dev).relative_to(ROOT))
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    python = setup(pinned=not args.unpinned)
    lab_settings(VENV)  # also for an environment set up before this setting existed
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # e.g. in a container
    return run([python, "-m", "jupyter", "lab", "--notebook-dir", NOTEBOOKS, *root, *args.extra])


def cmd_test(args: argparse.Namespace) -> int:
    """pytest; with no notebooks named, tests/test_wheel.py replays every notebook from the built wheel."""
    python = setup(pinned=not args.unpinned, dev=True)
    targets = [shown(p) for p in notebooks(args.notebooks)] if args.notebooks else ["tests"]
    if not args.notebooks:  # lint and format first: package, tests, tools, course.py and the notebooks
        for check in (["check", "."], ["format", "--check", "."]):
            if (code := run([python, "-m", "ruff", *check])) != 0:
                print("ruff found problems: `python -m ruff check --fix . && python -m ruff format .` fixes most")
                return code
        if (code := run([python, "-m", "mypy"])) != 0:  # the package's types ([tool.mypy] in pyproject.toml)
            print("mypy found type errors in pe_lessons (see above)")
            return code
    return run([python, "-m", "pytest", *targets, *NBVAL_ARGS, "-p", "no:cacheprovider", *args.extra], env=course_env())


def rerun_inside_venv(args: argparse.Namespace, dev: bool = False) -> int | None:
    """Run this same command with the course environment's Python (None when already there)."""
    python = setup(pinned=not args.unpinned, dev=dev)
    if Path(sys.prefix).resolve() == VENV.resolve():
        return None
    flags = ["--unpinned"] if args.unpinned else []
    flags += ["--instructor"] if getattr(args, "instructor", False) else []
    names = [str(p) for p in args.notebooks]
    return run([python, __file__, args.command, *flags, *names], env=course_env())


def cmd_execute(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    slow = []
    for path in notebooks(args.notebooks):
        seconds = tools().execute(path, NOTEBOOK_TIMEOUT_S)
        print(f"executed {shown(path)} in {seconds:.1f} s", flush=True)
        if seconds > 30:
            slow.append(path.name)
    if slow:
        print("over the 30 s budget:", ", ".join(slow))
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat

    nbkit = tools()
    for path in notebooks(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        if nbkit.sync_notebook(nb, nbkit.relpath(path)):
            nbformat.write(nb, path)
            name = shown(path)
            print(f"updated {name} (re-execute it: python3 course.py execute {name})")
    return 0


def cmd_student(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat

    nbkit = tools()
    out = ROOT / "build" / "student"
    out.mkdir(parents=True, exist_ok=True)
    course = [p for p in notebooks(args.notebooks) if p.parent.name != "solutions"]
    for path in course:
        nbformat.write(nbkit.student_copy(nbformat.read(path, as_version=4)), out / path.name)
        print(f"wrote {(out / path.name).relative_to(ROOT)}")
    (out / "README.md").write_text(nbkit.student_readme(), encoding="utf-8")
    (out / "requirements.txt").write_text(nbkit.student_requirements(), encoding="utf-8")
    print(f"wrote {(out / 'README.md').relative_to(ROOT)} and requirements.txt (how to get pe_lessons)")
    return 0


def cmd_html(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args, dev=True)) is not None:
        return code
    nbkit = tools()
    course = [p for p in notebooks(args.notebooks) if p.parent.name != "solutions"]
    out = ROOT / "build" / ("site-instructor" if args.instructor else "site")
    nbkit.build_site(out, course, instructor=args.instructor, log=lambda m: print(m.replace(str(ROOT) + os.sep, "")))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func, help_ in [
        ("lab", cmd_lab, "set up and open the course in JupyterLab"),
        ("test", cmd_test, "set up and run every test (pytest + strict nbval)"),
        ("setup", cmd_setup, "only set up .venv"),
        ("execute", cmd_execute, "re-execute notebooks in place so stored outputs match the code"),
        ("sync", cmd_sync, "regenerate the Colab badge and setup cell of each notebook from pyproject.toml"),
        ("student", cmd_student, "write student copies without solution cells to build/student/"),
        ("html", cmd_html, "export the notebooks to a static HTML site in build/site/"),
    ]:
        p = sub.add_parser(name, help=help_)
        p.set_defaults(func=func)
        p.add_argument("--unpinned", action="store_true", help="ignore constraints.txt (version ranges only)")
        if name not in ("lab", "setup"):
            p.add_argument("notebooks", nargs="*", help="notebooks (default: all, solutions too)")
        if name == "setup":
            p.add_argument("--dev", action="store_true", help="also install the test tools (requirements-dev.txt)")
        if name == "html":
            p.add_argument("--instructor", action="store_true", help="include the solutions (build/site-instructor/)")
    # options this script does not know (e.g. pytest's -k, -x) pass through to the tool it runs
    args, args.extra = parser.parse_known_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
