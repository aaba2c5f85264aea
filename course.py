#!/usr/bin/env python3
"""One entry point for the course: set up, open, test, re-execute.

    python3 course.py lab        set up .venv and open the course in JupyterLab
    python3 course.py test       set up .venv and run every test (pytest + strict nbval)
    python3 course.py setup      only set up .venv
    python3 course.py execute    re-execute notebooks in place, in fresh kernels
    python3 course.py sync       regenerate each notebook's Colab badge and setup cell
    python3 course.py student    write student copies without solutions to build/student/
    python3 course.py html       export every notebook to a static site in build/site/

Needs only python3 (3.10+). The environment lives in ``.venv`` next to this file
and is rebuilt when requirements, constraints or pyproject change. By default
it installs the exact versions in ``constraints.txt`` (the ones the stored
outputs were made with); ``--unpinned`` uses only the ranges of
``requirements.txt`` (for a Python those pins do not support).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
NOTEBOOKS = ROOT / "notebooks"
STAMP = VENV / ".pe-lessons-setup"
SETUP_INPUTS = ["requirements.txt", "requirements-dev.txt", "constraints.txt", "pyproject.toml"]
NOTEBOOK_TIMEOUT_S = 300
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def run(cmd: list[str | Path], **kwargs) -> int:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kwargs)


def setup(pinned: bool = True) -> Path:
    """Create .venv and install the course into it (skipped when already up to date)."""
    digest = hashlib.sha256(f"pinned={pinned}".encode())
    for name in SETUP_INPUTS:
        digest.update((ROOT / name).read_bytes())
    want = digest.hexdigest()
    python = venv_python()
    if python.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return python
    if not python.exists():
        print(f"Creating a virtual environment in {VENV.name}/ ...", flush=True)
        if run([sys.executable, "-m", "venv", VENV]) != 0:
            sys.exit("could not create the virtual environment (on Debian/Ubuntu: apt install python3-venv)")
    cmd: list[str | Path] = [python, "-m", "pip", "install", "--quiet", "-r", "requirements-dev.txt"]
    if pinned:
        cmd += ["-c", "constraints.txt"]
    cmd += ["-e", "."]
    if run(cmd) != 0:
        sys.exit("installing the requirements failed (see pip's message above)")
    STAMP.write_text(want + "\n")
    return python


def notebooks(names: list[str]) -> list[Path]:
    if not names:
        return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return [Path(n).resolve() for n in names]


def course_env() -> dict[str, str]:
    """Environment for kernels and tests: this checkout's pe_lessons comes first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    return env


def cmd_setup(args: argparse.Namespace) -> int:
    print("ready:", setup(pinned=not args.unpinned).relative_to(ROOT))
    return 0


def cmd_lab(args: argparse.Namespace) -> int:
    python = setup(pinned=not args.unpinned)
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []  # e.g. in a container
    return run([python, "-m", "jupyter", "lab", "--notebook-dir", NOTEBOOKS, *root, *args.extra])


def cmd_test(args: argparse.Namespace) -> int:
    python = setup(pinned=not args.unpinned)
    env = course_env()
    targets = [str(p.relative_to(ROOT)) for p in notebooks(args.notebooks)] if args.notebooks else ["tests", "notebooks"]
    return run(
        [
            python, "-m", "pytest", *targets,
            "--nbval", "--nbval-current-env",
            "--nbval-sanitize-with", "tests/nbval_sanitize.cfg",
            "--nbval-cell-timeout", str(NOTEBOOK_TIMEOUT_S),
            "-p", "no:cacheprovider", *args.extra,
        ],
        env=env,
    )


def rerun_inside_venv(args: argparse.Namespace) -> int | None:
    """Run this same command with the course environment's Python (None when already there)."""
    python = setup(pinned=not args.unpinned)
    if Path(sys.prefix).resolve() == VENV.resolve():
        return None
    flags = ["--unpinned"] if args.unpinned else []
    names = [str(p) for p in notebooks(args.notebooks)]
    return run([python, __file__, args.command, *flags, *names], env=course_env())


def merge_streams(outputs: list) -> list:
    """Consecutive stream outputs of the same name (stdout, stderr) joined into one."""
    merged: list = []
    for out in outputs:
        if out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream" \
                and merged[-1].get("name") == out.get("name"):
            merged[-1]["text"] = merged[-1]["text"] + out["text"]
        else:
            merged.append(out)
    return merged


def cmd_execute(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat
    from nbclient import NotebookClient

    slow = []
    for path in notebooks(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:  # timestamps only make diffs noisy
            cell.metadata.pop("execution", None)
        nb.metadata.pop("jupytext", None)  # authoring-tool metadata, if any
        nb.metadata["kernelspec"] = KERNELSPEC  # JupyterLab and Colab open it without asking for a kernel
        start = time.perf_counter()
        NotebookClient(nb, timeout=NOTEBOOK_TIMEOUT_S, kernel_name="python3", record_timing=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        seconds = time.perf_counter() - start
        for cell in nb.cells:  # one print may arrive in pieces; store it whole, as nbval compares it
            if cell.cell_type == "code":
                cell.outputs = merge_streams(cell.outputs)
        nbformat.write(nb, path)
        print(f"executed {path.relative_to(ROOT)} in {seconds:.1f} s", flush=True)
        if seconds > 30:
            slow.append(path.name)
    if slow:
        print("over the 30 s budget:", ", ".join(slow))
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    import nbkit

    for path in notebooks(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        if nbkit.sync_notebook(nb, path.name):
            nbformat.write(nb, path)
            print(f"updated {path.relative_to(ROOT)} (re-execute it: python3 course.py execute {path.relative_to(ROOT)})")
    return 0


def cmd_student(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat

    sys.path.insert(0, str(ROOT / "tools"))
    import nbkit

    out = ROOT / "build" / "student"
    out.mkdir(parents=True, exist_ok=True)
    for path in notebooks(args.notebooks):
        nb = nbkit.strip_solutions(nbformat.read(path, as_version=4))
        nbformat.write(nbformat.from_dict(nb), out / path.name)
        print(f"wrote {(out / path.name).relative_to(ROOT)}")
    return 0


def cmd_html(args: argparse.Namespace) -> int:
    if (code := rerun_inside_venv(args)) is not None:
        return code
    import nbformat
    from nbconvert import HTMLExporter

    sys.path.insert(0, str(ROOT / "tools"))
    import nbkit

    out = ROOT / "build" / "site"
    out.mkdir(parents=True, exist_ok=True)
    exporter = HTMLExporter(template_name="lab")
    entries = []
    for path in notebooks(args.notebooks):
        nb = nbformat.read(path, as_version=4)
        body, _ = exporter.from_notebook_node(nb)
        target = out / (path.stem + ".html")
        target.write_text(body, encoding="utf-8")
        entries.append((target.name, nbkit.notebook_title(nb)))
        print(f"wrote {target.relative_to(ROOT)}")
    (out / "index.html").write_text(nbkit.index_html(entries), encoding="utf-8")
    print(f"wrote {(out / 'index.html').relative_to(ROOT)}")
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
            p.add_argument("notebooks", nargs="*", help="notebooks (default: all of notebooks/)")
    # options this script does not know (e.g. pytest's -k, -x) pass through to the tool it runs
    args, args.extra = parser.parse_known_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
