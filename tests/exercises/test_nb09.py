"""Checkers of notebook 09 (T5 bucket, ALiBi slopes, first to fall):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import pytest
import torch

from pe_lessons.relative import alibi_slopes, t5_relative_bucket


def test_nb09_checkers_accept_the_answers_and_name_the_mistakes():
    from pe_lessons.exercises.nb09 import check_alibi_slopes, check_first_to_fall, check_t5_bucket

    assert check_t5_bucket(12).ok and check_t5_bucket(torch.tensor(12)).ok and check_t5_bucket(12.0).ok
    assert "Sign" in check_t5_bucket(28).message  # the bucket of +40
    assert "causal" in check_t5_bucket(int(t5_relative_bucket(-40, bidirectional=False))).message
    assert "rounds down" in check_t5_bucket(13).message
    assert "8 exact buckets" in check_t5_bucket(4).message
    assert check_t5_bucket(None).message.startswith("Not answered")
    assert check_alibi_slopes(alibi_slopes(6).tolist()).ok and check_alibi_slopes(alibi_slopes(6)).ok
    assert check_alibi_slopes(alibi_slopes(8).tolist(), n_heads=8).ok
    assert "wrong order" in check_alibi_slopes(sorted(alibi_slopes(6).tolist())).message
    assert "2^(-8h/6)" in check_alibi_slopes([2 ** (-8 * h / 6) for h in range(1, 7)]).message
    assert "first slopes of 8 heads" in check_alibi_slopes([2.0**-h for h in range(1, 7)]).message
    assert check_first_to_fall("sinusoidal", "a").ok and check_first_to_fall(" Sinusoidal", "A").ok
    assert "wrong reason" in check_first_to_fall("sinusoidal", "b").message
    assert "cannot run" in check_first_to_fall("learned", "c").message
    assert not check_first_to_fall("alibi", "a").ok


@pytest.mark.parametrize(
    "bad", [None, ..., float("nan"), float("inf"), -1, 99, "12", [], {}, [12], torch.tensor([1, 2]), object(), True]
)
def test_nb09_checkers_never_raise_and_never_pass_garbage(bad):
    from pe_lessons.exercises.nb09 import check_alibi_slopes, check_first_to_fall, check_t5_bucket

    for feedback in (
        check_t5_bucket(bad),
        check_alibi_slopes(bad),
        check_alibi_slopes([bad] * 6),
        check_alibi_slopes(alibi_slopes(6).tolist(), n_heads=bad),
        check_first_to_fall(bad, "a"),
        check_first_to_fall("sinusoidal", bad),
    ):
        assert not feedback.ok and feedback.message
