"""Checkers of notebook 09 (T5 bucket, ALiBi slopes, rotary's reach, T5 scores): right answers pass in any
ordinary type and at the printed precision, the usual slips are named without the answer, any input gets
feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pe_lessons.exercises import nb09
from pe_lessons.relative import alibi_slopes, t5_relative_bucket


def test_t5_bucket_checker():
    want = int(t5_relative_bucket(20, num_buckets=16, max_distance=64))
    assert want == 14
    for answer in (14, 14.0, np.int64(14), torch.tensor(14), torch.tensor(14.0)):
        assert nb09.check_t5_bucket(answer).ok, answer
    assert nb09.check_t5_bucket(int(t5_relative_bucket(-40)), offset=-40, num_buckets=32, max_distance=128).ok
    messages = {
        "side": nb09.check_t5_bucket(int(t5_relative_bucket(-20, num_buckets=16, max_distance=64))).message,
        "causal": nb09.check_t5_bucket(
            int(t5_relative_bucket(-20, bidirectional=False, num_buckets=16, max_distance=64))
        ).message,
        "range": nb09.check_t5_bucket(40).message,
        "exact first": nb09.check_t5_bucket(8 + 2).message,
    }
    assert "side" in messages["side"] and "causal" in messages["causal"] and "only 16 buckets" in messages["range"]
    assert "exact" in messages["exact first"]
    for message in messages.values():
        assert "14" not in message  # hints never give the answer
    assert nb09.check_t5_bucket(None).message.startswith("Not answered")
    assert not nb09.check_t5_bucket(14.5).ok and not nb09.check_t5_bucket("14").ok


def test_alibi_slopes_checker():
    want = alibi_slopes(6).tolist()
    assert nb09.check_alibi_slopes(want).ok and nb09.check_alibi_slopes(alibi_slopes(6)).ok
    assert nb09.check_alibi_slopes(np.array(want)).ok and nb09.check_alibi_slopes(tuple(want)).ok
    assert nb09.check_alibi_slopes([round(v, 4) for v in want]).ok  # typed at 4 decimals
    assert nb09.check_alibi_slopes(alibi_slopes(8).tolist(), n_heads=8).ok
    assert "wrong order" in nb09.check_alibi_slopes(sorted(want)).message
    assert "power-of-two rule" in nb09.check_alibi_slopes([2 ** (-8 * h / 6) for h in range(1, 7)]).message
    assert "first slopes of 8 heads" in nb09.check_alibi_slopes([2.0**-h for h in range(1, 7)]).message
    assert not nb09.check_alibi_slopes("0.5").ok and not nb09.check_alibi_slopes([0.5] * 5).ok


def test_rotary_reach_checker():
    want = math.pi * 2e5**0.25
    for answer in (want, round(want), round(want, 1), np.float32(want), torch.tensor(want), int(want)):
        assert nb09.check_rotary_reach(answer, base=2e5, head_dim=8).ok, answer
    slips = {
        "exponent": math.pi * 2e5 ** (1 / 8),
        "2π": 2 * math.pi * 2e5**0.25,
        "pair 2": math.pi * 2e5**0.5,
        "1 radian": 2e5**0.25,
    }
    for slip, value in slips.items():
        feedback = nb09.check_rotary_reach(value, base=2e5, head_dim=8)
        assert not feedback.ok and f"{round(want)}" not in feedback.message, slip
    assert "Half a turn" in nb09.check_rotary_reach(slips["2π"], base=2e5, head_dim=8).message
    assert nb09.check_rotary_reach(None, base=2e5, head_dim=8).message.startswith("Not answered")
    assert nb09.rotary_reach(1e4, 8) == pytest.approx(math.pi * 10)


def _good(q, k, table, max_distance):
    seq = q.shape[1]
    relative = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]
    buckets = t5_relative_bucket(relative, bidirectional=False, num_buckets=table.shape[0], max_distance=max_distance)
    return q @ k.transpose(-1, -2) + table[buckets].permute(2, 0, 1)


def _buggy(scaled, flipped, bidirectional=False):
    def fn(q, k, table, max_distance):
        seq = q.shape[1]
        relative = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]
        if flipped:
            relative = -relative
        buckets = t5_relative_bucket(
            relative, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance
        )
        dots = q @ k.transpose(-1, -2)
        return (dots / math.sqrt(q.shape[-1]) if scaled else dots) + table[buckets].permute(2, 0, 1)

    return fn


def test_t5_scores_checker():
    assert nb09.check_t5_scores(_good).ok
    assert nb09.check_t5_scores(lambda q, k, t, m: _good(q, k, t, m).float()).ok  # float32 is fine
    assert "T5Attention" in nb09.check_t5_scores(_buggy(scaled=True, flipped=False)).message
    for fn in (_buggy(scaled=True, flipped=True), _buggy(scaled=False, flipped=True)):
        assert "key − query" in nb09.check_t5_scores(fn).message
    assert "[2, 5, 5]" in nb09.check_t5_scores(lambda q, k, t, m: torch.zeros(3)).message
    assert "tensor" in nb09.check_t5_scores(lambda q, k, t, m: [[0.0]]).message
    assert "ZeroDivisionError" in nb09.check_t5_scores(lambda q, k, t, m: 1 / 0).message
    hard_coded = _good(*[torch.zeros(2, 5, 4)] * 2, torch.zeros(8, 2), 16)
    assert not nb09.check_t5_scores(lambda q, k, t, m: hard_coded).ok
    assert nb09.check_t5_scores(None).message.startswith("Not answered")


def _bidirectional(scaled, flipped):
    """The encoder's (bidirectional) buckets, with or without the other slips."""
    return _buggy(scaled, flipped, bidirectional=True)


