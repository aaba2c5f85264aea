"""Checkers of notebook 07 (the weight conversion, the first wrong bf16 position, the angle fix, the turn base):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import torch

from pe_lessons.rotary import to_interleaved_layout


def perm(head_dim):
    """P = [0, 2, …, d-2, 1, 3, …, d-1] written out by hand."""
    return list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))


def _export(W, b, heads):
    """The right answer: half → interleaved, per head, for the weight's rows and the bias."""
    return _per_head(W, heads, to_interleaved_layout), _per_head(b, heads, to_interleaved_layout)


def _per_head(t, heads, fn):
    return fn(t.reshape(heads, t.shape[0] // heads, *t.shape[1:]), dim=1).reshape(t.shape)


def test_check_weight_conversion_finds_the_direction_and_the_bias():
    from pe_lessons.exercises.nb07 import check_weight_conversion
    from pe_lessons.rotary import to_half_layout

    assert check_weight_conversion(_export).ok
    assert check_weight_conversion(lambda W, b, heads: list(_export(W, b, heads))).ok

    # the same answer with the permutation written out by hand, as an index
    def by_hand(W, b, heads):
        inverse = torch.tensor(perm(W.shape[0] // heads)).argsort()
        return tuple(t.reshape(heads, -1, *t.shape[1:])[:, inverse].reshape(t.shape) for t in (W, b))

    assert check_weight_conversion(by_hand).ok
    forward = check_weight_conversion(
        lambda W, b, heads: (_per_head(W, heads, to_half_layout), _per_head(b, heads, to_half_layout))
    )
    assert not forward.ok and "other way" in forward.message
    bias_kept = check_weight_conversion(lambda W, b, heads: (_export(W, b, heads)[0], b))
    assert not bias_kept.ok and "bias is as it was" in bias_kept.message
    whole = check_weight_conversion(lambda W, b, heads: (W[to_interleaved_layout(torch.arange(W.shape[0]))], b))
    assert not whole.ok and "one head" in whole.message
    columns = check_weight_conversion(lambda W, b, heads: (to_interleaved_layout(W, dim=1), b))
    assert "columns" in columns.message
    assert "nothing moved" in check_weight_conversion(lambda W, b, heads: (W, b)).message
    hard_coded = check_weight_conversion(lambda W, b, heads: _export(W, b, 2))  # written for 2 heads only
    assert not hard_coded.ok and "heads=4" in hard_coded.message
    assert "Not answered" in check_weight_conversion(None).message
    assert "two tensors" in check_weight_conversion(lambda W, b, heads: W).message


def _cos_sin(positions, head_dim, base=10000.0, dtype=torch.float64, matmul=False):
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=dtype) / head_dim)
    angles = (inv[:, None] @ positions[None, :].to(dtype)).T if matmul else positions.to(dtype)[:, None] * inv
    return angles.cos().float(), angles.sin().float()


def test_check_angle_fix_runs_under_autocast_and_names_the_bug():
    from pe_lessons.exercises.nb07 import check_angle_fix

    assert check_angle_fix(_cos_sin).ok
    autocast_bug = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d, base, torch.float32, matmul=True))
    assert not autocast_bug.ok and "autocast" in autocast_bug.message
    float32_angles = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d, base, torch.float32))
    assert not float32_angles.ok and "significant digits" in float32_angles.message
    assert "float64" not in float32_angles.message  # a hint, not the answer
    swapped = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d, base)[::-1])
    assert "swapped" in swapped.message
    ignores_base = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d))
    assert not ignores_base.ok and "base=500000" in ignores_base.message
    repeated = check_angle_fix(lambda p, d, base=1e4: tuple(t.repeat(1, 2) for t in _cos_sin(p, d, base)))
    assert "one column per pair" in repeated.message
    as_float64 = check_angle_fix(lambda p, d, base=1e4: tuple(t.double() for t in _cos_sin(p, d, base)))
    assert not as_float64.ok and "float32" in as_float64.message and "float64, float64" in as_float64.message
    assert not torch.is_autocast_enabled("cpu")  # the checker's autocast does not leak
    assert "Not answered" in check_angle_fix(None).message


def test_check_angle_fix_accepts_numpy_float32_and_names_other_types():
    import numpy as np

    from pe_lessons.exercises.nb07 import check_angle_fix

    as_numpy = check_angle_fix(lambda p, d, base=1e4: tuple(t.numpy() for t in _cos_sin(p, d, base)))
    assert as_numpy.ok, as_numpy.message
    as_list = check_angle_fix(lambda p, d, base=1e4: [t.numpy() for t in _cos_sin(p, d, base)])
    assert as_list.ok, as_list.message
    numpy64 = check_angle_fix(lambda p, d, base=1e4: tuple(t.numpy().astype(np.float64) for t in _cos_sin(p, d, base)))
    assert not numpy64.ok and "float64, float64" in numpy64.message and "None" not in numpy64.message

    def numpy_elementwise_float32(positions, head_dim, base=10000.0):  # the plausible fix, in NumPy float32
        inv = (base ** (-np.arange(0, head_dim, 2) / head_dim)).astype(np.float32)
        angles = positions.numpy().astype(np.float32)[:, None] * inv
        return np.cos(angles), np.sin(angles)

    feedback = check_angle_fix(numpy_elementwise_float32)
    assert not feedback.ok and "significant digits" in feedback.message and "float64" not in feedback.message


