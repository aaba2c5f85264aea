"""Checkers of notebook 10 (NTK out-of-range pairs, NTK base, YaRN debug, stretch ratio):
right answers pass in any ordinary type, the usual slips get a hint without the answer, any input gets feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pe_lessons.exercises.nb10 import (
    NTK_BASE,
    OUT_OF_RANGE,
    STRETCH,
    YARN_PROBES,
    check_ntk_base,
    check_out_of_range,
    check_stretch_ratio,
    check_yarn_frequencies,
)
from pe_lessons.rotary import rope_frequencies, scaled_frequencies

from .junk import FUNCTION_JUNK, JUNK


def _out_of_range_by_scan():
    # found from the frequencies, not from the closed form the checker uses
    p = OUT_OF_RANGE
    d, L, s = p["head_dim"], p["train_len"], p["factor"]
    theta = rope_frequencies(d, p["base"])
    theta_ntk = rope_frequencies(d, p["base"] * s ** (d / (d - 2)))
    return [j for j in range(d // 2) if L * theta[j] < 2 * math.pi and s * L * theta_ntk[j] > L * theta[j] * (1 + 1e-9)]


def test_out_of_range():
    right = _out_of_range_by_scan()
    assert right == list(range(21, 31))
    for form in (right, tuple(right), set(right), range(right[0], right[-1] + 1), torch.tensor(right), np.array(right)):
        assert check_out_of_range(form).ok, form
    assert check_out_of_range([float(j) for j in right]).ok
    for wrong in (right + [31], [20] + right, right[1:], []):
        feedback = check_out_of_range(wrong)
        assert not feedback.ok and feedback.message
        assert str(right) not in feedback.message and f"{right[0]}…{right[-1]}" not in feedback.message
    assert "slowest" in check_out_of_range(right + [31]).message or "31" in check_out_of_range(right + [31]).message
    assert "completes a turn" in check_out_of_range([20] + right).message
    assert "missing" in check_out_of_range(right[1:]).message
    for some in ([], right[1:], right[:3]):  # the hint does not give away how many pairs are missing
        message = check_out_of_range(some).message
        assert "missing" in message and str(len(right) - len(some)) not in message, message
    assert "Not answered" in check_out_of_range(None).message
    for junk in [*JUNK, "21", 3, [1.5], [64]]:
        feedback = check_out_of_range(junk)
        assert not feedback.ok and feedback.message


def _smallest_ntk_factor_by_scan():
    # found by scanning s and computing ρ_j from the frequencies, not from the closed form the checker uses
    p = NTK_BASE
    d, L, n = p["head_dim"], p["train_len"], p["target_len"]
    theta = rope_frequencies(d, p["base"])
    never = L * theta / (2 * math.pi) < 1
    lo, hi = 1.0, 100.0
    for _ in range(60):  # bisection on "no pair out of range"
        mid = (lo + hi) / 2
        rho = n * rope_frequencies(d, p["base"] * mid ** (d / (d - 2))) / (L * theta)
        lo, hi = (lo, mid) if bool((rho[never] <= 1 + 1e-12).all()) else (mid, hi)
    return hi


def test_ntk_base_is_the_smallest_factor_with_no_pair_out_of_range():
    d = NTK_BASE["head_dim"]
    s = _smallest_ntk_factor_by_scan()
    assert 17.7 < s < 17.73  # more than twice the stretch, 8
    exact = NTK_BASE["base"] * s ** (d / (d - 2))
    for scale, base in (
        (s, exact),
        (round(s, 2), round(exact)),
        (round(s, 2), NTK_BASE["base"] * round(s, 2) ** (d / (d - 2))),  # the base of the rounded s
        (np.float32(s), np.int64(round(exact))),
        (torch.tensor(s), torch.tensor(exact)),
        (s, float(f"{exact:.4g}")),
    ):
        assert check_ntk_base(scale, base).ok, (scale, base)
    assert not check_ntk_base(s, exact * 1.01).ok
    # a one-element list is read as its element, as in exercise 4
    assert check_ntk_base([round(s, 2)], [round(exact)]).ok and check_ntk_base([s], exact).ok
    # a base rounded to three or four significant figures (0.2 % off) is close: asked for more digits, not told
    # that the formula is wrong
    for rounded in (188000, 1.88e5, round(exact, -3)):
        feedback = check_ntk_base(round(s, 2), rounded)
        assert not feedback.ok and "close" in feedback.message and "nearest whole" in feedback.message, rounded
        assert "188343" not in feedback.message and "section 3" not in feedback.message
    # a wrong exponent, (d+2)/d instead of d/(d-2), lands 0.11 % off (188136): close, but more digits cannot fix it
    wrong_exponent = NTK_BASE["base"] * round(s, 2) ** ((d + 2) / d)
    assert abs(wrong_exponent - 188136) < 2 and 1e-3 < abs(wrong_exponent / exact - 1) < 5e-3
    for given in (wrong_exponent, round(wrong_exponent)):
        feedback = check_ntk_base(round(s, 2), given)
        assert not feedback.ok and "exponent" in feedback.message and "more digits" not in feedback.message, given
        assert "188343" not in feedback.message and "d/(d-2)" not in feedback.message
    # the old exercise's answer (s = n/L and its base) is now wrong, with a hint that does not give s away
    stretch = NTK_BASE["target_len"] / NTK_BASE["train_len"]
    feedback = check_ntk_base(stretch, NTK_BASE["base"] * stretch ** (d / (d - 2)))
    assert not feedback.ok and "stretch" in feedback.message and "17.7" not in feedback.message
    # the slips: the critical pair off by one, the exponent 2j/d, too small, too large
    for wrong, words in (
        (stretch ** (94 / 66), "pair 33"),
        (stretch ** (94 / 70), "pair 35"),
        (stretch ** (96 / 68), "2j/(d-2)"),
        (12.0, "ρ > 1"),
        (25.0, "smaller s"),
    ):
        feedback = check_ntk_base(wrong, NTK_BASE["base"] * wrong ** (d / (d - 2)))
        assert not feedback.ok and words in feedback.message, (wrong, feedback.message)
        assert "17.7" not in feedback.message
    assert "s^((d-2)/d)" in check_ntk_base(s, NTK_BASE["base"] * s).message
    assert "upside down" in check_ntk_base(s, NTK_BASE["base"] * s ** ((d - 2) / d)).message
    assert "Not answered" in check_ntk_base(None, exact).message and "Not answered" in check_ntk_base(s, ...).message
    for junk in JUNK:
        if junk is None or junk is Ellipsis:
            continue
        assert not check_ntk_base(s, junk).ok and not check_ntk_base(junk, exact).ok


def _yarn(head_dim, base, factor, trained_len, *, reversed_ramp=False, dtype=torch.float64):
    theta = rope_frequencies(head_dim, base)

    def pair_for(turns):
        return head_dim * math.log(trained_len / (2 * math.pi * turns)) / (2 * math.log(base))

    low, high = max(math.floor(pair_for(32.0)), 0), min(math.ceil(pair_for(1.0)), head_dim - 1)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    if reversed_ramp:
        ramp = 1 - ramp
    return (theta * (1 - ramp) + theta / factor * ramp).to(dtype)


def test_yarn_frequencies():
    for head_dim, base, factor, trained_len in YARN_PROBES:  # the probes cover several head sizes
        rule = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained_len}
        torch.testing.assert_close(
            _yarn(head_dim, base, factor, trained_len), scaled_frequencies(head_dim, rule, base=base)[0]
        )
    assert len({p[0] for p in YARN_PROBES}) >= 3
    assert check_yarn_frequencies(_yarn).ok
    assert check_yarn_frequencies(lambda *a: _yarn(*a, dtype=torch.float32)).ok
    assert check_yarn_frequencies(lambda *a: _yarn(*a).tolist()).ok
    feedback = check_yarn_frequencies(lambda *a: _yarn(*a, reversed_ramp=True))
    assert not feedback.ok and "fastest pair" in feedback.message
    # on the toy probe pair 0 turns 16/2π ≈ 2.5 times, fewer than β_fast = 32: the hint must not say "many times"
    assert YARN_PROBES[0] == (16, 10000.0, 4.0, 16) and 16 / (2 * math.pi) < 32
    assert "should be kept" in feedback.message and "many times" not in feedback.message
    # hard-coded for the first probe only: caught on the others
    first = _yarn(*YARN_PROBES[0])
    assert not check_yarn_frequencies(lambda *a: first).ok
    assert "Not answered" in check_yarn_frequencies(None).message
    for junk in FUNCTION_JUNK + JUNK:
        feedback = check_yarn_frequencies(junk)
        assert not feedback.ok and feedback.message


def _stretch_rho():
    p = STRETCH
    rule = {
        "rope_type": "llama3",
        "factor": p["factor"],
        "low_freq_factor": p["low_freq_factor"],
        "high_freq_factor": p["high_freq_factor"],
        "original_max_position_embeddings": p["train_len"],
    }
    theta = rope_frequencies(p["head_dim"], p["base"])
    theta_rule = scaled_frequencies(p["head_dim"], rule, base=p["base"])[0]
    never = p["train_len"] * theta < 2 * math.pi
    divided = torch.isclose(theta / theta_rule, torch.tensor(p["factor"], dtype=torch.float64))
    return p["target_len"] * theta_rule / (p["train_len"] * theta), never, divided


def test_stretch_ratio():
    rho, never, divided = _stretch_rho()
    right = rho[never].max().item()
    assert 5.2 < right < 5.3 and bool((never & ~divided).any())  # some pairs that never turn are blended
    for form in (right, round(right, 2), torch.tensor(right), np.float64(right), [right]):
        assert check_stretch_ratio(form).ok, form
    for wrong in (16, 1, 0.25, 5, 6, 1 / right):
        feedback = check_stretch_ratio(wrong)
        assert not feedback.ok and f"{right:.2f}" not in feedback.message
    assert "the rule keeps" in check_stretch_ratio(16).message
    assert "Upside down" in check_stretch_ratio(1 / right).message
    for junk in JUNK:
        assert not check_stretch_ratio(junk).ok


def test_stretch_ratio_slips_get_true_hints():
    rho, never, _ = _stretch_rho()
    right = rho[never].max().item()
    stretch = STRETCH["target_len"] / STRETCH["train_len"]
    # forgetting the mask: rho.max() over every pair is 16, the ρ of the pairs the rule keeps (they turn), not
    # "the ratio without any rule"
    assert math.isclose(rho.max().item(), stretch) and not bool(never[rho == rho.max()].any())
    feedback = check_stretch_ratio(rho.max().item())
    assert not feedback.ok and "keeps" in feedback.message and "never turn" in feedback.message, feedback.message
    assert "without any rule" not in feedback.message
    # values above the answer that no pair has as ρ: not "a pair that completes a turn"
    pair = int(never.nonzero()[0]) + int(rho[never].argmax())
    assert pair == 46
    for value in (round(right, 1), 5.28, pair, float(pair), np.int64(pair)):
        feedback = check_stretch_ratio(value)
        assert not feedback.ok and "completes a turn" not in feedback.message, (value, feedback.message)
        assert f"{right:.2f}" not in feedback.message
    for value in (pair, float(pair), np.int64(pair)):
        assert "pair index" in check_stretch_ratio(value).message
    for value in (round(right, 1), 5.28):
        assert "close" in check_stretch_ratio(value).message


def test_stretch_ratio_asks_for_more_digits_only_of_a_rounded_answer():
    # two decimals are enough (the task says so): "give more digits" is true only of the answer rounded to one
    # decimal, 5.3, or cut to one decimal, 5.2; a value off by more than the tolerance at two or three decimals is
    # a wrong value, and printing more of its digits would not help
    rho, never, _ = _stretch_rho()
    right = rho[never].max().item()
    assert round(right, 1) == 5.3 and math.floor(right * 10) / 10 == 5.2
    for value in (5.3, 5.2, np.float32(5.2), torch.tensor(5.2)):
        feedback = check_stretch_ratio(value)
        assert not feedback.ok and "more digits" in feedback.message, (value, feedback.message)
        assert f"{right:.2f}" not in feedback.message
    for value in (5.1, 5.4):  # one decimal, but not the answer rounded or cut
        assert "more digits" not in check_stretch_ratio(value).message, value
    for value in (5.28, 5.277, 5.2801, 5.25, 5.255):
        feedback = check_stretch_ratio(value)
        assert not feedback.ok and "close" in feedback.message, value
        assert "more digits" not in feedback.message and "blend weight" in feedback.message, (value, feedback.message)
        assert f"{right:.3f}" not in feedback.message


def test_stretch_ratio_success_names_the_pair():
    # the task asks on which pair the largest ρ lies and says the checker's message names it
    rho, never, _ = _stretch_rho()
    pair = int(never.nonzero()[0]) + int(rho[never].argmax())
    assert pair == 46
    feedback = check_stretch_ratio(round(rho[never].max().item(), 2))
    assert feedback.ok and "(pair 46)" in feedback.message, feedback.message


def test_stretch_ratio_is_not_the_full_factor_ratio():
    # the old exercise's answer, (n/L)/s = 4 (the largest ρ of the pairs divided by the full factor), is now wrong
    rho, never, divided = _stretch_rho()
    old = rho[divided].max().item()
    assert math.isclose(old, 4.0, rel_tol=1e-12)
    feedback = check_stretch_ratio(old)
    assert not feedback.ok and "full factor" in feedback.message and "5.2" not in feedback.message


@pytest.mark.parametrize("checker", [check_out_of_range, check_stretch_ratio, check_yarn_frequencies])
def test_checkers_never_raise(checker):
    class Weird:
        def item(self):
            raise RuntimeError("boom")

        def __len__(self):
            raise RuntimeError("boom")

        def __iter__(self):
            raise RuntimeError("boom")

    for value in (Weird(), (Weird(), Weird())):
        feedback = checker(value)
        assert not feedback.ok and feedback.message


def test_yarn_checker_stops_a_function_that_never_returns(monkeypatch):
    from pe_lessons.exercises import _feedback

    monkeypatch.setattr(_feedback, "TIME_LIMIT", 0.5)

    def forever(*args):
        while True:
            pass

    feedback = check_yarn_frequencies(forever)
    assert not feedback.ok and feedback.message


def test_yarn_checker_rejects_a_function_that_asks_scaled_frequencies_for_the_answer():
    # the exercise is to fix the function's own formula: returning the library's result is not a fix
    from pe_lessons import rotary

    def via_name(head_dim, base, factor, trained_len):
        rule = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained_len}
        return scaled_frequencies(head_dim, rule, base=base)[0]

    def via_module(head_dim, base, factor, trained_len):
        rule = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained_len}
        return rotary.scaled_frequencies(head_dim, rule, base=base)[0]

    original = rotary.scaled_frequencies
    for fn in (via_name, via_module):
        feedback = check_yarn_frequencies(fn)
        assert not feedback.ok and "scaled_frequencies" in feedback.message, feedback.message
        assert "0." not in feedback.message  # no frequency printed: the hint gives no answer away
    # both names are restored afterwards, and a fixed formula still passes
    assert scaled_frequencies is original and rotary.scaled_frequencies is original
    assert check_yarn_frequencies(_yarn).ok


def test_out_of_range_reads_a_mask_and_names_the_rounding():
    # the natural intermediate never & (rho > 1) is a boolean mask over the pairs: accepted as the indices it marks
    p = OUT_OF_RANGE
    d, L, s = p["head_dim"], p["train_len"], p["factor"]
    theta = rope_frequencies(d, p["base"])
    never = L * theta / (2 * math.pi) < 1
    rho = s * rope_frequencies(d, p["base"] * s ** (d / (d - 2))) / theta  # (s·L)·θ'_j / (L·θ_j), as computed
    assert rho[-1].item() > 1 and math.isclose(rho[-1].item(), 1.0, rel_tol=1e-12)  # exactly 1, but for rounding
    right = never & (rho > 1 + 1e-9)
    for form in (right, right.numpy(), right.tolist()):
        assert check_out_of_range(form).ok, form
    feedback = check_out_of_range(right[:-1])
    assert not feedback.ok and "mask" in feedback.message and "nonzero" in feedback.message
    # without a tolerance, pair 31's ρ = 1.0000000000000013 slips in: the hint names the rounding
    sloppy = never & (rho > 1)
    feedback = check_out_of_range(sloppy)
    assert (
        not feedback.ok
        and "rounding" in feedback.message
        and str(right.nonzero().flatten().tolist()) not in (feedback.message)
    )


def test_stretch_ratio_names_a_pair_that_turns():
    # taking every pair the rule slows (turning ones too) gives the largest ρ of a pair that completes turns: 14.85
    rho, never, _ = _stretch_rho()
    slowed = rho < STRETCH["target_len"] / STRETCH["train_len"]
    wrong = rho[slowed].max().item()
    assert 14 < wrong < 15 and not bool(never[rho == wrong].any())
    for value in (wrong, round(wrong, 2)):
        feedback = check_stretch_ratio(value)
        assert not feedback.ok and "completes a turn" in feedback.message, feedback.message
        assert "5.2" not in feedback.message


def test_yarn_checker_rejects_scaled_frequencies_through_the_package():
    import pe_lessons

    def via_package(head_dim, base, factor, trained_len):
        rule = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained_len}
        return pe_lessons.scaled_frequencies(head_dim, rule, base=base)[0]

    original = pe_lessons.scaled_frequencies
    feedback = check_yarn_frequencies(via_package)
    assert not feedback.ok and "scaled_frequencies" in feedback.message, feedback.message
    assert pe_lessons.scaled_frequencies is original
