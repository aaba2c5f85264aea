"""Checkers of notebook 04 (predicted wavelength, first honest column, the alias period):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pe_lessons import exercises as ex
from pe_lessons import sinusoidal_table
from pe_lessons.exercises._feedback import NOT_DONE
from pe_lessons.exercises.nb04 import alias_period, check_first_honest_column, check_predicted_wavelength
from pe_lessons.plots import apparent_period, reduce_table

from .junk import JUNK


def test_predicted_wavelength():
    want = 2 * math.pi * 500000**0.5
    assert check_predicted_wavelength(want, 64, 128, 500000).ok
    assert check_predicted_wavelength(None, 64, 128, 500000).message == NOT_DONE
    assert "base 10000" in check_predicted_wavelength(2 * math.pi * 100, 64, 128, 500000).message
    assert "2π" in check_predicted_wavelength(want / (2 * math.pi), 64, 128, 500000).message
    assert "column index" in check_predicted_wavelength(2 * math.pi * 500000, 64, 128, 500000).message
    assert not check_predicted_wavelength("4443", 64, 128, 500000).ok


def test_first_honest_column():
    assert check_first_honest_column(28, 45000, 300, 64).ok
    assert "Nyquist" in check_first_honest_column(24, 45000, 300, 64).message  # the one-pixel rule
    assert "pair" in check_first_honest_column(29, 45000, 300, 64).message
    assert "aliases" in check_first_honest_column(3, 45000, 300, 64).message
    assert "earlier" in check_first_honest_column(40, 45000, 300, 64).message
    assert not check_first_honest_column(2.0, 45000, 300, 64).ok
    assert check_first_honest_column(None, 45000, 300, 64).message == NOT_DONE


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


# ---------------------------------------------------------------- 04: a base for a long context
def test_context_base():
    from pe_lessons.exercises.nb04 import check_context_base, context_base

    want = context_base(1_000_000, 128)
    lam = 2 * math.pi * want ** (126 / 128)  # the slowest pair's wavelength
    assert abs(lam - 1_000_000) < 1e-6 * 1_000_000
    assert check_context_base(want).ok and check_context_base(round(want, -2)).ok
    assert check_context_base(np.float64(want)).ok and check_context_base(torch.tensor(want)).ok
    assert check_context_base(int(want)).ok
    assert "d_model/2 − 1" in check_context_base(1_000_000 / (2 * math.pi)).message
    assert "2π" in check_context_base(1_000_000 ** (128 / 126)).message
    assert "upside down" in check_context_base((1_000_000 / (2 * math.pi)) ** (126 / 128)).message
    assert "wavelength is" in check_context_base(500_000).message
    assert "above 1" in check_context_base(0.5).message
    assert not check_context_base(want * 1.02).ok  # 3 significant digits


@pytest.mark.parametrize("answer", JUNK)
def test_context_base_never_raises_and_never_passes_junk(answer):
    from pe_lessons.exercises.nb04 import check_context_base

    feedback = check_context_base(answer)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message
