"""Checkers of notebook 07 (rotate_half, the half layout, the score prediction):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import torch

from pe_lessons.baselines import rope_complex_reference
from pe_lessons.rotary import to_interleaved_layout


def perm(head_dim):
    """P = [0, 2, …, d-2, 1, 3, …, d-1] written out by hand."""
    return list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))


def test_exercise_checkers_accept_answers_and_name_mistakes():
    from pe_lessons.exercises.nb07 import check_rotate_half, check_score_prediction, check_to_half_layout

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), -1)

    assert check_rotate_half(rotate_half).ok
    assert not check_rotate_half(None).ok and "Not answered" in check_rotate_half(None).message
    assert "Sign flipped" in check_rotate_half(lambda x: torch.cat((x[..., 4:], -x[..., :4]), -1)).message
    interleaved_turn = lambda x: torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)  # noqa: E731
    assert "adjacent pairs (2i, 2i+1)" in check_rotate_half(interleaved_turn).message

    assert check_to_half_layout(lambda x: x[..., perm(x.shape[-1])]).ok
    assert "inverse permutation" in check_to_half_layout(to_interleaved_layout).message
    assert "Nothing moved" in check_to_half_layout(lambda x: x).message

    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    right = float(rope_complex_reference(q[None], [10]) @ k.double())
    assert check_score_prediction(right, q, k, 5000, 4990).ok
    assert "without any rotation" in check_score_prediction(float(q @ k), q, k, 5000, 4990).message
    assert (
        "Offset sign"
        in check_score_prediction(float(rope_complex_reference(q[None], [-10]) @ k.double()), q, k, 5000, 4990).message
    )


def _convert(W, heads):
    from pe_lessons.rotary import to_half_layout

    return to_half_layout(W.view(heads, W.shape[0] // heads, W.shape[1]), dim=1).reshape(W.shape)


def test_check_weight_conversion_finds_the_per_head_bug():
    from pe_lessons.exercises.nb07 import check_weight_conversion
    from pe_lessons.rotary import to_half_layout

    assert check_weight_conversion(_convert).ok
    whole = check_weight_conversion(lambda W, heads: W[to_half_layout(torch.arange(W.shape[0]))])
    assert not whole.ok and "one head" in whole.message
    inverse = check_weight_conversion(
        lambda W, heads: to_interleaved_layout(W.view(heads, -1, W.shape[1]), dim=1).reshape(W.shape)
    )
    assert "inverse" in inverse.message
    assert "columns" in check_weight_conversion(lambda W, heads: to_half_layout(W, dim=1)).message
    assert "nothing moved" in check_weight_conversion(lambda W, heads: W).message
    hard_coded = check_weight_conversion(lambda W, heads: _convert(W, 2))  # written for 2 heads only
    assert not hard_coded.ok and "heads=4" in hard_coded.message
    assert "Not answered" in check_weight_conversion(None).message
    assert not check_weight_conversion(lambda W, heads: W.tolist()).ok


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
    assert not float32_angles.ok and "float64" in float32_angles.message
    swapped = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d, base)[::-1])
    assert "swapped" in swapped.message
    ignores_base = check_angle_fix(lambda p, d, base=1e4: _cos_sin(p, d))
    assert not ignores_base.ok and "base=500000" in ignores_base.message
    repeated = check_angle_fix(lambda p, d, base=1e4: tuple(t.repeat(1, 2) for t in _cos_sin(p, d, base)))
    assert "one column per pair" in repeated.message
    as_float64 = check_angle_fix(lambda p, d, base=1e4: tuple(t.double() for t in _cos_sin(p, d, base)))
    assert not as_float64.ok and "float32" in as_float64.message
    assert not torch.is_autocast_enabled("cpu")  # the checker's autocast does not leak
    assert "Not answered" in check_angle_fix(None).message


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
