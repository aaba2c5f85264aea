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