def test_t5_scores_checker_names_the_encoders_buckets():
    for scaled in (False, True):
        for flipped in (False, True):
            feedback = nb09.check_t5_scores(_bidirectional(scaled, flipped))
            assert not feedback.ok and "encoder's buckets" in feedback.message, (scaled, flipped)
            assert "bidirectional=False" not in feedback.message
    assert nb09.check_t5_scores(_good).ok


@pytest.mark.parametrize(
    "bad", [None, ..., float("nan"), float("inf"), -1, 99, "12", [], {}, [12], torch.tensor([1, 2]), object(), True]
)
def test_nb09_checkers_never_raise_and_never_pass_garbage(bad):
    for feedback in (
        nb09.check_t5_bucket(bad),
        nb09.check_alibi_slopes(bad),
        nb09.check_alibi_slopes([bad] * 6),
        nb09.check_alibi_slopes(alibi_slopes(6).tolist(), n_heads=bad),
        nb09.check_rotary_reach(bad, base=2e5, head_dim=8),
        nb09.check_t5_scores(bad),
    ):
        assert not feedback.ok and feedback.message


def test_base_for_reach_checker():
    want = (80 / math.pi) ** 4
    for answer in (want, round(want), float(f"{want:.3g}"), np.float64(want), torch.tensor(want)):
        assert nb09.check_base_for_reach(answer, offset=80, head_dim=8).ok, answer
    for slip, value in {"exponent": (80 / math.pi) ** 8, "2π": (80 / (2 * math.pi)) ** 4, "no π": 80.0**4}.items():
        feedback = nb09.check_base_for_reach(value, offset=80, head_dim=8)
        assert not feedback.ok and f"{want:.3g}" not in feedback.message, slip
    assert nb09.check_base_for_reach(None, offset=80, head_dim=8).message.startswith("Not answered")
    for bad in ("4e5", float("nan"), [want, want], True):
        assert not nb09.check_base_for_reach(bad, offset=80, head_dim=8).ok


def test_alibi_far_share_checker():
    right = nb09.alibi_far_share(2.0**-3, far=12)  # head 6 of 6: slope 1/8, one of the two interleaved slopes
    assert abs(right - 0.223) < 0.001
    for answer in (right, round(right, 2), np.float32(right), torch.tensor(right)):
        assert nb09.check_alibi_far_share(answer).ok, answer
    assert not nb09.check_alibi_far_share("0.22").ok
    assert "no bias" in nb09.check_alibi_far_share(52 / 64).message
    assert "power of two" in nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-8, far=12)).message
    assert "steepest head" in nb09.check_alibi_far_share(nb09.alibi_far_share(0.5, far=12)).message
    assert "near keys" in nb09.check_alibi_far_share(1 - right).message
    assert nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-6, far=16), head=3, far=16).ok  # other settings
    generic = nb09.check_alibi_far_share(0.5)
    assert not generic.ok and "0.22" not in generic.message and "1/8" not in generic.message
    assert not nb09.check_alibi_far_share(None).ok and not nb09.check_alibi_far_share(float("nan")).ok


