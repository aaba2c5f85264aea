"""Checkers of notebook 04: right answers pass, the usual mistakes get targeted feedback."""

import math

from pe_lessons.exercises._feedback import NOT_DONE
from pe_lessons.exercises.nb04 import check_first_honest_column, check_predicted_wavelength


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
