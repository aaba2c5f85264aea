"""Seeded studies behind the notebooks' comparisons, too long to train live in a notebook.

Each study is a module with ``run(...) -> pandas.DataFrame`` and a committed results file
beside it (package data) that the notebook loads and charts; ``python -m pe_lessons.studies NAME``
recomputes the file. A test recomputes part of each and compares.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pandas as pd

__all__ = ["STUDIES", "load", "results_path"]

#: Study name → module (in this package) that runs it.
STUDIES = {"context": "context", "extrapolation": "extrapolation", "order": "order"}


def _check_name(name: object) -> str:
    if not isinstance(name, str) or name not in STUDIES:
        raise ValueError(f"study must be one of {', '.join(map(repr, STUDIES))}; got {name!r}")
    return name


def results_path(name: str) -> Path:
    """The committed results file of study ``name`` (a CSV beside its module)."""
    return Path(__file__).with_name(f"{_check_name(name)}.csv")


def load(name: str) -> pd.DataFrame:
    """The committed results of study ``name`` as a frame (one row per measurement)."""
    return pd.read_csv(results_path(name))


def module(name: str):
    """The module that runs study ``name``."""
    return importlib.import_module(f"{__name__}.{STUDIES[_check_name(name)]}")
