"""The dependency files, generated from their one source, ``pyproject.toml``.

``pyproject.toml`` holds what the package needs (``[project] dependencies``), what a student
needs besides to run the notebooks (the ``lab`` extra), the test tools (the ``dev`` extra) and
the exact versions the stored notebook outputs were made with (``[tool.pe-lessons] pins``).
From them this writes the files pip and conda read:

- ``requirements.txt``: dependencies + ``lab`` (version ranges, usable anywhere);
- ``requirements-dev.txt``: ``-r requirements.txt`` + ``dev``;
- ``constraints.txt``: the pins (torch 2.13.0: a CPU build on the project's machines);
- ``environment.yml``: the conda form of ``requirements.txt``.

    python3 tools/deps.py           write the four files
    python3 tools/deps.py --check   exit 1 (naming them) if a file differs from what would be written

``tests/test_setup_files.py`` checks the same, and that every requirement is pinned to a version
inside its range (parsed with ``packaging``, not by hand).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the dev extra installs tomli there)
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
#: pip name → conda-forge name, where they differ
CONDA_NAMES = {"torch": "pytorch"}
#: the Pythons environment.yml allows (the package's requires-python, capped at the newest one tested)
CONDA_PYTHON = "python>=3.10,<3.14"
GENERATED = "# Generated from pyproject.toml by `python3 tools/deps.py`: edit pyproject.toml, then run it.\n"


def pyproject() -> dict:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def specs(group: str | None = None) -> list[str]:
    """``[project] dependencies`` (``group=None``) or one extra of ``[project.optional-dependencies]``, as written."""
    project = pyproject()["project"]
    listed = project["dependencies"] if group is None else project["optional-dependencies"][group]
    # an extra may name another one of this package (dev includes lab): the files list those separately
    return [spec for spec in listed if normalized(Requirement(spec).name) != normalized(project["name"])]


def requirements(group: str | None = None) -> list[Requirement]:
    """:func:`specs`, parsed."""
    return [Requirement(spec) for spec in specs(group)]


def pins() -> dict[str, Requirement]:
    """``[tool.pe-lessons] pins`` by normalized name: one ``name==version`` each."""
    return {normalized(r.name): r for r in map(Requirement, pyproject()["tool"]["pe-lessons"]["pins"])}


def normalized(name: str) -> str:
    """PEP 503 form of a distribution name (``PyYAML`` → ``pyyaml``, ``jupyter_client`` → ``jupyter-client``)."""
    return name.lower().replace("_", "-").replace(".", "-")


def _lines(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


def requirements_txt() -> str:
    return (
        GENERATED + "# What a student needs to follow the course (any platform): version ranges, not pins;\n"
        "# constraints.txt holds the exact versions the stored notebook outputs were made with.\n"
        + _lines(specs() + specs("lab"))
    )


def requirements_dev_txt() -> str:
    return (
        GENERATED
        + "# What the test command needs on top of requirements.txt.\n-r requirements.txt\n"
        + _lines(specs("dev"))
    )


def constraints_txt() -> str:
    return (
        GENERATED + "# Exact versions for the test command and CI: the stored notebook outputs were made with\n"
        "# these, so strict nbval replays them. On the project's machines torch==2.13.0 resolves to a\n"
        "# local CPU build (no CUDA downloads). Students can ignore this file.\n"
        + _lines(pyproject()["tool"]["pe-lessons"]["pins"])
    )


def environment_yml() -> str:
    deps = [CONDA_PYTHON, "pip"]
    for spec in specs() + specs("lab"):
        name = Requirement(spec).name
        deps.append(CONDA_NAMES.get(normalized(name), name) + spec[len(name) :])
    body = "".join(f"  - {d}\n" for d in deps)
    return (
        GENERATED + "# Conda alternative to requirements.txt (same packages, same ranges). From the repository root:\n"
        "#   conda env create -f environment.yml && conda activate pe-lessons && jupyter lab notebooks/\n"
        "name: pe-lessons\nchannels:\n  - conda-forge\ndependencies:\n" + body + "  - pip:\n      - -e .\n"
    )


FILES = {
    "requirements.txt": requirements_txt,
    "requirements-dev.txt": requirements_dev_txt,
    "constraints.txt": constraints_txt,
    "environment.yml": environment_yml,
}


def stale() -> list[str]:
    """The files that differ from what :func:`main` would write."""
    return [name for name, render in FILES.items() if (ROOT / name).read_text(encoding="utf-8") != render()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    if args.check:
        if names := stale():
            print(f"out of date with pyproject.toml: {', '.join(names)} (run python3 tools/deps.py)")
            return 1
        return 0
    for name, render in FILES.items():
        (ROOT / name).write_text(render(), encoding="utf-8")
        print("wrote", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