def test_check_turn_base_probes_several_settings():
    import math

    from pe_lessons.exercises.nb07 import check_turn_base
    from pe_lessons.rotary import rope_frequencies

    def turn_base(head_dim, context, pair):
        return (context / (2 * math.pi)) ** (head_dim / (2 * pair))

    base = turn_base(128, 8192, 35)  # pair 35 of a Llama-3-sized head turns exactly once over 8192 positions
    assert abs(2 * math.pi / rope_frequencies(128, base)[35].item() - 8192) < 1e-6
    assert check_turn_base(turn_base).ok
    assert check_turn_base(lambda *a: torch.tensor(turn_base(*a), dtype=torch.float64)).ok
    assert "2π" in check_turn_base(lambda d, c, i: c ** (d / (2 * i))).message
    assert "upside down" in check_turn_base(lambda d, c, i: (c / (2 * math.pi)) ** (2 * i / d)).message
    assert "off by one" in check_turn_base(lambda d, c, i: turn_base(d, c, i + 1)).message
    assert "2i/head_dim" in check_turn_base(lambda d, c, i: (c / (2 * math.pi)) ** (d / i)).message
    hard_coded = check_turn_base(lambda d, c, i: turn_base(128, 8192, 35))
    assert not hard_coded.ok and "(64, 4096, 20)" in hard_coded.message
    assert "Not answered" in check_turn_base(None).message
    assert not check_turn_base(lambda d, c, i: "big").ok


def test_turn_base_names_a_rounded_base():
    import math

    from pe_lessons.exercises.nb07 import check_turn_base

    feedback = check_turn_base(lambda d, c, i: round((c / (2 * math.pi)) ** (d / (2 * i))))
    assert not feedback.ok and "rounded" in feedback.message


def test_angle_fix_tells_a_formula_slip_from_a_precision_bug():
    from pe_lessons.exercises.nb07 import check_angle_fix

    def fixed_base(positions, head_dim, base=10000.0):  # ignores base
        angles = positions.double()[:, None] * 10000.0 ** (
            -torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
        )
        return angles.cos().float(), angles.sin().float()

    def no_factor_two(positions, head_dim, base=10000.0):
        angles = positions.double()[:, None] * base ** (-torch.arange(head_dim // 2, dtype=torch.float64) / head_dim)
        return angles.cos().float(), angles.sin().float()

    def as_matmul(positions, head_dim, base=10000.0):  # the bug of the exercise
        inv_freq = base ** (-torch.arange(0, head_dim, 2).float() / head_dim)
        angles = (inv_freq[:, None] @ positions[None, :].float()).T
        return angles.cos(), angles.sin()

    for slip in (fixed_base, no_factor_two):
        feedback = check_angle_fix(slip)
        assert not feedback.ok and "frequencies" in feedback.message, feedback
    feedback = check_angle_fix(as_matmul)
    assert not feedback.ok and "autocast" in feedback.message and "elementwise" not in feedback.message


def _pair0_angle_under_autocast(position):
    """Pair 0's angle (θ₀ = 1) as the notebook's buggy matmul computes it under CPU autocast to bfloat16."""
    inv_freq = 10000.0 ** (-torch.arange(0, 8, 2).float() / 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        angles = (inv_freq[:, None] @ torch.tensor([position]).float()[None, :]).T
    return angles[0, 0].item()


def test_check_first_wrong_position_matches_the_buggy_matmul_and_accepts_any_form():
    import numpy as np

    from pe_lessons.exercises.nb07 import check_first_wrong_position

    wrong = [p for p in range(1, 600) if _pair0_angle_under_autocast(p) != p]
    first, error = wrong[0], _pair0_angle_under_autocast(wrong[0]) - wrong[0]  # what the code really does
    for form in (first, float(first), np.int64(first), np.float32(first), torch.tensor(first), torch.tensor([first])):
        for off in (error, abs(error), np.float64(error), torch.tensor(abs(error)), int(abs(error))):
            feedback = check_first_wrong_position(form, off)
            assert feedback.ok, (form, off, feedback)


def test_check_first_wrong_position_hints_without_giving_the_answer():
    from pe_lessons.exercises.nb07 import check_first_wrong_position

    hints = {
        128: "8 significant bits including the leading one",
        129: "8 significant bits including the leading one",
        2049: "float16's 11",
        16777217: "float32",
        256: "still held exactly",
        100: "still held exactly",
        258: "past the first wrong one",
        5000: "past the first wrong one",
    }
    for position, hint in hints.items():
        feedback = check_first_wrong_position(position, 1.0)
        assert not feedback.ok and hint in feedback.message, (position, feedback)
        assert "257" not in feedback.message
    for error, hint in ((0.0, "differs"), (2.0, "neighbours"), (0.5, "neighbours")):
        feedback = check_first_wrong_position(257, error)
        assert not feedback.ok and hint in feedback.message, (error, feedback)
    assert "Not answered" in check_first_wrong_position(None, None).message
    assert "integer" in check_first_wrong_position(257.5, 1.0).message
    assert "number" in check_first_wrong_position(257, "one").message