def test_alibi_far_share_checker_review_fixes():
    right = nb09.alibi_far_share(2.0**-3, far=12)
    none = nb09.check_alibi_far_share(None)
    assert not none.ok and none.message.startswith("Not answered")  # like the other exercises, not "got None"
    for answer in ([right], (round(right, 2),), [torch.tensor(right)]):  # one number in a list, as the docstring says
        assert nb09.check_alibi_far_share(answer).ok, answer
    assert not nb09.check_alibi_far_share([right, right]).ok
    # sorting the 6 slopes and taking the sixth gives 2^-8: the naive rule's slope and the flattest head at once
    sorted_sixth = sorted(alibi_slopes(6).tolist(), reverse=True)[5]
    assert sorted_sixth == 2.0**-8
    message = nb09.check_alibi_far_share(nb09.alibi_far_share(sorted_sixth, far=12)).message
    assert "flattest" in message and "power of two" in message and "sorted" in message
    assert "1/8" not in message and "2^-3" not in message and "0.22" not in message  # no answer given away


def test_one_element_list_is_the_number_in_every_checker():
    """Review 2: Ex 2 took [0.223] while Ex 1 refused [14] and Ex 3 refused [420494.6]; now all take one."""
    base = (80 / math.pi) ** 4
    assert nb09.check_t5_bucket([14]).ok and nb09.check_t5_bucket((14,)).ok
    assert nb09.check_t5_bucket([torch.tensor(14)]).ok and nb09.check_t5_bucket(torch.tensor([14])).ok
    assert nb09.check_base_for_reach([base], offset=80, head_dim=8).ok
    assert nb09.check_base_for_reach([float(f"{base:.1f}")], offset=80, head_dim=8).ok
    assert nb09.check_rotary_reach([math.pi * 2e5**0.25], base=2e5, head_dim=8).ok
    assert nb09.check_alibi_far_share([nb09.alibi_far_share(2.0**-3, far=12)]).ok
    for wrong in ([13], [14, 14], [[14]]):
        assert not nb09.check_t5_bucket(wrong).ok, wrong
    assert not nb09.check_base_for_reach([base, base], offset=80, head_dim=8).ok
    assert "Half a turn" in nb09.check_base_for_reach([(80 / (2 * math.pi)) ** 4], offset=80, head_dim=8).message


def test_alibi_far_share_names_two_more_slips():
    """Review 2: "more than 12 back" (0.197) and the 8-head slopes the first four heads already have (head 6 =
    1/16, 0.4625) got only the generic hint."""
    right = nb09.alibi_far_share(2.0**-3, far=12)
    more_than = nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-3, far=13))
    assert not more_than.ok and "more than 12 back" in more_than.message and "12 or more" in more_than.message
    repeated = nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-4, far=12))
    assert not repeated.ok and "already" in repeated.message and "8-head" in repeated.message
    assert not nb09.check_alibi_far_share(round(nb09.alibi_far_share(2.0**-4, far=12), 2)).ok
    for message in (more_than.message, repeated.message):
        assert f"{right:.2f}" not in message and "1/8" not in message and "2^-3" not in message
    # head 5 of 6 (an added head too): its repeated slope is 1/4, not what head 6's slip gives
    head5 = nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-2, far=12), head=5)
    assert not head5.ok and "already" in head5.message
    assert nb09.check_alibi_far_share(nb09.alibi_far_share(2.0**-1, far=12), head=5).ok


_EX2_WANT = nb09.alibi_far_share(alibi_slopes(6)[5].item(), 64, 12)
_EX3_WANT = (80 / math.pi) ** 4


