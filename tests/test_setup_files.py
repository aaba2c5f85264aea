"""The setup files come from one source, pyproject.toml, and agree with it (read with real parsers)."""

import sys
from importlib import metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import deps  # noqa: E402


def test_generated_files_are_up_to_date_with_pyproject():
    assert deps.stale() == [], "run python3 tools/deps.py after editing pyproject.toml"


def test_every_requirement_is_pinned_inside_its_range():
    pins = deps.pins()
    for group in (None, "lab", "dev"):
        for req in deps.requirements(group):
            name = deps.normalized(req.name)
            assert name in pins, f"{req.name} is not pinned in [tool.pe-lessons] pins"
            (pin,) = pins[name].specifier
            assert pin.operator == "==", f"{pins[name]}: a pin is an exact version"
            assert req.specifier.contains(Version(pin.version), prereleases=True), f"{pins[name]} is outside {req}"


def test_torch_stays_on_the_cpu_build_and_colab_keeps_its_ipywidgets():
    assert str(deps.pins()["torch"].specifier) == "==2.13.0"  # any other torch spec downloads GBs of CUDA
    ipywidgets = next(r for r in deps.requirements() if r.name == "ipywidgets")
    assert ipywidgets.specifier.contains("7.7.1") and ipywidgets.specifier.contains("8.1.9")  # Colab ships 7.7


def test_environment_yml_is_the_conda_form_of_requirements_txt():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip"))]
    conda_names = {v: k for k, v in deps.CONDA_NAMES.items()}
    parsed = {conda_names.get(r.name, r.name): r.specifier for r in map(Requirement, conda)}
    student = deps.requirements() + deps.requirements("lab")
    assert parsed == {r.name: r.specifier for r in student}
    assert {"pip": ["-e ."]} in env["dependencies"]


def test_requirement_files_hold_what_pyproject_lists():
    def listed(name):
        lines = (line.split("#")[0].strip() for line in (ROOT / name).read_text().splitlines())
        return [Requirement(line) for line in lines if line and not line.startswith("-")]

    assert [str(r) for r in listed("requirements.txt")] == [
        str(r) for r in deps.requirements() + deps.requirements("lab")
    ]
    assert [str(r) for r in listed("requirements-dev.txt")] == [str(r) for r in deps.requirements("dev")]
    assert [deps.normalized(r.name) for r in listed("constraints.txt")] == list(deps.pins())
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    for tool in ("pytest", "nbval", "playwright", "ruff", "mypy"):
        assert tool in {r.name for r in deps.requirements("dev")}, f"the test tools include {tool}"


def test_the_version_is_written_once_and_read_from_metadata():
    import pe_lessons

    version = deps.pyproject()["project"]["version"]
    assert version not in (ROOT / "pe_lessons" / "__init__.py").read_text()  # not written a second time
    assert pe_lessons.__version__ == metadata.version("pe-lessons") == version


def test_the_package_ships_every_subpackage_and_its_type_marker():
    config = deps.pyproject()["tool"]["setuptools"]
    assert config["packages"]["find"]["include"] == ["pe_lessons*"]  # a fixed list would leave out pe_lessons.exercises
    assert "py.typed" in config["package-data"]["*"] and (ROOT / "pe_lessons" / "py.typed").exists()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "python3 course.py test" in readme and "python3 course.py lab" in readme
    assert "python3 course.py test" in (ROOT / ".ci" / "run").read_text()


def test_the_test_command_lints_and_type_checks_before_pytest(monkeypatch):
    import argparse

    sys.path.insert(0, str(ROOT))
    import course

    calls = []

    def fake_run(cmd, **kwargs):
        calls.append([str(c) for c in cmd][1:])
        return 1 if calls[-1][:2] == ["-m", "mypy"] and failing_types else 0

    monkeypatch.setattr(course, "setup", lambda **kwargs: Path("python"))
    monkeypatch.setattr(course, "run", fake_run)
    args = argparse.Namespace(unpinned=False, notebooks=[], extra=[])
    failing_types = False
    assert course.cmd_test(args) == 0
    steps = [c[:3] for c in calls]
    assert steps == [["-m", "ruff", "check"], ["-m", "ruff", "format"], ["-m", "mypy"], ["-m", "pytest", "tests"]]
    calls.clear()
    failing_types = True
    assert course.cmd_test(args) == 1 and [c[:2] for c in calls][-1] == ["-m", "mypy"]  # no pytest after a type error
