"""Checkers of notebook 08 (one-pass RoPE, conversion traffic, one graph for the compiler):
right answers pass in any ordinary form, the usual slips are named, the hints never give the answer."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from pe_lessons.baselines import rotate_half
from pe_lessons.exercises import nb08


def rope_stack(x, cos, sin):  # the notebook's slow version: right values, 4.4x the compulsory bytes
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


def one_pass_complex(x, cos, sin):
    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2)


def one_pass_matmul(x, cos, sin):  # each pair times its 2x2 rotation: one batched matrix product
    rotation = torch.stack((cos, sin, -sin, cos), dim=-1).unflatten(-1, (2, 2))
    return (x.unflatten(-1, (-1, 1, 2)) @ rotation).flatten(-3)


def test_one_pass_rope_accepts_one_pass_and_names_the_slips():
    check = nb08.check_one_pass_rope
    assert check(one_pass_complex).ok and check(one_pass_matmul).ok
    slow = check(rope_stack)
    assert not slow.ok and "right values" in slow.message and "4.42×" in slow.message and "budget" in slow.message
    assert "view_as_complex" not in slow.message and "complex" not in slow.message  # a hint, not the answer
    wrong_way = check(lambda x, c, s: one_pass_complex(x, c, -s))
    assert not wrong_way.ok and "wrong way" in wrong_way.message

    def half_pairs(x, cos, sin):  # pairs (i, i + head_dim/2): the other layout
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    half = check(half_pairs)
    assert not half.ok and "half layout" in half.message

    def in_place(x, cos, sin):
        pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)))
        pairs *= torch.complex(cos, sin)
        return x

    assert "in place" in check(in_place).message
    assert "float32" in check(lambda x, c, s: one_pass_complex(x, c, s).double()).message
    assert "unrotated" in check(lambda x, c, s: x.clone()).message
    assert "must be a function" in check(3).message and "Not answered" in check(None).message


def test_one_pass_rope_probes_several_head_sizes_and_uses_the_given_tables():
    def hard_coded(x, cos, sin):  # right for head_dim 8 only
        if x.shape[-1] != 8:
            return x.clone()
        return one_pass_complex(x, cos, sin)

    assert not nb08.check_one_pass_rope(hard_coded).ok

    def own_table(x, cos, sin):  # ignores the given cos/sin: the checker's tables are random angles
        from pe_lessons.rotary import apply_rope

        return apply_rope(x)

    assert not nb08.check_one_pass_rope(own_table).ok


def _numpy_rotation(x, cos, sin):
    a, c, s = x.numpy(), cos.numpy(), sin.numpy()
    x1, x2 = a[..., 0::2], a[..., 1::2]
    return np.stack((x1 * c - x2 * s, x1 * s + x2 * c), axis=-1).reshape(a.shape)


def test_one_pass_rope_needs_eager_torch_operations():
    feedback = nb08.check_one_pass_rope(lambda x, c, s: torch.from_numpy(_numpy_rotation(x, c, s)))
    assert not feedback.ok and "outside torch" in feedback.message
    feedback = nb08.check_one_pass_rope(lambda x, c, s: torch.tensor(_numpy_rotation(x, c, s).tolist()))
    assert not feedback.ok and "torch.tensor" in feedback.message


def test_check_conversion_traffic():
    check = nb08.check_conversion_traffic
    assert check(9).ok and check(9.0).ok and check(torch.tensor(9.0)).ok
    assert check(5, low_bytes=2, work_bytes=4).ok  # bf16 through float32: 20 bytes for 4
    assert "float32 working copy" in check(5).message and "rotation pass" in check(5).message  # both give 5 here
    assert "rotation pass" in check(5, low_bytes=2, work_bytes=4).message or check(5, low_bytes=2, work_bytes=4).ok
    assert "kernels" in check(3).message
    assert "per element" in check(36).message
    assert "compulsory" in check(2.25).message
    assert "Not answered" in check(None).message
    assert "working dtype's size" in check(8).message and "rotation pass alone" in check(4).message
    assert "one direction" in check(4.5).message
    for wrong in (6, 7, 18, 1, 8, 4, 4.5, 5, 2.25, 36):
        feedback = check(wrong)
        assert not feedback.ok and "9" not in feedback.message  # the hint never gives the answer
    with pytest.raises(ValueError):
        check(9, low_bytes=4, work_bytes=2)


def test_check_conversion_traffic_accepts_numpy_numbers():
    np = pytest.importorskip("numpy")
    assert nb08.check_conversion_traffic(np.float32(9.0)).ok and nb08.check_conversion_traffic(np.int64(9)).ok
    assert not nb08.check_conversion_traffic(np.bool_(True)).ok


def rope_at(x, positions, base=10000.0):  # the notebook's function: right values, a graph break
    head_dim = x.shape[-1]
    n = int(positions.max()) + 1
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)[positions]
    return x * angles.cos().float() + rotate_half(x) * angles.sin().float()


def rope_at_fixed_table(x, positions, base=10000.0):
    head_dim = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.arange(nb08.MAX_POSITION, dtype=torch.float64)[:, None] * inv_freq
    angles = torch.cat((angles, angles), dim=-1)[positions]
    return x * angles.cos().float() + rotate_half(x) * angles.sin().float()


def rope_at_direct(x, positions, base=10000.0):  # float32 angles, as Hugging Face computes them
    head_dim = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = positions[:, None].float() * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    return x * angles.cos() + rotate_half(x) * angles.sin()


def test_one_graph_rope_accepts_both_fixes_and_names_the_break(caplog):
    check = nb08.check_one_graph_rope
    assert check(rope_at_fixed_table).ok and check(rope_at_direct).ok
    with caplog.at_level(logging.WARNING):
        broken = check(rope_at)
    assert not broken.ok and "2 graph(s)" in broken.message and "item()" in broken.message
    assert not [r for r in caplog.records if r.name.startswith("torch._dynamo")]  # the compiler kept quiet

    def branch_on_values(x, positions):
        if (positions < 0).any():
            raise ValueError("negative position")
        return rope_at_direct(x, positions)

    assert "break" in check(branch_on_values).message

    def via_list(x, positions):  # one graph, but specialised on the values: compiled again for new positions
        return rope_at_direct(x, torch.tensor(positions.tolist()))

    feedback = check(via_list)
    assert not feedback.ok and "compiled it again" in feedback.message


def test_one_graph_rope_checks_the_values_first():
    check = nb08.check_one_graph_rope
    rows = check(lambda x, p: rope_at_direct(x, torch.arange(len(p))))
    assert not rows.ok and "positions you are given" in rows.message
    assert "wrong values" in check(lambda x, p: rope_at_direct(x, p) * 2).message
    assert "float32" in check(lambda x, p: rope_at_direct(x, p).double()).message
    assert "my_rope_at must be a function" in check("rope").message and "Not answered" in check(...).message
