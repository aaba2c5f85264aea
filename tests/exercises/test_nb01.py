"""Checkers of notebook 01 (wavelength, first slow column, offset dot product):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pe_lessons import exercises as ex
from pe_lessons import pe_formula

from .junk import FUNCTION_JUNK, JUNK


def test_check_wavelength():
    want = 2 * math.pi * 10000 ** (10 / 64)
    assert ex.check_wavelength(want, column=10, d_model=64).ok
    assert "2π" in ex.check_wavelength(want / (2 * math.pi), column=10, d_model=64).message
    assert "column index" in ex.check_wavelength(2 * math.pi * 10000 ** (20 / 64), column=10, d_model=64).message
    assert "frequency" in ex.check_wavelength(1 / want, column=10, d_model=64).message
    assert not ex.check_wavelength(7.0, column=10, d_model=64).ok
    assert "Not answered" in ex.check_wavelength(None, column=10, d_model=64).message


def test_check_first_slow_column():
    assert ex.check_first_slow_column(36, length=1000, d_model=64).ok
    assert "both columns of a pair" in ex.check_first_slow_column(37, length=1000, d_model=64).message
    assert "not long enough" in ex.check_first_slow_column(30, length=1000, d_model=64).message
    assert "earlier column" in ex.check_first_slow_column(50, length=1000, d_model=64).message
    assert "between 0 and 63" in ex.check_first_slow_column(99, length=1000, d_model=64).message


# ---------------------------------------------------------------- 01: offset_dot
def true_offset_dot(k, d_model):
    return sum(math.cos(k / 10000 ** (2 * i / d_model)) for i in range(d_model // 2))


def test_offset_dot_accepts_the_derivation_and_a_numerical_answer():
    assert ex.check_offset_dot(true_offset_dot).ok
    # computing it from two rows is numerically the same (the checker cannot tell, and need not)
    by_rows = lambda k, d: sum(a * b for a, b in zip(pe_formula(3, d), pe_formula(3 + k, d), strict=True))  # noqa: E731
    assert ex.check_offset_dot(by_rows).ok
    assert ex.check_offset_dot(lambda k, d: torch.tensor(true_offset_dot(k, d), dtype=torch.float64)).ok
    assert ex.check_offset_dot(lambda k, d: np.float64(true_offset_dot(k, d))).ok


@pytest.mark.parametrize(
    "answer, words",
    [
        (lambda k, d: d / 2, "k = 0 case"),
        (lambda k, d: sum(math.sin(k / 10000 ** (2 * i / d)) for i in range(d // 2)), "cos(a − b)"),
        (lambda k, d: 2 * true_offset_dot(k, d), "not two"),
        (lambda k, d: sum(math.cos(k / 10000 ** (4 * i / d)) for i in range(d // 2)), "doubled"),
        (lambda k, d: sum(math.cos(k / 10000 ** (i / d)) for i in range(d // 2)), "exponent"),
        (lambda k, d: true_offset_dot(k, d) + 0.5, "at k = 0"),
        (lambda k, d: true_offset_dot(k, d) + (k == 7), "offset_dot(7, 50)"),
    ],
)
def test_offset_dot_names_the_slip(answer, words):
    feedback = ex.check_offset_dot(answer)
    assert not feedback.ok and words in feedback.message


@pytest.mark.parametrize("answer", JUNK + FUNCTION_JUNK)
def test_offset_dot_never_raises_and_never_passes_junk(answer):
    feedback = ex.check_offset_dot(answer)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


def test_numpy_integers_are_column_indices():
    assert "not long enough" in ex.check_first_slow_column(np.int64(0), length=1000, d_model=8).message
    assert ex.check_first_slow_column(np.int64(36), length=1000, d_model=64).ok
    assert ex.check_first_slow_column(torch.tensor(36), length=1000, d_model=64).ok


# ---------------------------------------------------------------- 01: the sin-only row norms
def sin_only_norm(pos, d_model):
    return math.sqrt(2 * sum(math.sin(pos / 10000 ** (2 * i / d_model)) ** 2 for i in range(d_model // 2)))


def test_sin_only_norm_accepts_the_formula_and_a_table_in_any_type():
    assert ex.check_sin_only_norm(sin_only_norm).ok
    assert ex.check_sin_only_norm(lambda p, d: torch.tensor(sin_only_norm(p, d))).ok
    assert ex.check_sin_only_norm(lambda p, d: np.float64(sin_only_norm(p, d))).ok

    def by_table(p, d):  # building the buggy row and measuring it is right too
        row = torch.tensor(pe_formula(p, d), dtype=torch.float64)
        return row[0::2].repeat_interleave(2).norm()

    assert ex.check_sin_only_norm(by_table).ok


@pytest.mark.parametrize(
    "answer, words",
    [
        (lambda p, d: math.sqrt(d / 2), "norm of the correct table"),
        (lambda p, d: sin_only_norm(p, d) ** 2, "squared norm"),
        (lambda p, d: sin_only_norm(p, d) / math.sqrt(2), "count both columns"),
        (lambda p, d: math.sqrt(2 * sum(math.cos(p / 10000 ** (2 * i / d)) ** 2 for i in range(d // 2))), "cos"),
        (lambda p, d: sin_only_norm(p, d) + 1, "sin(0)"),
        (lambda p, d: sin_only_norm(p, d) * (1 + (p == 40)), "sin_only_norm(40, 8)"),
    ],
)
def test_sin_only_norm_names_the_slip(answer, words):
    feedback = ex.check_sin_only_norm(answer)
    assert not feedback.ok and words in feedback.message, feedback


@pytest.mark.parametrize("answer", JUNK + FUNCTION_JUNK)
def test_sin_only_norm_never_raises_and_never_passes_junk(answer):
    feedback = ex.check_sin_only_norm(answer)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


def test_wavelength_to_one_decimal():
    want = 2 * math.pi * 10000 ** (10 / 64)  # 26.50
    assert ex.check_wavelength(round(want, 1), column=10, d_model=64).ok
    for whole in (26, 27):
        feedback = ex.check_wavelength(whole, column=10, d_model=64)
        assert not feedback.ok and "one decimal" in feedback.message
