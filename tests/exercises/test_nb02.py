"""Checkers of notebook 02 (the table function, the half-done float64 fix):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
import torch

from pe_lessons import exercises as ex
from pe_lessons import inverse_frequencies, sinusoidal_table
from pe_lessons import pe_formula as ex_pe_formula

from .junk import FUNCTION_JUNK, JUNK, placeholder


def textbook32(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    angles = pos * torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(-2)


def test_check_table_function():
    assert ex.check_table_function(lambda n, d: sinusoidal_table(n, d)).ok
    cases = [
        (textbook32, "rounds to float32"),
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


# ---------------------------------------------------------------- 02: predict, then fix the classmate's table
def classmate_table(max_len, d_model, base=10000.0):  # the notebook's: one float32 number made by type promotion
    omega = 1 / base ** (torch.arange(0, d_model, 2) / d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def exp32_omega_table(max_len, d_model, base=10000.0):  # section 4's textbook ω line, then float64
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega.double()
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def fixed_table(max_len, d_model, base=10000.0):
    omega = 1 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def float64_cast_table(max_len, d_model, base=10000.0):  # the notebook's cell 18, unchanged
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inverse_frequencies(d_model, base)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


def textbook_table(max_len, d_model, base=10000.0):
    omega = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)


def classmate_error():
    return (classmate_table(70000, 16).double() - sinusoidal_table(70000, 16, dtype=torch.float64)).abs().max().item()


GOOD = 3e-3  # a derived bound: pos·ω_1·2·2^-24 at pos 69 999 (two float32 operations make ω: pow, then 1/x)
ONE = 69999 * 10000 ** (-2 / 16) * 2**-24  # one rounding of ω_1 at the last position: not a bound for two operations


def test_the_planted_omega_is_float32_and_the_derived_bound_is_the_right_size():
    assert (torch.arange(0, 16, 2) / 16).dtype == torch.float32  # int64 / int: the silent float32
    measured = classmate_error()
    bound = 2 * ONE
    assert 1e-5 < measured < 1e-3 and measured <= bound
    assert ex.check_precision_fix(bound, torch.float32, fixed_table).ok


def test_cell_18_copied_unchanged_fails_until_the_error_is_predicted():
    feedback = ex.check_precision_fix(..., ..., float64_cast_table)
    assert not feedback.ok and "Predict first" in feedback.message and "predicted_error" in feedback.message
    assert "ω" not in feedback.message and "omega" not in feedback.message and "promotion" not in feedback.message
    assert "Not answered" in ex.check_precision_fix(None, None, None).message
    assert "Predict first" in ex.check_precision_fix(..., ..., placeholder).message  # the notebook's cell as given


@pytest.mark.parametrize(
    "prediction, words",
    [
        (3e-8, "keep the promise"),  # "it is fixed now": only the final rounding
        (5e-7, "keep the promise"),
        (1e-6, "not a bound"),
        (1e-4, "not a bound"),  # below the measured 1.5e-4: passed as "the right size" before review 3
        (2.5e-4, "smaller than what a derivation gives"),  # above the error, but no derivation gives it
        (4.5e-4, "smaller than what a derivation gives"),  # a third of one rounding: "a sound bound" in review 4
        (5e-4, "smaller than what a derivation gives"),
        (ONE, "more than one float32 operation"),  # one rounding: "sound" in review 4, not a bound
        (1.2 * ONE, "more than one float32 operation"),
        # review 5: half a spacing at ω, once (69 999·2^-26 = 1.04e-3): "smaller than what a derivation gives" before
        (69999 * 2**-26, "more than one float32 operation"),
        (0.79 * 2**-24 * 69999 * 10000 ** (-2 / 16), "more than one float32 operation"),  # the reciprocal's, once
        (3e-2, "8 times looser"),
        (0.5, "8 times looser"),
        (-1e-3, "positive"),
        (math.nan, "NaN"),
        ("1e-3", "number"),
    ],
)
def test_a_wrong_prediction_gets_a_hint(prediction, words):
    feedback = ex.check_precision_fix(prediction, torch.float32, fixed_table)
    assert not feedback.ok and words in feedback.message, feedback
    assert "of order" not in feedback.message  # the number is not given away before a right-sized estimate


def test_a_derived_bound_is_confirmed_with_the_measured_error_and_why_it_is_smaller():
    feedback = ex.check_precision_fix(GOOD, torch.float32, placeholder)  # the notebook's stub
    assert not feedback.ok and "sound bound" in feedback.message and "NotImplementedError" in feedback.message
    measured = classmate_error()
    order = 10 ** math.floor(math.log10(measured))
    assert f"off by something of order {order:.0e}, below {2 * ONE:.2g}, the bound" in feedback.message, feedback
    assert f"{measured:.2g}" not in feedback.message  # the float32 pow's own digits are not printed (review 4)
    prediction_said = feedback.message.split("lossy_dtype:")[0]
    assert "ω" not in prediction_said and "omega" not in prediction_said  # the line is not named before lossy_dtype
    assert "The code's accounting" in feedback.message  # review 6: after lossy_dtype, the code's own accounting
    assert "the right size" not in feedback.message
    assert "cancelled" not in feedback.message and "the actual roundings were small" in feedback.message  # review 5
    for value in (
        2 * ONE,  # two roundings (pow, then 1/x): the solution's bound
        3 * ONE,  # three (a 1-ulp pow, or the division counted too)
        69999 * 2**-23,  # ω ≤ 1 and float32's step near 1: valid, if loose (rejected as 40x too large before)
        3 * 69999 * 2**-24,  # ω ≤ 1, three roundings: valid, if loose ("8 times looser" in review 4)
        2 * 69999 * 2**-23,
        measured,  # computed from the float32 ω itself
        [GOOD],  # a one-element list, as a one-element array is taken (review 4)
        torch.tensor(GOOD),
        torch.tensor(GOOD, dtype=torch.float32),
    ):
        assert ex.check_precision_fix(value, torch.float32, fixed_table).ok, value
    for value in (measured / 2, measured / 9, ONE / 4, ONE, 20 * ONE):  # below the error or a derivation, too loose
        assert not ex.check_precision_fix(value, torch.float32, fixed_table).ok, value


@pytest.mark.parametrize(
    "prediction",
    [
        (0.6325 + 0.7906)
        * 2**-24
        * 69999
        * 10000 ** (-2 / 16),  # 1.88e-3: pow 3.16 (0.63·2^-24), 1/x 0.316 (0.79·2^-24)
        69999 * 2 * 2**-26,  # 2.09e-3: half a spacing near ω, twice
        69999 * 0.3 * 1.42 * 2**-24,  # 1.777e-3: the same with ω_1 rounded to 0.3 (review 8)
        70000 * 0.3 * 1.4 * 2**-24,  # 1.75e-3
    ],
)
def test_the_spacing_rule_per_operation_is_a_sound_bound(prediction):
    # review 5: cell 13's spacing rule, applied to each of the two operations, gives bounds sharper than 2·2^-24
    # (valid for correctly rounded operations); both were told "how many float32 operations make that number?"
    feedback = ex.check_precision_fix(prediction, torch.float32, fixed_table)
    assert feedback.ok and "a sound bound for correctly rounded operations" in feedback.message, feedback
    assert "cancelled" not in feedback.message


@pytest.mark.parametrize(
    "prediction",
    [
        69999 * 10000 ** (-2 / 16) * 2**-24 + 2**-10,  # review 6: cell 13's angle rounding + one ω rounding: 2.30e-3
        2.21e-3,  # review 6: one rounding at float32's ~1e-7 relative
        2e-3,  # review 6: a bare guess
        69999 * 2**-24,  # review 6: pair 0 rounded once (4.2e-3)
        2 * ONE,  # 2^-24 per operation, the solution's
        1.5e-4,  # the measured error
    ],
)
def test_every_passing_prediction_gets_the_codes_accounting(prediction):
    # review 6: a number cannot tell a right derivation from a wrong one (2.30e-3 is an angle rounding that float64
    # angles never make plus one of ω's two roundings), so every pass states what the code rounds
    feedback = ex.check_precision_fix(prediction, torch.float32, fixed_table)
    assert feedback.ok, feedback
    for words in (
        "angles are float64",
        "nothing rounds the angles",
        "pair 0's ω is exactly 1",
        "two float32 operations",
    ):
        assert words in feedback.message, (words, feedback)
    assert "the pow (3.16) and 1/x (0.316)" in feedback.message and "22 136 rad" in feedback.message
    # review 7: the angle it scales is pair 1's, not the table's largest (pair 0's, exact), and the exponent's
    # division, the first float32 operation, is exact at d_model = 16
    assert "largest angle ω_1 scales" in feedback.message and "69999 rad, is exact" in feedback.message
    assert "exponent 2/16" in feedback.message and "is exact here" in feedback.message


def test_the_one_operation_hint_does_not_call_it_an_angle_rounding():
    # review 6: "covers one float32 rounding of the largest angle ... rounds the number that angle is made from too"
    # sent a student who rounded ω once to add an angle rounding; both roundings are of ω_1
    feedback = ex.check_precision_fix(ONE, torch.float32, fixed_table)
    assert not feedback.ok and "below a rounding by every float32 operation" in feedback.message, feedback
    assert "rounding of the largest angle" not in feedback.message and " too" not in feedback.message


def test_two_to_the_minus_24_with_rounded_inputs_is_not_called_sharper():
    # review 6: 2·2^-24 × 0.3 × 69 999 = 2.50e-3 (ω_1 taken as 0.3) is 0.948 × the bound: not a spacing derivation
    feedback = ex.check_precision_fix(2 * 2**-24 * 0.3 * 69999, torch.float32, fixed_table)
    assert feedback.ok and "sharper" not in feedback.message and "a sound bound" in feedback.message, feedback


def test_a_decimal_prediction_is_a_number():
    from decimal import Decimal

    assert ex.check_precision_fix(Decimal("0.0026"), torch.float32, fixed_table).ok  # review 6: "got Decimal(…)"


def test_the_prediction_messages_agree_with_each_other_where_omega_rounds_badly():
    # review 4: at d_model = 12, ω_1 is off by 1.70·2^-24 (the exponent 1/6 is rounded too), and the checker called the
    # one-rounding prediction "not a bound" while its pass message said "below the bound … a full rounding would give"
    max_len, d = 70000, 12
    measured = (classmate_table(max_len, d).double() - sinusoidal_table(max_len, d, dtype=torch.float64)).abs().max()
    one = (max_len - 1) * 10000 ** (-2 / d) * 2**-24
    assert one < measured.item() < 2 * one  # two roundings would not bound every size: the division rounds here too

    def check(value):
        return ex.check_precision_fix(value, torch.float32, fixed_table, max_len=max_len, d_model=d)

    assert "not a bound" in check(one).message
    assert "more than one float32 operation" in check(2 * one).message and "measured" not in check(2 * one).message
    for value in (3 * one, measured.item()):
        feedback = check(value)
        assert feedback.ok, feedback
        bound = float(re.search(r"below ([0-9.e+-]+), the bound for the code as written", feedback.message).group(1))
        assert measured.item() <= bound <= 3 * one, feedback  # "below the bound" is true, and 3 roundings are sound
    assert "close to the measured error" in check(measured.item()).message
    # review 9: forgetting the exponent's rounding with ω_1 rounded to 0.2 (1.67e-3, 10 % above the measured error)
    # is a two-rounding slip, not the measured error
    slip = 69999 * 0.2 * 2 * 2**-24
    assert not check(slip).ok and "more than one float32 operation" in check(slip).message


@pytest.mark.parametrize("d_model", [6, 8, 12, 16, 64])
def test_the_checkers_bound_bounds_every_pair_of_the_classmates_table(d_model):
    from pe_lessons.exercises import nb02

    exact = inverse_frequencies(d_model)
    omega32 = (1 / 10000.0 ** (torch.arange(0, d_model, 2) / d_model)).double()
    angle_error = 69999 * (omega32 - exact).abs()
    assert angle_error.max().item() <= nb02._derived_bound(70000, d_model)


def test_the_solutions_bound_holds_for_a_pow_that_rounds_the_other_way(monkeypatch):
    # review 4: 10^0.5 lies 0.16 ulp from its float32 neighbour; a 1-ulp pow may return the other one, and the
    # one-rounding prediction was then not a bound. The two-rounding one is, and the messages still agree.
    from pe_lessons.exercises import nb02

    def other_pow_table(max_len, d_model, base=10000.0):
        powered = base ** (torch.arange(0, d_model, 2) / d_model)
        exact = 10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        away = torch.where(powered.double() < exact, math.inf, -math.inf).float()
        powered[1] = torch.nextafter(powered[1], away[1])  # pair 1: the float32 neighbour on the other side
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * (1 / powered)
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()

    monkeypatch.setattr(nb02, "_classmate_table", other_pow_table)
    measured = (other_pow_table(70000, 16).double() - sinusoidal_table(70000, 16, dtype=torch.float64)).abs().max()
    assert ONE < measured.item() <= 2 * ONE  # one rounding no longer bounds it (review 4: 1.94e-3)
    assert "not a bound" in ex.check_precision_fix(ONE, torch.float32, fixed_table).message
    feedback = ex.check_precision_fix(2 * ONE, torch.float32, fixed_table)  # the solution's prediction
    assert feedback.ok and "sound bound" in feedback.message and "below" in feedback.message, feedback


@pytest.mark.parametrize(
    "answer",
    [
        fixed_table,
        float64_cast_table,
        # the paper's own forms, all in float64 (review 2: these were told "more than one final rounding")
        lambda n, d: float64_cast_table(n, d),
        lambda n, d: (
            torch.stack(
                [
                    (
                        a := torch.arange(n, dtype=torch.float64)[:, None]
                        / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
                    ).sin(),
                    a.cos(),
                ],
                -1,
            )
            .flatten(1)
            .float()
        ),
        lambda n, d: (lambda a: torch.stack([a.sin(), a.cos()], -1).flatten(1).float())(
            torch.arange(n, dtype=torch.float64)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        ),
        lambda n, d: torch.tensor([ex_pe_formula(p, d) for p in range(n)], dtype=torch.float32),
    ],
    ids=["fixed", "cell18", "cast", "division", "pow", "pe_formula"],
)
def test_precision_fix_says_only_the_final_rounding_for_every_float64_form(answer):
    feedback = ex.check_precision_fix(GOOD, torch.float32, answer)
    assert feedback.ok and "only the final rounding" in feedback.message and "more than" not in feedback.message


def test_precision_fix_package_table_is_not_called_one_rounding():
    feedback = ex.check_precision_fix(GOOD, torch.float32, lambda n, d: sinusoidal_table(n, d))
    assert (
        feedback.ok and "only the final" not in feedback.message and "more than one final rounding" in feedback.message
    )
    assert re.search(r"within \d\.\d\de-0\d", feedback.message)  # three significant digits


def hard_coded_16(max_len, d_model):  # right at the exercise's size only
    omega = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * omega
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()


@pytest.mark.parametrize(
    "answer, words",
    [
        (hard_coded_16, "fixed_table(3000, 64) returned shape (3000, 16)"),
        (hard_coded_16, "Is d_model fixed"),
        (lambda n, d: fixed_table(70000, d), "fixed_table(3000, 64) returned shape (70000, 64)"),
        (lambda n, d: fixed_table(n, d) if n == 70000 else fixed_table(n, d) + 1e-3, "fixed_table(3000, 64) is off"),
        (lambda n, d: fixed_table(n, d) if d != 6 else classmate_table(n, d), "fixed_table(70001, 6)"),
    ],
)
def test_precision_fix_probes_more_than_one_size(answer, words):
    feedback = ex.check_precision_fix(GOOD, torch.float32, answer)
    assert not feedback.ok and words in feedback.message, feedback


@pytest.mark.parametrize(
    "answer, words",
    [
        (classmate_table, "grows in proportion to pos"),
        (exp32_omega_table, "grows in proportion to pos"),
        (lambda n, d: sinusoidal_table(n, d, dtype=torch.float64), "the model wants float32"),
        (textbook_table, "some step still rounds to float32"),
        (lambda n, d: fixed_table(n, d)[:, torch.arange(d).view(-1, 2).flip(1).flatten()], "layout"),
        (lambda n, d: fixed_table(n + 1, d), "shape (70001, 16)"),
        (lambda n, d: fixed_table(n + 1, d)[1:], "positions 1 … max_len, one off"),  # 1-based rows (review 2)
        (lambda n, d: fixed_table(n, d).to(torch.int32), "floating"),
        (lambda n, d: fixed_table(n, d) * float("nan"), "NaN"),
        (lambda n, d: fixed_table(n, d).numpy(), "torch.Tensor"),
    ],
)
def test_precision_fix_names_what_is_left(answer, words):
    feedback = ex.check_precision_fix(GOOD, torch.float32, answer)
    assert not feedback.ok and words in feedback.message, feedback


def test_one_based_rows_are_not_sent_to_the_layout_and_frequencies():
    feedback = ex.check_precision_fix(GOOD, torch.float32, lambda n, d: fixed_table(n + 1, d)[1:])
    assert "layout" not in feedback.message and "frequencies" not in feedback.message


@pytest.mark.parametrize("answer", JUNK + FUNCTION_JUNK)
def test_precision_fix_never_raises_and_never_passes_junk(answer):
    for args in ((GOOD, torch.float32, answer), (answer, torch.float32, fixed_table), (GOOD, answer, fixed_table)):
        feedback = ex.check_precision_fix(*args)
        assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


@pytest.mark.parametrize(
    "answer", [torch.float32, "float32", "torch.float32", " np.float32", np.float32, np.dtype("f4"), "f4", "single"]
)
def test_the_lossy_dtype_is_accepted_in_any_ordinary_spelling(answer):
    assert ex.check_precision_fix(GOOD, answer, fixed_table).ok


@pytest.mark.parametrize(
    "answer, words",
    [
        (..., "Set lossy_dtype"),
        (torch.float64, "only the final cast would round"),
        ("float64", "only the final cast would round"),
        (torch.int64, "integers are exact"),
        (torch.float16, "no number in classmate_table"),
        ("float33", "answer with a dtype"),
        (3, "answer with a dtype"),
        (np.float32(1.5), "answer with a dtype"),  # a float32 number, not the dtype (np.dtype reads it as one)
        (np.float32("inf"), "answer with a dtype"),
        (np.zeros(3, dtype=np.float32), "answer with a dtype"),
    ],
)
def test_the_find_the_line_half_is_checked(answer, words):
    # review 3: a copy of cell 18 (or any float64 table) passed once a prediction was set, the line never named
    for table in (fixed_table, float64_cast_table, lambda n, d: sinusoidal_table(n, d)):
        feedback = ex.check_precision_fix(GOOD, answer, table)
        assert not feedback.ok and words in feedback.message, feedback


def test_precision_fix_complex_and_placeholder():
    assert "Now write fixed_table" in ex.check_precision_fix(GOOD, torch.float32, None).message
    assert not ex.check_precision_fix(GOOD, torch.float32, lambda n, d: fixed_table(n, d).to(torch.complex64)).ok


@pytest.mark.parametrize("where", ["all", 5, 60000])
def test_a_table_with_nan_is_not_correct(where):
    def my_table(n, d):
        t = sinusoidal_table(n, d)
        if where == "all":
            return torch.full_like(t, math.nan)
        t[where, 3] = math.nan
        return t

    feedback = ex.check_table_function(my_table)
    assert not feedback.ok and "NaN" in feedback.message
    if where != "all":
        assert f"position {where}, column 3" in feedback.message


# ---------------------------------------------------------------- what the table checkers enforce
def test_table_function_wants_float32_and_no_loop():
    feedback = ex.check_table_function(lambda n, d: sinusoidal_table(n, d, dtype=torch.float64))
    assert not feedback.ok and "float32" in feedback.message

    def loop_table(n, d):  # right values, one row at a time
        return torch.stack([sinusoidal_table(p + 1, d)[p] for p in range(n)])

    feedback = ex.check_table_function(loop_table)
    assert not feedback.ok and "loop over positions" in feedback.message

    def comprehension(n, d):  # a list comprehension is a loop too
        return torch.tensor([[math.sin(p) for _ in range(d)] for p in range(n)], dtype=torch.float32)

    assert "loop over positions" in ex.check_table_function(comprehension).message


def test_classmate_feedback_measures_without_naming_the_fix():
    feedback = ex.check_precision_fix(GOOD, torch.float32, exp32_omega_table)
    assert not feedback.ok and "relative" in feedback.message
    fix_said = feedback.message.replace(ex.nb02._accounting(70000, 16), "")  # the accounting describes the code
    assert "float64" not in fix_said and "Compute ω" not in feedback.message
    # the relative error it quotes is the one of the classmate's float32 ω (a few 1e-7), measured on the table
    quoted = float(re.search(r"off by a relative ([0-9.e+-]+?)\.?\s", feedback.message).group(1))
    i = torch.arange(0, 16, 2, dtype=torch.float32)
    omega32 = torch.exp(i * (-math.log(10000.0) / 16)).double()
    true = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    rel = ((omega32 - true).abs() / true).max().item()
    assert 0.5 * rel <= quoted <= 2 * rel or quoted == 0.0  # one significant digit


def window(start, n, d, dtype=torch.float64):
    pos = torch.arange(start, start + n, dtype=dtype)[:, None]
    angles = pos * 10000.0 ** (-torch.arange(0, d, 2, dtype=dtype) / d)
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(1).float()


def block_window(start, n, d):  # sinusoidal_table's own scheme, pos = qB + r, for the window's positions only
    pos = torch.arange(start, start + n)
    q, r = (pos // 256).double()[:, None], (pos % 256).double()[:, None]
    omega = inverse_frequencies(d)
    sin_q, cos_q = torch.sin(q * 256 * omega).float(), torch.cos(q * 256 * omega).float()
    sin_r, cos_r = torch.sin(r * omega).float(), torch.cos(r * omega).float()
    return torch.stack((sin_q * cos_r + cos_q * sin_r, cos_q * cos_r - sin_q * sin_r), -1).flatten(1)


def test_window_table_accepts_the_package_rows_built_for_the_window_only():
    feedback = ex.check_window_table(block_window)
    assert feedback.ok and "bit for bit" in feedback.message, feedback
    for start, n, d in [(0, 300, 8), (65_000, 64, 16), (1_000_000, 32, 64)]:
        assert torch.equal(block_window(start, n, d), sinusoidal_table(start + n, d)[start:])


def test_cell_18_copied_as_a_window_fails_with_a_hint():
    feedback = ex.check_window_table(window)  # float64 positions and angles, cast last: cell 18's body
    assert not feedback.ok and "rounded once" in feedback.message and "differ from the rows" in feedback.message
    assert "qB" not in feedback.message and "256" not in feedback.message  # the scheme is not given away


def test_window_table_within_the_promise_but_not_the_package_bits_is_told_so():
    feedback = ex.check_window_table(lambda s, n, d: block_window(s, n, d) + 1e-7)
    assert not feedback.ok and "not bit for bit" in feedback.message and "rounded once" not in feedback.message


def angle_addition_f32_offsets(start, n, d):  # review 2, point 4: sin/cos of start·ω exact, offsets k·ω in float32
    omega = inverse_frequencies(d)
    s0, c0 = (start * omega).sin().float(), (start * omega).cos().float()
    k = torch.arange(n, dtype=torch.float32)[:, None] * omega.float()
    return torch.stack((s0 * k.cos() + c0 * k.sin(), c0 * k.cos() - s0 * k.sin()), -1).flatten(1)


def test_window_table_hint_is_sized_by_the_error_not_by_the_position():
    feedback = ex.check_window_table(angle_addition_f32_offsets)
    assert not feedback.ok and "offsets" in feedback.message, feedback
    assert "Near position" not in feedback.message and "0.0625" not in feedback.message
    size = float(re.search(r"number of about ([0-9.e+]+) or more", feedback.message).group(1))
    assert 5 < size < 100  # the float32 angles k·ω (up to ~31 rad) that did it


@pytest.mark.parametrize(
    "answer, words",
    [
        (lambda s, n, d: window(s, n, d, torch.float32), "some float32 number of about"),
        (lambda s, n, d: sinusoidal_table(s + n, d)[s:], "rows before `start`"),
        (lambda s, n, d: torch.cat([window(s + p, 1, d) for p in range(n)]), "loop over positions"),
        (lambda s, n, d: window(s, n, d).double(), "float32"),
        (lambda s, n, d: window(s, n, d)[:, : d // 2], "interleaving"),
        (lambda s, n, d: window(s, n, d).view(n, -1, 2).flip(-1).flatten(1), "swapped"),
        (lambda s, n, d: window(s, n, d)[:, 0::2].repeat_interleave(2, 1), "sin where cos belongs"),
        (lambda s, n, d: window(s + 1, n, d), "positions start+1 … start+n, one off"),
        (lambda s, n, d: window(s - 1, n, d), "positions start−1 … start+n−2, one off"),
        (lambda s, n, d: window(s, n - 1, d), "n = 100 rows"),
        (lambda s, n, d: window(s, n, 8), "rows for d_model = 8"),
        (lambda s, n, d: block_window(s, n, d).squeeze(), "one row per position"),  # n = 1: shape (8,) (review 4)
    ],
)
def test_window_table_names_what_is_wrong(answer, words):
    feedback = ex.check_window_table(answer)
    assert not feedback.ok and words in feedback.message, feedback


def test_window_table_gives_the_column_hints_only_for_columns():
    for wrong in (lambda s, n, d: window(s + 1, n, d), lambda s, n, d: window(s, n - 1, d)):
        feedback = ex.check_window_table(wrong)
        assert not feedback.ok and "interleaving" not in feedback.message and "layout" not in feedback.message


def omega32_window(start, n, d):  # float64 positions, but ω made in float32 (the textbook line)
    omega = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d)).double()
    angles = torch.arange(start, start + n, dtype=torch.float64)[:, None] * omega
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(1).float()


def rounded_omega_window(start, n, d):  # the exact ω, rounded once to float32
    angles = torch.arange(start, start + n, dtype=torch.float64)[:, None] * inverse_frequencies(d).float().double()
    return torch.stack((angles.sin(), angles.cos()), -1).flatten(1).float()


@pytest.mark.parametrize("answer", [omega32_window, rounded_omega_window])
def test_window_table_asks_about_omega_when_omega_was_rounded(answer):
    feedback = ex.check_window_table(answer)
    assert not feedback.ok and "relative" in feedback.message and "dtype" in feedback.message, feedback
    assert "large number" not in feedback.message and "neighbouring float32" not in feedback.message
    # the worst window is reported, not the first that fails (at start 0 the error is only a few 1e-7)
    assert "window_table(0, " not in feedback.message
    off = float(re.search(r"is off by ([0-9.e+-]+?)\.\s", feedback.message).group(1))
    assert off > 1e-3


def coarse_angle32_window(start, n, d, *, sine_in_float64=False):  # ω exact, the coarse angle q·B·ω rounded
    pos = torch.arange(start, start + n)
    q, r = (pos // 256).double()[:, None], (pos % 256).double()[:, None]
    omega = inverse_frequencies(d)
    coarse = (q * 256 * omega).float()
    if sine_in_float64:
        coarse = coarse.double()
    sin_q, cos_q = torch.sin(coarse).float(), torch.cos(coarse).float()
    sin_r, cos_r = torch.sin(r * omega).float(), torch.cos(r * omega).float()
    return torch.stack([sin_q * cos_r + cos_q * sin_r, cos_q * cos_r - sin_q * sin_r], -1).flatten(1)


@pytest.mark.parametrize("sine_in_float64", [False, True])
def test_window_table_does_not_blame_omega_for_a_rounded_coarse_angle(sine_in_float64):
    # review 3: near one large start the rows span 3e-5 of relative position, so an error fixed in size there looked
    # proportional to pos and was sent to ω, the one number that is right
    feedback = ex.check_window_table(functools.partial(coarse_angle32_window, sine_in_float64=sine_in_float64))
    assert not feedback.ok and "relative" not in feedback.message and "Which number is that" not in feedback.message
    assert "float32 number of about" in feedback.message, feedback


@pytest.mark.parametrize("answer", JUNK + FUNCTION_JUNK)
def test_window_table_never_raises_and_never_passes_junk(answer):
    feedback = ex.check_window_table(answer)
    assert isinstance(feedback, ex.Feedback) and not feedback.ok and feedback.message


def test_a_function_that_never_returns_is_stopped_by_the_loop_probe_too(monkeypatch):
    import threading

    from pe_lessons.exercises import _feedback

    monkeypatch.setattr(_feedback, "TIME_LIMIT", 0.5)

    def forever(*args):
        while True:
            pass

    for check in (ex.check_table_function, ex.check_window_table):
        feedback = check(forever)
        assert not feedback.ok and "did not return" in feedback.message
    found = {}  # off the main thread the limit traces lines: the probe's own tracer must keep it working
    thread = threading.Thread(target=lambda: found.update(window=ex.check_window_table(forever)))
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and "did not return" in found["window"].message


def combined_window(start, n, d, *, combine, coarse_factor=256):  # block_window with a slip in the combination
    pos = torch.arange(start, start + n)
    q, r = (pos // 256).double()[:, None], (pos % 256).double()[:, None]
    omega = inverse_frequencies(d)
    sin_q, cos_q = torch.sin(q * coarse_factor * omega).float(), torch.cos(q * coarse_factor * omega).float()
    sin_r, cos_r = torch.sin(r * omega).float(), torch.cos(r * omega).float()
    return torch.stack(combine(sin_q, cos_q, sin_r, cos_r), -1).flatten(1)


def right(sq, cq, sr, cr):
    return sq * cr + cq * sr, cq * cr - sq * sr


@pytest.mark.parametrize(
    "slip, words",
    [
        # review 4: these were told "some float32 number of about 3.4e+07 … fed sin or cos": an error of 2 is no rounding
        (dict(combine=lambda sq, cq, sr, cr: (sq * cr + cq * sr, cq * cr + sq * sr)), "no float32 rounding"),
        (dict(combine=right, coarse_factor=1), "no float32 rounding"),  # the coarse angle q·ω, without B
        # and this one "check the layout … and the frequencies", both right
        (dict(combine=lambda sq, cq, sr, cr: (sq * cr - cq * sr, cq * cr - sq * sr)), "the sin columns are −sin"),
    ],
    ids=["cos-sign", "coarse-without-B", "sin-sign"],
)
def test_window_table_says_a_wrong_combination_is_wrong_not_rounded(slip, words):
    feedback = ex.check_window_table(functools.partial(combined_window, **slip))
    assert not feedback.ok and words in feedback.message, feedback
    assert "fed sin or cos" not in feedback.message and "frequencies" not in feedback.message
    assert ex.check_window_table(functools.partial(combined_window, combine=right)).ok


def test_the_rounding_hint_is_kept_where_the_error_can_be_a_rounding():
    # float32 angles past 2^24: off by 0.9, and 0.9·2^24 ≈ 1.5e7 is below the window's largest angle, 2^24 + 9
    feedback = ex.check_window_table(lambda s, n, d: window(s, n, d, torch.float32))
    assert not feedback.ok and "window_table(16777217, 8, 6)" in feedback.message, feedback
    assert "fed sin or cos" in feedback.message and "no float32 rounding" not in feedback.message
    from pe_lessons.exercises import nb02

    # the coarse angle without B at that same window: off by 2, and 2·2^24 exceeds its largest angle
    start, n, d = 2**24 + 1, 8, 6
    off = combined_window(start, n, d, combine=right, coarse_factor=1).double() - nb02._exact_window(start, n, d)
    assert off.abs().max().item() * 2**24 > start + n