@pytest.mark.parametrize(
    "check, answer, hint, answer_text",
    [
        # Ex 1: T5's defaults' "· 8" kept with 16 buckets (log part spread over all 8 buckets of a side): 15
        (nb09.check_t5_bucket, 15, "logarithmic buckets only", ["14"]),
        # Ex 2: a percentage, and head 6 of 8 heads (the power of two above 6, slope 1/64)
        (nb09.check_alibi_far_share, round(100 * _EX2_WANT, 1), "percentage", [f"{_EX2_WANT:.2f}"]),
        (nb09.check_alibi_far_share, round(nb09.alibi_far_share(2.0**-6, 64, 12), 4), "8 heads", [f"{_EX2_WANT:.2f}"]),
        # Ex 3: a right derivation rounded to one figure (4e5: π/θ_1 = 79.0) or cut short (4.1e5); pair 2's base
        (nb09.check_base_for_reach, 4e5, "Close", [f"{_EX3_WANT:.2g}", f"{_EX3_WANT:.3g}"]),
        (nb09.check_base_for_reach, 4.1e5, "Close", [f"{_EX3_WANT:.2g}", f"{_EX3_WANT:.3g}"]),
        (nb09.check_base_for_reach, 4.4e5, "Close", [f"{_EX3_WANT:.2g}", f"{_EX3_WANT:.3g}"]),
        (nb09.check_base_for_reach, (80 / math.pi) ** 2, "pair 2", [f"{_EX3_WANT:.2g}"]),
        (nb09.check_base_for_reach, 648, "pair 2", [f"{_EX3_WANT:.2g}"]),
    ],
)
def test_slips_named_by_review_3_get_their_own_hints(check, answer, hint, answer_text):
    kwargs = {"offset": 80, "head_dim": 8} if check is nb09.check_base_for_reach else {}
    feedback = check(answer, **kwargs)
    assert not feedback.ok and hint in feedback.message, feedback.message
    assert not any(text in feedback.message for text in answer_text)  # the hint does not give the answer away


def test_base_for_reach_close_hint_only_near_the_answer():
    assert nb09.check_base_for_reach(4.2e5, offset=80, head_dim=8).ok  # two significant figures
    assert not nb09.check_base_for_reach(3e5, offset=80, head_dim=8).message.startswith("Close")


@pytest.mark.parametrize(
    "check, answer, kwargs, hints, answer_text",
    [
        # Ex 1: 15 is also the log part rounded up (4 + ⌈2.32⌉ + 8): both slips named
        (nb09.check_t5_bucket, 15, {}, ["Rounded up", "logarithmic buckets only", "denominator"], ["14"]),
        # Ex 1: T5's default max_distance 128 kept (13), T5's default formula kept as written (8 + ⌊…⌋ + 8 = 18)
        (nb09.check_t5_bucket, 13, {}, ["max_distance 128", "max_distance is 64", "denominator"], ["14"]),
        (nb09.check_t5_bucket, 18, {}, ["default formula", "4 of them exact"], ["14"]),
        # Ex 2: a right share at one decimal (0.2, within 0.005 of the d ≥ 13 share 0.197), a wrong percentage
        (nb09.check_alibi_far_share, 0.2, {}, ["two decimals"], [f"{_EX2_WANT:.2f}"]),
        (nb09.check_alibi_far_share, 79.3, {}, ["percentage"], [f"{_EX2_WANT:.2f}"]),
        # Ex 3: 648 = (80/π)² is pair 2's base and also d = 4 (the pairs or heads taken for head_dim)
        (nb09.check_base_for_reach, 648, {"offset": 80, "head_dim": 8}, ["pair 2", "d = 4"], [f"{_EX3_WANT:.2g}"]),
        (nb09.check_rotary_reach, math.pi * 2e5**0.5, {"base": 2e5, "head_dim": 8}, ["pair 2", "d = 4"], ["67"]),
    ],
)
def test_slips_named_by_review_4_get_every_cause(check, answer, kwargs, hints, answer_text):
    feedback = check(answer, **kwargs)
    assert not feedback.ok and all(hint in feedback.message for hint in hints), feedback.message
    assert not any(text in feedback.message for text in answer_text)  # the hint does not give the answer away


