"""Every checker accepts its solution, rejects the typical wrong answers with targeted feedback,
and says "not answered yet" for the placeholder."""

import math

import torch

from pe_lessons import exercises as ex
from pe_lessons import sinusoidal_table


def test_feedback_prints_as_one_line_and_is_truthy_when_ok():
    assert str(ex.Feedback(True, "fine")) == "✅ fine" and bool(ex.Feedback(True, "x"))
    assert repr(ex.Feedback(False, "no")) == "❌ no" and not ex.Feedback(False, "x")


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


def textbook32(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    angles = pos * torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)


def test_check_table_function():
    assert ex.check_table_function(lambda n, d: sinusoidal_table(n, d)).ok
    cases = [
        (textbook32, "rounded to float32"),
        (lambda n, d: textbook32(n, d)[:, 0::2].repeat_interleave(2, dim=1), "sin where cos belongs"),
        (lambda n, d: textbook32(n, d).view(n, -1, 2).flip(-1).flatten(-2), "swapped"),
        (lambda n, d: torch.cat([textbook32(n, d)[:, 0::2], textbook32(n, d)[:, 1::2]], 1), "concatenated"),
        (lambda n, d: textbook32(n, d)[:, : d // 2], "Shape"),
        (lambda n, d: sinusoidal_table(n, d).long(), "floating dtype"),
        (lambda n, d: sinusoidal_table(n, d).tolist(), "torch.Tensor"),
        (lambda n, d: sinusoidal_table(n, d, base=100.0), "frequencies"),
    ]
    for wrong, words in cases:
        feedback = ex.check_table_function(wrong)
        assert not feedback.ok and words in feedback.message, (words, feedback)
    assert "Not answered" in ex.check_table_function(None).message
