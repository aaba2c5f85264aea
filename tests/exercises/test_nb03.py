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
    assert "Too strict" in check_bug_test(lambda t: bool((t[0] == 7).all()), "sin_only").message
    assert "one True/False" in check_bug_test(lambda t: t[0] == 0, "sin_only").message
    assert "raised ZeroDivisionError" in check_bug_test(lambda t: 1 / 0, "sin_only").message
    with pytest.raises(ValueError, match="bug must be"):
        check_bug_test(pe0, "paper")

    assert diagnose(mystery_table()).variant == "shifted_cos_exponent"
    assert check_mystery("shifted_cos_exponent").ok
    for name in NAMES:
        if name != "shifted_cos_exponent":
            assert "cheap test" in check_mystery(name).message
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
    assert "nothing was dropped" in check_dropout_fix(lambda x, table, p, training: x + table[: x.shape[1]]).message


def test_a_correct_test_returning_numpy_bool_is_accepted():
    feedback = exercises.check_bug_test(lambda t: np.all(t[0, 1::2].numpy() == 1.0), "sin_only")
    assert feedback.ok, feedback
    wrong = exercises.check_bug_test(lambda t: np.float64(1.0), "sin_only")
    assert not wrong.ok and "return True" in wrong.message
