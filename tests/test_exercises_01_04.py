"""The new exercises of notebooks 01-04: each checker accepts the solution, names the usual slips,
and gives feedback (never an exception, never a false ✅) for any input."""

import math

import numpy as np
import pytest
import torch

from pe_lessons import exercises as ex
from pe_lessons import pe_formula, sinusoidal_table
from pe_lessons.exercises.nb04 import alias_period
from pe_lessons.plots import apparent_period, reduce_table

# ---------------------------------------------------------------- inputs no checker may choke on
JUNK = [
    None,
    ...,
    "a string",
    b"bytes",
    True,
    float("nan"),
    float("inf"),
    -float("inf"),
    [1.0, 2.0],
    {"k": 1},
    torch.tensor([1.0, 2.0]),
    torch.tensor(float("nan")),
    np.array([1.0, 2.0]),
    object(),
]


def raises(*args):
    raise RuntimeError("boom")


def placeholder(*args):
    raise NotImplementedError


FUNCTION_JUNK = [
    raises,
    placeholder,
    lambda *a: None,
    lambda *a: "x",
    lambda *a: float("nan"),
    lambda *a: torch.tensor(float("inf")),
    lambda *a: torch.zeros(3),
    lambda *a: [1, 2, 3],
    lambda: 1.0,  # wrong number of arguments
]


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


# ---------------------------------------------------------------- 02: the half-done float64 fix
def classmate_table(max_len, d_model, base=10000.0):
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega.double()
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def fixed_table(max_len, d_model, base=10000.0):
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(base) / d_model))
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def textbook_table(max_len, d_model, base=10000.0):
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


def test_precision_fix_accepts_float64_angles_and_the_package_table():
    assert ex.check_precision_fix(fixed_table).ok
    assert ex.check_precision_fix(lambda n, d: sinusoidal_table(n, d)).ok


@pytest.mark.parametrize(
    "answer, words",
    [
        (classmate_table, "ω itself is still rounded to float32"),
        (lambda n, d: sinusoidal_table(n, d, dtype=torch.float64), "the model wants float32"),
        (textbook_table, "some step still rounds to float32"),
        (lambda n, d: fixed_table(n, d)[:, torch.arange(d).view(-1, 2).flip(1).flatten()], "layout"),
        (lambda n, d: fixed_table(n + 1, d), "Shape"),
        (lambda n, d: fixed_table(n, d).to(torch.int32), "floating"),
        (lambda n, d: fixed_table(n, d) * float("nan"), "NaN"),
        (lambda n, d: fixed_table(n, d).numpy(), "torch.Tensor"),
    ],
)
def test_precision_fix_names_what_is_left(answer, words):
    feedback = ex.check_precision_fix(answer)
    assert not feedback.ok and words in feedback.message


@pytest.mark.parametrize("answer", JUNK + FUNCTION_JUNK)
def test_precision_fix_never_raises_and_never_passes_junk(answer):
    feedback = ex.check_precision_fix(answer)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


def test_precision_fix_complex_and_placeholder():
    assert "Not answered" in ex.check_precision_fix(placeholder).message
    assert not ex.check_precision_fix(lambda n, d: fixed_table(n, d).to(torch.complex64)).ok


# ---------------------------------------------------------------- 04: predict the alias
ALIAS = dict(column=14, d_model=32, n_positions=30000, rows=100)


def test_alias_period_matches_what_the_naive_picture_shows():
    want = alias_period(**ALIAS)
    naive = reduce_table(sinusoidal_table(30000, 32, dtype=torch.float64), max_rows=100, how="stride")
    shown = apparent_period(torch.tensor(naive.loc[naive.dimension == 14, "value"].to_numpy()), spacing=300)
    assert abs(shown - want) / want < 0.03 and want > 5 * 353
    # slow columns are drawn honestly: the alias is the true period
    assert alias_period(16, 32, 30000, 100) == pytest.approx(2 * math.pi * 10000 ** (16 / 32))


def test_alias_checker_accepts_the_prediction_and_names_the_slips():
    want = alias_period(**ALIAS)
    assert ex.check_alias_period(want, **ALIAS).ok and ex.check_alias_period(round(want), **ALIAS).ok
    assert ex.check_alias_period(np.float32(want), **ALIAS).ok
    true = 2 * math.pi * 10000 ** (14 / 32)
    assert "true period" in ex.check_alias_period(true, **ALIAS).message
    assert "in rows" in ex.check_alias_period(want / 300, **ALIAS).message
    assert "column index" in ex.check_alias_period(alias_period(28, 32, 30000, 100), **ALIAS).message
    assert "Not quite" in ex.check_alias_period(5.0, **ALIAS).message
    honest = dict(column=16, d_model=32, n_positions=30000, rows=100)
    assert ex.check_alias_period(2 * math.pi * 100, **honest).ok


def test_alias_checker_remainder_slip():
    # column 4 of d_model 16 with k = 600: k·ω = 60 rad; the remainder 60 mod 2π = 3.45 rad, nearest turn -2.83 rad
    setting = dict(column=4, d_model=16, n_positions=45000, rows=75)
    step = 600 * 10000 ** (-4 / 16)
    wrong = 600 * 2 * math.pi / (step % (2 * math.pi))
    feedback = ex.check_alias_period(wrong, **setting)
    assert not feedback.ok and "nearest multiple of 2π" in feedback.message
    assert ex.check_alias_period(alias_period(**setting), **setting).ok


@pytest.mark.parametrize("answer", JUNK + [-1e300, 0.0])
def test_alias_checker_never_raises_and_never_passes_junk(answer):
    feedback = ex.check_alias_period(answer, **ALIAS)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


def test_new_checkers_are_exported_at_the_end_of_their_modules():
    from pe_lessons.exercises import nb01, nb02, nb04

    assert nb01.__all__[-1] == "check_offset_dot" and nb02.__all__[-1] == "check_precision_fix"
    assert nb04.__all__[-2:] == ["alias_period", "check_alias_period"]
    for name in ("check_offset_dot", "check_precision_fix", "check_alias_period"):
        assert name in ex.__all__
