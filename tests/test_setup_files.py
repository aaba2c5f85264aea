"""The setup files agree with each other: one list of packages, one set of ranges."""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"pytorch": "torch"}


def requirement_lines(path):
    lines = (line.split("#")[0].strip() for line in (ROOT / path).read_text().splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def split(spec):
    name, rest = re.match(r"([A-Za-z0-9_.-]+)(.*)", spec.replace(" ", "")).groups()
    return name.lower().replace("_", "-"), rest


def test_environment_yml_matches_requirements_txt():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(split(d) for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip")))
    conda = {CONDA_NAMES.get(k, k): v for k, v in conda.items()}
    pip = dict(split(line) for line in requirement_lines("requirements.txt"))
    assert conda == pip


def test_pyproject_dependencies_match_requirements_txt():
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S).group(1)
    deps = dict(split(d) for d in re.findall(r'"([^"]+)"', block))
    pip = dict(split(line) for line in requirement_lines("requirements.txt"))
    assert {k: v for k, v in pip.items() if k not in ("jupyterlab", "ipykernel")} == deps
    assert deps["ipywidgets"] == ">=7.7,<9", "Colab ships ipywidgets 7.7: the package must accept it"


def test_the_package_ships_every_subpackage():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'packages = ["pe_lessons"]' not in text  # that list leaves out pe_lessons.exercises
    assert re.search(r'^\[tool\.setuptools\.packages\.find\]\ninclude = \["pe_lessons\*"\]', text, re.M)


def test_constraints_pin_every_requirement_and_torch_to_the_cpu_build():
    pins = dict(split(line) for line in requirement_lines("constraints.txt"))
    assert pins["torch"] == "==2.13.0"
    lines = requirement_lines("requirements.txt") + requirement_lines("requirements-dev.txt")
    for name in (split(line)[0] for line in lines):
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert pins[name].startswith("==")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "python3 course.py test" in readme and "python3 course.py lab" in readme
    assert "python3 course.py test" in (ROOT / ".ci" / "run").read_text()