@pytest.mark.parametrize("answer", [4.3e5, 4.4e5, 4.5e5, float(f"{(80 / 3.1) ** 4:.2g}")])
def test_base_for_reach_close_hint_asks_two_figures_only_of_other_answers(answer):
    """Review 4: a wrong answer given with two significant figures was told to give two significant figures."""
    feedback = nb09.check_base_for_reach(answer, offset=80, head_dim=8)
    assert not feedback.ok and "Close" in feedback.message and "two significant" not in feedback.message
    for other in (4e5, 4.35e5):  # one figure, or three: told to give two or more, with more digits on the way
        assert "two significant" in nb09.check_base_for_reach(other, offset=80, head_dim=8).message


@pytest.mark.parametrize("answer", [np.float32(0.2), torch.tensor(0.2), 0.2])
def test_alibi_far_share_one_decimal_in_float32(answer):
    """Review 5: float32 0.2 (a NumPy scalar or a 0-d tensor) missed the '==' test and got the d > 12 slip's hint."""
    message = nb09.check_alibi_far_share(answer).message
    assert "two decimals" in message and f"{_EX2_WANT:.2f}" not in message, message


def test_alibi_far_share_percentage_only_for_percentages():
    """Review 5: any value in (1, 100] was called a percentage, e.g. the far weights never normalised (1.90)."""
    slope = alibi_slopes(6).tolist()[5]
    unnormalised = sum(math.exp(-slope * d) for d in range(12, 64))
    assert 1.85 < unnormalised < 1.95  # the slip the review names
    message = nb09.check_alibi_far_share(round(unnormalised, 2)).message
    assert "percentage" not in message and "without normalising" in message, message
    for other in (1.5, 12, 52):  # a share above 1 that is no percentage of a known share
        message = nb09.check_alibi_far_share(other).message
        assert "percentage" not in message and "normalise over all 64 keys" in message, message
    for percent in (round(100 * _EX2_WANT, 1), round(100 * (1 - _EX2_WANT), 1)):  # the answer, or a slip, in %
        assert "percentage" in nb09.check_alibi_far_share(percent).message


def test_t5_bucket_numerator_slip_is_named():
    """Review 6: 15 is also ln(d) for ln(d/4) in the numerator (4 + ⌊4.32⌋, capped at 7, + 8); its hint named
    only the denominator. A slip in the numerator alone, at another offset, gets its own hint."""
    slip = 8 + min(4 + math.floor(math.log(20) / math.log(16) * 4), 7)
    assert slip == 15
    message = nb09.check_t5_bucket(slip).message
    assert "ln(d/4)" in message and "numerator" in message and "14" not in message, message
    # offset −9 (a key before the query): 4 + ⌊ln 9 / ln 16 · 4⌋ = 7, where ln(9/4) gives 4 + 1 = 5
    alone = nb09.check_t5_bucket(4 + math.floor(math.log(9) / math.log(16) * 4), offset=-9)
    assert not alone.ok and "numerator" in alone.message and "ln(d/4)" in alone.message, alone.message


@pytest.mark.parametrize("answer", [2.2, 2.23, np.float32(2.2)])
def test_alibi_far_share_misplaced_decimal_point(answer):
    """Review 6: 2.2 (0.22 with the decimal point one place off) was asked whether it normalised over all keys."""
    message = nb09.check_alibi_far_share(answer).message
    assert "decimal point" in message and "normalise" not in message and f"{_EX2_WANT:.2f}" not in message, message


@pytest.mark.parametrize("answer", [0.8, np.float32(0.8), torch.tensor(0.8)])
def test_alibi_far_share_slip_at_one_decimal(answer):
    """Review 6: 0.8, the naive (and flattest) head's 0.793 at one decimal, got only the generic 'Not the share'."""
    naive = nb09.alibi_far_share(2.0**-8, 64, 12)
    assert round(naive, 1) == 0.8 and abs(naive - 0.8) > 0.005  # outside the naive hint's own tolerance
    message = nb09.check_alibi_far_share(answer).message
    assert "two decimals" in message and f"{_EX2_WANT:.2f}" not in message, message
    assert "two decimals" not in nb09.check_alibi_far_share(0.5).message  # 0.463 (a slip) is not 0.5 at one decimal
