"""Checkers of notebook 03 (the bug test, the mystery variant, the dropout fix):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pe_lessons import exercises, sinusoidal_table
from pe_lessons.variants import CHEAP_TESTS, VARIANTS, diagnose

NAMES = list(VARIANTS)


# ---------------------------------------------------------------- exercise checkers of notebook 03
def test_nb03_checkers():
    import torch.nn.functional as F

    from pe_lessons.exercises.nb03 import check_bug_test, check_dropout_fix, check_mystery, mystery_table

    pe0 = CHEAP_TESTS["PE(0) = [0,1,0,1,…]"]
    freq = CHEAP_TESTS["frequencies = base^(-2i/d)"]
    assert not check_bug_test(None, "sin_only").ok and "Not answered" in check_bug_test(None, "sin_only").message
    ok = check_bug_test(pe0, "sin_only")
    assert ok.ok and "doubled_exponent" in ok.message and "slip through" in ok.message
    miss = check_bug_test(pe0, "doubled_exponent")
    assert not miss.ok and "frequencies" in miss.message
    assert check_bug_test(freq, "doubled_exponent").ok
    assert "every variant" in check_bug_test(CHEAP_TESTS["matches float64 formula"], "column_exponent").message
    strict = check_bug_test(
        lambda t: torch.equal(t, sinusoidal_table(*t.shape, dtype=t.dtype) + 0 * t + (t - t)), "sin_only"
    )
    assert strict.ok  # exact comparison with our own table of the same dtype is fine: paper is sinusoidal_table
    assert "print the two things" in check_bug_test(lambda t: bool((t[0] == 7).all()), "sin_only").message
    too_strict = check_bug_test(lambda t: t.dtype == torch.float64 or bool(t[0, 0] == 0.5), "sin_only")
    assert "Too strict" in too_strict.message
    assert "one True/False" in check_bug_test(lambda t: t[0] == 0, "sin_only").message
    assert "raised ZeroDivisionError" in check_bug_test(lambda t: 1 / 0, "sin_only").message
    with pytest.raises(ValueError, match="bug must be"):
        check_bug_test(pe0, "paper")

    assert diagnose(mystery_table()).variant == "shifted_cos_exponent"
    omega7 = 10000 ** (-7 / 16)
    assert check_mystery("shifted_cos_exponent", omega7).ok
    assert check_mystery("shifted_cos_exponent", np.float32(round(omega7, 5))).ok
    assert "second part" in check_mystery("shifted_cos_exponent").message
    assert "paper's ω_3" in check_mystery("shifted_cos_exponent", 10000 ** (-6 / 16)).message
    assert "wavelength" in check_mystery("shifted_cos_exponent", 2 * 3.14159265 / omega7).message
    assert not check_mystery("shifted_cos_exponent", omega7 * 1.02).ok
    wrong = {check_mystery(name, omega7).message.replace(name, "X") for name in NAMES if name != "shifted_cos_exponent"}
    assert len(wrong) == 1  # a wrong name learns nothing that narrows the list (no trial and error)
    assert "variant names" in check_mystery("cos").message and not check_mystery(None).ok
    assert (
        "as a string" in check_mystery(["sin_only"]).message
        and "as a string" in check_mystery(VARIANTS["sin_only"]).message
    )

    bug = check_dropout_fix(lambda x, table, p, training: F.dropout(x + table[: x.shape[1]], p=p))
    assert not bug.ok and "training=training" in bug.message
    assert check_dropout_fix(
        lambda x, table, p, training: F.dropout(x + table[: x.shape[1]], p=p, training=training)
    ).ok
    assert "never runs" in check_dropout_fix(lambda x, table, p, training: x + table[: x.shape[1]]).message
    table_only = check_dropout_fix(
        lambda x, table, p, training: x + F.dropout(table[: x.shape[1]], p=p, training=training)
    )
    assert not table_only.ok and "on the table alone" in table_only.message


def test_a_correct_test_returning_numpy_bool_is_accepted():
    feedback = exercises.check_bug_test(lambda t: np.all(t[0, 1::2].numpy() == 1.0), "sin_only")
    assert feedback.ok, feedback
    wrong = exercises.check_bug_test(lambda t: np.float64(1.0), "sin_only")
    assert not wrong.ok and "return True" in wrong.message


def test_the_source_of_the_mystery_does_not_name_it():
    import inspect

    from pe_lessons.exercises.nb03 import mystery_table

    assert not any(name in inspect.getsource(mystery_table) for name in NAMES if name != "paper")


def test_a_frequency_test_that_reads_row_100_is_caught():
    from pe_lessons.exercises.nb03 import check_bug_test

    def planted(t):  # the notebook's planted test: asin at row 100 wraps, and small tables have no row 100
        n, d = t.shape
        freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return torch.allclose(torch.asin(t[100, 0::2].double()) / 100, freqs, atol=1e-5)

    assert "IndexError" in check_bug_test(planted, "doubled_exponent").message

    def padded(t):  # the half fix: no more IndexError, still the wrapped angles
        n, d = t.shape
        freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        row = min(100, n - 1)
        return torch.allclose(torch.asin(t[row, 0::2].double()) / row, freqs, atol=1e-5)

    feedback = check_bug_test(padded, "doubled_exponent")
    assert not feedback.ok and "rejects the correct table" in feedback.message and "print" in feedback.message

    def fixed(t):
        d = t.shape[1]
        freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        return torch.allclose(torch.asin(t[1, 0::2].double()), freqs, atol=1e-5)

    assert check_bug_test(fixed, "doubled_exponent").ok


class Planted(torch.nn.Module):  # the notebook's AddPositions: a new Dropout at every call
    def __init__(self, table, p):
        super().__init__()
        self.register_buffer("table", table, persistent=False)
        self.p = p

    def forward(self, x):
        return torch.nn.Dropout(self.p)(x + self.table[: x.shape[1]])


class Fixed(Planted):
    def __init__(self, table, p):
        super().__init__(table, p)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x):
        return self.drop(x + self.table[: x.shape[1]])


class Functional(Planted):
    def forward(self, x):
        return torch.nn.functional.dropout(x + self.table[: x.shape[1]], self.p, training=self.training)


class TableOnly(Fixed):
    def forward(self, x):
        return x + self.drop(self.table[: x.shape[1]])


class Never(Planted):
    def forward(self, x):
        return x + self.table[: x.shape[1]]


def test_dropout_module():
    from pe_lessons.exercises.nb03 import check_dropout_module

    assert check_dropout_module(Fixed).ok and check_dropout_module(Functional).ok
    planted = check_dropout_module(Planted)
    assert not planted.ok and "still runs at inference" in planted.message and "__init__" not in planted.message
    assert "on the table alone" in check_dropout_module(TableOnly).message
    assert "never runs" in check_dropout_module(Never).message
    assert "Not answered" in check_dropout_module(None).message
    assert "nn.Module" in check_dropout_module(lambda table, p: 3).message


@pytest.mark.parametrize("answer", [3, "AddPositions", lambda *a: None, lambda *a: 1 / 0, torch.nn.Module])
def test_dropout_module_never_raises_and_never_passes_junk(answer):
    from pe_lessons.exercises.nb03 import check_dropout_module

    feedback = check_dropout_module(answer)
    assert isinstance(feedback, exercises.Feedback) and not feedback.ok and feedback.message
