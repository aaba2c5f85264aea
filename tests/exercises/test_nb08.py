"""Checkers of notebook 08 (bytes moved, predicted time):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import pytest


def test_nb08_checkers_accept_the_answer_and_name_the_likely_mistake():
    from pe_lessons.exercises import nb08

    n = 8 * 512 * 768
    assert not nb08.check_bytes_moved(None).ok and "Not answered" in nb08.check_bytes_moved(None).message
    assert nb08.check_bytes_moved(4 * (2 * n + 768)).ok
    assert "elements" in nb08.check_bytes_moved(2 * n + 768).message
    assert "one direction" in nb08.check_bytes_moved(4 * n).message
    assert "broadcast" in nb08.check_bytes_moved(12 * n).message
    assert "bits" in nb08.check_bytes_moved(32 * (2 * n + 768)).message
    assert "number" in nb08.check_bytes_moved("a lot").message
    q = 32 * 4096 * 128
    fused, eager = 2 * q * 2 / 2e12 * 1e6, 10 * q * 2 / 2e12 * 1e6
    assert nb08.check_predicted_time(fused).ok and nb08.check_predicted_time(eager, kernel="eager").ok
    assert "eager" in nb08.check_predicted_time(eager).message
    assert "fused" in nb08.check_predicted_time(fused, kernel="eager").message
    assert (
        "2 bytes" in nb08.check_predicted_time(2 * fused).message
        or "bfloat16" in nb08.check_predicted_time(2 * fused).message
    )
    assert "unit" in nb08.check_predicted_time(fused / 1e6).message
    assert not nb08.check_predicted_time(None).ok
    with pytest.raises(ValueError):
        nb08.check_predicted_time(1.0, kernel="slow")


def test_nb08_checkers_accept_numpy_numbers():
    np = pytest.importorskip("numpy")
    from pe_lessons.exercises import nb08

    n = np.prod(nb08.BIAS_SHAPE)  # a NumPy integer, as a student computing with np.prod gets
    assert nb08.check_bytes_moved(4 * (2 * n + 768)).ok
    assert nb08.check_predicted_time(np.float64(2 * np.prod(nb08.ROPE_SHAPE) * 2 / 2e12 * 1e6)).ok
    assert not nb08.check_bytes_moved(np.bool_(True)).ok


def test_check_bytes_moved_counts_the_bias_and_accepts_rounded_counts():
    from pe_lessons.exercises import nb08

    n = 8 * 512 * 768
    want = 4 * (2 * n + 768)
    forgot_bias = nb08.check_bytes_moved(8 * n)
    assert not forgot_bias.ok and "bias" in forgot_bias.message
    for rounded in (25.2e6, 25.17e6, 25.169e6, 25_168_900, float(want)):
        assert nb08.check_bytes_moved(rounded).ok, rounded
    assert "25.2 MB" in nb08.check_bytes_moved(want).message
    for off in (25.1e6, 25.3e6, 25e6, want + 100):  # not the count, and not it rounded
        assert not nb08.check_bytes_moved(off).ok, off


def test_check_conversion_traffic():
    from pe_lessons.exercises import nb08

    check = nb08.check_conversion_traffic
    assert check(9).ok and check(9.0).ok and check(torch_scalar(9.0)).ok
    assert check(5, low_bytes=2, work_bytes=4).ok  # bf16 through float32: 20 bytes for 4
    assert "float32 working copy" in check(5).message  # section 4's case, not this one
    assert "kernels" in check(3).message
    assert "per element" in check(36).message
    assert "compulsory" in check(2.25).message
    assert "Not answered" in check(None).message
    for wrong in (6, 7, 18, 1):
        feedback = check(wrong)
        assert not feedback.ok and "9" not in feedback.message  # the hint never gives the answer
    with pytest.raises(ValueError):
        check(9, low_bytes=4, work_bytes=2)


def torch_scalar(value):
    import torch

    return torch.tensor(value)
