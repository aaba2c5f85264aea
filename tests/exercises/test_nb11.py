"""Checkers of notebook 11 (image + text position ids, Gemma 3 pairs in the window, the MLA bug):
right answers pass in any ordinary type, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pe_lessons.exercises import nb11
from pe_lessons.exercises.nb11 import (
    GEMMA3_GLOBAL,
    IMAGE_TEXT,
    check_image_text_ids,
    check_mla_scores,
    check_window_pairs,
)
from pe_lessons.models import LayerRope, mrope_position_ids
from pe_lessons.rotary import apply_rope

JUNK = [float("nan"), float("inf"), "28", [1, 2, 3], torch.tensor([1.0, 2.0]), object(), True, -1e300, None]


# --------------------------------------------------------------------------- exercise 1


def _by_hand():
    """The ids written out from the rule, independently of mrope_position_ids."""
    text1 = [0, 1, 2, 3]
    rows, cols = 6 // 2, 4 // 2
    t = [4] * (rows * cols)
    h = [4 + r for r in range(rows) for _ in range(cols)]
    w = [4 + c for _ in range(rows) for c in range(cols)]
    after = 4 + max(rows, cols)
    text2 = [after, after + 1]
    return [text1 + t + text2, text1 + h + text2, text1 + w + text2]


def test_image_text_ids_right_answers_pass_in_any_form():
    right = _by_hand()
    assert mrope_position_ids(IMAGE_TEXT["segments"], spatial_merge_size=2).tolist() == right
    for form in (
        right,
        torch.tensor(right),
        np.array(right),
        tuple(tuple(r) for r in right),
        torch.tensor(right).float(),
    ):
        assert check_image_text_ids(form).ok, form


def test_image_text_ids_slips_are_named():
    right = _by_hand()
    counted = [r[:10] + [10, 11] for r in right]
    assert "largest side" in check_image_text_ids(counted).message
    # on this image the token count (6) equals the longer side in patches (6): the hint must name both slips
    by_patches = [r[:10] + [4 + 6, 4 + 7] for r in right]
    assert by_patches == counted
    message = check_image_text_ids(by_patches).message
    assert "count" in message and "patches" in message and "in tokens" in message
    swapped = nb11._variant_ids(IMAGE_TEXT["segments"], 2, swap=True)
    assert "swapped" in check_image_text_ids(swapped).message
    unmerged = mrope_position_ids(IMAGE_TEXT["segments"], spatial_merge_size=1).tolist()
    assert "merges 2 × 2" in check_image_text_ids(unmerged).message
    from_zero = [r[:4] + [v - 4 for v in r[4:10]] + r[10:] for r in right]
    assert "start at 0" in check_image_text_ids(from_zero).message
    assert "same length" in check_image_text_ids([right[0], right[1], right[2][:-1]]).message
    assert "Not answered" in check_image_text_ids(None).message
    for junk in JUNK + [[right[0], right[1]], [right[0], right[1], ["a"] * 12], [[0.5] * 12] * 3]:
        feedback = check_image_text_ids(junk)
        assert not feedback.ok and feedback.message


def test_image_text_ids_rows_as_tensors_or_arrays_pass():
    right = _by_hand()
    for form in ([torch.tensor(r) for r in right], [np.array(r) for r in right], tuple(torch.tensor(right))):
        assert check_image_text_ids(form).ok, form


def test_image_text_ids_format_messages_reach_the_student():
    """A failed Feedback is falsy: `problem or fallback` used to show the fallback instead of the specific message."""
    right = _by_hand()
    transposed = check_image_text_ids(torch.tensor(right).T)
    assert not transposed.ok and "three rows" in transposed.message and "[12, 3]" in transposed.message
    half = [right[0][:5] + [7.5] + right[0][6:], right[1], right[2]]
    message = check_image_text_ids(half).message
    assert "In the time row" in message and "7.5" in message
    assert "must be a list of numbers" in check_image_text_ids([right[0], "4 4 5", right[2]]).message


@pytest.mark.parametrize("start", [6, 8, 9])
def test_image_text_ids_text_after_the_image_off_by_some(start):
    right = _by_hand()
    late = [r[:10] + [start, start + 1] for r in right]
    message = check_image_text_ids(late).message
    assert f"starts at {start}" in message and "one past the largest id" in message


# --------------------------------------------------------------------------- exercise 2


def test_window_pairs_right_answers_pass():
    g = GEMMA3_GLOBAL
    # independently: the package's frequencies of a Gemma 3 global layer, turns over the window
    spec = LayerRope(g["head_dim"], base=g["base"], scaling={"rope_type": "linear", "factor": g["factor"]})
    turns = g["window"] * spec.frequencies() / (2 * math.pi)
    right = int((turns >= 1).sum())
    assert bool((turns[:right] >= 1).all()) and bool((turns[right:] < 1).all())
    for form in (right, float(right), np.int64(right), torch.tensor(right), list(range(right)), range(right)):
        assert check_window_pairs(form).ok, form
    assert "wavelength" in check_window_pairs(right).message


def test_window_pairs_slips_are_named():
    g = GEMMA3_GLOBAL
    no_factor = nb11.window_pairs(g["head_dim"], g["base"], 1.0, g["window"])
    assert "linear factor" in check_window_pairs(no_factor).message
    assert (
        "2π"
        in check_window_pairs(nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"], turn=1.0)).message
    )
    assert "sliding-window" in check_window_pairs(nb11.window_pairs(g["head_dim"], 10_000.0, 1.0, g["window"])).message
    right = nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"])
    assert "features" in check_window_pairs(2 * right).message
    assert "run from pair 0" in check_window_pairs([1, 2, 3]).message
    assert "between 0 and 128" in check_window_pairs(500).message
    for junk in JUNK + [right + 0.5, [0, 1.5]]:
        feedback = check_window_pairs(junk)
        assert not feedback.ok and feedback.message


def test_window_pairs_format_messages_reach_the_student():
    right = nb11.window_pairs(**{k: GEMMA3_GLOBAL[k] for k in ("head_dim", "base", "factor", "window")})
    assert "non-integer 28.5" in check_window_pairs(28.5).message
    assert "text" in check_window_pairs("28").message
    g = GEMMA3_GLOBAL
    turns = (
        g["window"]
        * LayerRope(g["head_dim"], base=g["base"], scaling={"rope_type": "linear", "factor": 8.0}).frequencies()
        / (2 * math.pi)
    )
    mask = turns >= 1
    for form in (mask, mask.numpy(), mask.tolist()):
        message = check_window_pairs(form).message
        assert "mask of 128 pairs" in message and "sum" in message, form
    assert check_window_pairs(torch.where(mask)).ok and check_window_pairs(np.nonzero(mask.numpy())).ok
    assert check_window_pairs(mask.sum()).ok
    message = check_window_pairs([right]).message
    assert "one pair index" in message and "plain number" in message


def test_window_pairs_56_names_every_slip_that_gives_it():
    g = GEMMA3_GLOBAL
    right = nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"])
    base_divided = nb11.window_pairs(g["head_dim"], g["base"] / g["factor"], 1.0, g["window"])
    half_exponent = nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"], step=1.0)
    assert base_divided == half_exponent == 2 * right == 56
    message = check_window_pairs(56).message
    assert "not the base" in message and "−2i/head_dim" in message and "features" in message


# --------------------------------------------------------------------------- exercise 3


def _fixed(q_nope, q_rope, latent, k_rope, w_uk, positions):
    q_latent = q_nope @ w_uk  # W_UK absorbed into the query
    return q_latent @ latent.mT + apply_rope(q_rope, positions) @ apply_rope(k_rope, positions).mT


def _buggy(q_nope, q_rope, latent, k_rope, w_uk, positions):
    return (q_nope @ w_uk) @ apply_rope(latent, positions).mT + apply_rope(q_rope, positions) @ apply_rope(
        k_rope, positions
    ).mT


def _explicit_keys(q_nope, q_rope, latent, k_rope, w_uk, positions):
    """The same scores without absorption: keys formed per head, then the dot product."""
    k_nope = torch.einsum("hdr,sr->hsd", w_uk, latent)
    q = torch.cat((q_nope, apply_rope(q_rope, positions)), -1)
    k = torch.cat((k_nope, apply_rope(k_rope, positions).expand(q.shape[0], -1, -1)), -1)
    return q @ k.mT


def test_mla_scores_right_answers_pass():
    assert check_mla_scores(_fixed).ok
    assert check_mla_scores(_explicit_keys).ok  # absorbed or not, the same scores
    assert check_mla_scores(nb11.mla_scores).ok
    assert check_mla_scores(lambda *a: _fixed(*a).float()).ok


def test_mla_scores_probes_positions_with_gaps():
    """A RoPE score depends on m − n only: positions 0, 1, 2, … shifted would let a function that ignores them pass."""
    for seed, seq in ((0, 5), (1, 9), (2, 12)):
        positions = nb11._mla_inputs(1, seq, 2, 2, 2, seed)[-1]
        steps = positions.diff()
        assert (steps >= 1).all() and (steps > 1).any(), positions


def test_mla_scores_slips_are_named():
    def dropped(q_nope, q_rope, latent, k_rope, w_uk, positions):  # rotates by 0, 1, 2, … whatever it is given
        return (q_nope @ w_uk) @ latent.mT + apply_rope(q_rope) @ apply_rope(k_rope).mT

    message = check_mla_scores(dropped).message
    assert not check_mla_scores(dropped).ok and "`positions` passed in" in message

    def both_turned(q_nope, q_rope, latent, k_rope, w_uk, positions):  # the query latent turned too
        nope = apply_rope(q_nope @ w_uk, positions) @ apply_rope(latent, positions).mT
        return nope + apply_rope(q_rope, positions) @ apply_rope(k_rope, positions).mT

    message = check_mla_scores(both_turned).message
    assert "section 3" in message and "all the heads that share it" in message

    def in_float32(*args):
        return _fixed(*(a.float() if a.is_floating_point() else a for a in args))

    assert "compute in" in check_mla_scores(in_float32).message
    assert "float32 precision" in check_mla_scores(in_float32).message
    assert "as given" in check_mla_scores(_buggy).message
    no_rope = lambda q_nope, q_rope, latent, k_rope, w_uk, positions: (q_nope @ w_uk) @ latent.mT  # noqa: E731
    assert "rotated term is missing" in check_mla_scores(no_rope).message
    unrotated = lambda q_nope, q_rope, latent, k_rope, w_uk, positions: (  # noqa: E731
        (q_nope @ w_uk) @ latent.mT + q_rope @ k_rope.mT
    )
    assert "not rotated" in check_mla_scores(unrotated).message
    assert "[2, 5, 5]" in check_mla_scores(lambda *a: torch.zeros(3)).message

    def causal(*args):
        scores = _fixed(*args)
        seq = scores.shape[-1]
        return scores.masked_fill(torch.ones(seq, seq, dtype=torch.bool).triu(1), -math.inf)

    assert "no causal mask" in check_mla_scores(causal).message
    assert "1/√d" in check_mla_scores(lambda *a: _fixed(*a) / math.sqrt(a[0].shape[-1] + a[1].shape[-1])).message

    def only_q_turned(q_nope, q_rope, latent, k_rope, w_uk, positions):
        return (q_nope @ w_uk) @ latent.mT + apply_rope(q_rope, positions) @ k_rope.mT

    assert "Only one side" in check_mla_scores(only_q_turned).message

    def whole_key_turned(q_nope, q_rope, latent, k_rope, w_uk, positions):  # section 3's misconception
        k_nope = latent @ w_uk.mT  # [heads, seq, nope]
        nope = apply_rope(q_nope, positions) @ apply_rope(k_nope, positions).mT
        return nope + apply_rope(q_rope, positions) @ apply_rope(k_rope, positions).mT

    assert "turns the whole key" in check_mla_scores(whole_key_turned).message

    def hard_coded(q_nope, *rest):  # right for the first size only would still fail the others
        if q_nope.shape[0] == 2:
            return _fixed(q_nope, *rest)
        return torch.zeros(q_nope.shape[0], q_nope.shape[1], q_nope.shape[1], dtype=torch.float64)

    assert not check_mla_scores(hard_coded).ok


@pytest.mark.parametrize(
    "fn",
    [None, ..., 3, "f", lambda *a: None, lambda *a: 1 / 0, lambda *a: torch.full((2, 5, 5), math.nan)],
)
def test_mla_scores_junk_gets_feedback(fn):
    feedback = check_mla_scores(fn)
    assert not feedback.ok and feedback.message


def test_the_stub_is_not_answered_yet():
    def stub(*args):
        raise NotImplementedError

    assert "Not answered" in check_mla_scores(stub).message


# --------------------------------------------------------------------------- review 3 of the core-path cut


def test_image_text_ids_with_a_batch_dimension_is_named():
    """get_rope_index returns [3, batch, seq]: a [3, 1, 12] answer is told to drop the batch dimension."""
    right = mrope_position_ids(IMAGE_TEXT["segments"], spatial_merge_size=2)
    for form in (right[:, None, :], right[:, None, :].tolist(), right[:, None, :].numpy()):
        feedback = check_image_text_ids(form)
        assert not feedback.ok and "batch dimension" in feedback.message, type(form)


def test_window_pairs_copied_counts_and_the_complement_are_named():
    g = GEMMA3_GLOBAL
    right = nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"])
    # section 5's printed counts: over the whole context with factor 8, none and 4, and over the 32 K of pre-training
    copied = {nb11.window_pairs(g["head_dim"], g["base"], f, 131_072) for f in (8.0, 1.0, 4.0)}
    copied.add(nb11.window_pairs(g["head_dim"], g["base"], 1.0, 32_768))
    assert copied == {73, 93, 80}
    for value in copied:
        message = check_window_pairs(value).message
        assert "longer span" in message and "window" in message, value
    assert "do not turn" in check_window_pairs(g["head_dim"] // 2 - right).message


def test_window_pairs_a_set_of_indices_passes():
    g = GEMMA3_GLOBAL
    right = nb11.window_pairs(g["head_dim"], g["base"], g["factor"], g["window"])
    assert check_window_pairs(set(range(right))).ok
    assert check_window_pairs(frozenset(range(right))).ok
    assert "run from pair 0" in check_window_pairs({1, 2, 3}).message


def test_window_pairs_passed_message_agrees_with_section_5():
    """The pairs that turn less than once still order distances in the window (section 5), coarsely."""
    message = check_window_pairs(28).message
    assert "coarsely" in message and "almost no position" not in message


def test_mla_scores_zeroed_mask_and_half_layout_are_named():
    def tril(*args):  # a causal "mask" written as torch.tril(scores): zeros above the diagonal
        return torch.tril(_fixed(*args))

    assert "no causal mask" in check_mla_scores(tril).message

    def half(q_nope, q_rope, latent, k_rope, w_uk, positions):  # the other pair layout, on both sides
        rope = apply_rope(q_rope, positions, layout="half") @ apply_rope(k_rope, positions, layout="half").mT
        return (q_nope @ w_uk) @ latent.mT + rope

    feedback = check_mla_scores(half)
    assert not feedback.ok and "'half'" in feedback.message
    assert "once, for all keys" in check_mla_scores(_fixed).message


def test_image_text_ids_review_4_slips_are_named():
    right = _by_hand()
    from_three = [r[:4] + [v - 1 for v in r[4:10]] + r[10:] for r in right]  # the image starts at the last text id
    assert "next free position, 4" in check_image_text_ids(from_three).message
    for transposed in (torch.tensor(right).T, torch.tensor(right).T.tolist(), np.array(right).T):
        assert "transpose" in check_image_text_ids(transposed).message
    for batch_first in (torch.tensor([right]), [right]):  # [1, 3, seq]
        assert "drop the batch" in check_image_text_ids(batch_first).message
    assert "height and width rows are swapped" in check_image_text_ids([right[0], right[2], right[1]]).message
    assert not check_image_text_ids([[0, 1, 2]]).ok  # one row of three numbers is not a batch dimension
    assert "drop the batch" not in check_image_text_ids([[0, 1, 2]]).message


def test_window_pairs_review_4_forms_and_slips():
    g = GEMMA3_GLOBAL
    theta = g["base"] ** (-torch.arange(0, g["head_dim"], 2, dtype=torch.float64) / g["head_dim"]) / g["factor"]
    turns = g["window"] * theta / (2 * math.pi)
    assert check_window_pairs(torch.nonzero(turns >= 1)).ok  # [28, 1]
    assert check_window_pairs(np.argwhere((turns >= 1).numpy())).ok
    for mask in ((turns >= 1).int(), (turns >= 1).long(), (turns >= 1).int().tolist()):
        assert "mask" in check_window_pairs(mask).message, mask
    times = nb11.window_pairs(g["head_dim"], g["base"], 1 / g["factor"], g["window"])
    assert times == 67
    message = check_window_pairs(times).message
    assert "divides every θ_i by 8" in message and "/factor" not in message


def test_mla_scores_transposed_scores_are_named():
    def rope_transposed(q_nope, q_rope, latent, k_rope, w_uk, positions):  # R(k)·R(q)ᵀ
        return (q_nope @ w_uk) @ latent.mT + apply_rope(k_rope, positions) @ apply_rope(q_rope, positions).mT

    def all_transposed(*args):
        return _fixed(*args).mT

    for fn in (rope_transposed, all_transposed):
        assert "transposed" in check_mla_scores(fn).message


# --------------------------------------------------------------------------- review 5


def test_image_text_ids_batch_dimension_names_the_students_own_shape():
    """A batch-first [1, 3, 12] answer is not told it is [3, 1, seq]: the message names the shape it has."""
    right = mrope_position_ids(IMAGE_TEXT["segments"], spatial_merge_size=2)
    seq = right.shape[1]
    for form in (right[None], right[None].tolist(), right[None].numpy()):
        message = check_image_text_ids(form).message
        assert f"[1, 3, {seq}]" in message and "[3, 1," not in message, type(form)
    for form in (right[:, None, :], right[:, None, :].tolist(), list(right[:, None, :].numpy())):
        message = check_image_text_ids(form).message
        assert f"[3, 1, {seq}]" in message and "[1, 3," not in message, type(form)


def test_mla_scores_rotate_both_hint_is_qualified():
    """The single-M_n claim holds for weights in general position only (8 copies of one head: an M_n exists)."""

    def both_turned(q_nope, q_rope, latent, k_rope, w_uk, positions):
        nope = apply_rope(q_nope @ w_uk, positions) @ apply_rope(latent, positions).mT
        return nope + apply_rope(q_rope, positions) @ apply_rope(k_rope, positions).mT

    assert "for weights in general position" in check_mla_scores(both_turned).message
