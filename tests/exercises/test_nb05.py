"""Checkers of notebook 05 (the pair block, the concatenated-layout M_k, the shift, the return offset):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import pytest
import torch

from pe_lessons.exercises.nb05 import check_concat_offset, check_pair_block, check_return_offset, check_shift
from pe_lessons.offsets import offset_matrix


def _block(angle):
    c, s = math.cos(angle), math.sin(angle)
    return [[c, s], [-s, c]]


def test_check_pair_block_feedback():
    b = 3 * 10000 ** (-2 / 8)
    c, s = math.cos(b), math.sin(b)
    assert check_pair_block(_block(b)).ok
    assert check_pair_block(torch.tensor(_block(b))).ok
    assert "Not answered" in check_pair_block(None).message
    assert "transpose" in check_pair_block([[c, -s], [s, c]]).message
    assert "sign" in check_pair_block([[c, s], [s, c]]).message
    assert "swapped" in check_pair_block([[s, c], [-c, s]]).message
    assert "degrees" in check_pair_block(_block(math.radians(b))).message
    assert "column index" in check_pair_block(_block(3 * 10000 ** (-4 / 8))).message
    assert "pair 0" in check_pair_block(_block(3.0)).message
    assert "2×2" in check_pair_block([1, 2, 3]).message
    assert not check_pair_block([[1, 0], [0, 1]]).ok


def _shift(p, k, sign=1):
    out = torch.empty_like(p)
    out[0::2] = p[0::2] * k[1::2] + sign * p[1::2] * k[0::2]
    out[1::2] = p[1::2] * k[1::2] - sign * p[0::2] * k[0::2]
    return out


def test_check_shift_feedback_and_trig_guard():
    assert check_shift(_shift).ok
    assert "PE(pos − k)" in check_shift(lambda p, k: _shift(p, k, -1)).message
    assert "added the rows" in check_shift(lambda p, k: p + k).message
    assert "multiplied" in check_shift(lambda p, k: p * k).message
    assert "calls torch.sin" in check_shift(lambda p, k: torch.sin(p)).message
    assert "calls math.cos" in check_shift(lambda p, k: [math.cos(0.0)] * 8).message
    assert "calls x.cos" in check_shift(lambda p, k: p.cos()).message
    assert math.sin(0.5) == pytest.approx(0.4794255386) and torch.cos(torch.tensor(0.0)).item() == 1.0  # restored
    assert "swapped" in check_shift(lambda p, k: _shift(p, k)[[1, 0, 3, 2, 5, 4, 7, 6]]).message
    assert "Not answered" in check_shift(None).message

    def todo(p, k):
        raise NotImplementedError

    assert "Not answered" in check_shift(todo).message
    assert "4 numbers" in check_shift(lambda p, k: p[:4]).message


def _through_angles(p, k):
    angle = torch.atan2(p[0::2], p[1::2]) + torch.atan2(k[0::2], k[1::2])
    return torch.stack((angle.sin(), angle.cos()), -1).flatten()


def _complex_exp(p, k):
    z = torch.exp(1j * (torch.angle(torch.complex(p[1::2], p[0::2])) + torch.angle(torch.complex(k[1::2], k[0::2]))))
    return torch.stack((z.imag, z.real), -1).flatten()


def _complex_product(p, k):  # products and sums in complex form: allowed
    z = torch.complex(p[1::2], p[0::2]) * torch.complex(k[1::2], k[0::2])
    return torch.stack((z.imag, z.real), -1).flatten()


def _numpy_arctan(p, k):
    import numpy as np

    a = np.arctan2(p[0::2].numpy(), p[1::2].numpy()) + np.arctan2(k[0::2].numpy(), k[1::2].numpy())
    return torch.from_numpy(np.stack((np.sin(a), np.cos(a)), -1).reshape(-1))


def test_check_shift_rejects_the_detours_through_the_angle():
    assert "torch.atan2" in check_shift(_through_angles).message
    assert "angle" in check_shift(_complex_exp).message and not check_shift(_complex_exp).ok
    assert "numpy.arctan2" in check_shift(_numpy_arctan).message
    assert check_shift(_complex_product).ok
    assert torch.atan2(torch.tensor(1.0), torch.tensor(1.0)).item() == pytest.approx(math.pi / 4)  # restored
    assert torch.exp(torch.tensor(0.0)).item() == 1.0


def test_check_shift_probes_several_widths():
    def only_width_8(p, k):
        if p.numel() != 8:
            return torch.zeros_like(p)
        return _shift(p, k)

    feedback = check_shift(only_width_8)
    assert not feedback.ok and "d_model = 2" in feedback.message
    assert "width" in check_shift(lambda p, k: _shift(p[:8], k[:8]) if p.numel() > 8 else _shift(p, k)).message


def _concat(k, d_model, base=10000.0):
    perm = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])
    return offset_matrix(k, d_model, base)[perm][:, perm]


def test_check_concat_offset():
    assert check_concat_offset(_concat).ok
    assert check_concat_offset(lambda k, d, base=1e4: _concat(k, d, base).tolist()).ok  # a nested list is fine
    assert "interleaved" in check_concat_offset(lambda k, d, base=1e4: offset_matrix(k, d, base)).message
    assert "backwards" in check_concat_offset(lambda k, d, base=1e4: _concat(-k, d, base)).message
    assert "signs" in check_concat_offset(lambda k, d, base=1e4: _concat(k, d, base).abs()).message
    hard_coded = check_concat_offset(lambda k, d, base=1e4: _concat(k, 8, base))  # one width only
    assert not hard_coded.ok and "[2, 2]" in hard_coded.message
    ignores_base = check_concat_offset(lambda k, d, base=1e4: _concat(k, d))
    assert not ignores_base.ok and "base=100" in ignores_base.message
    assert "Not answered" in check_concat_offset(None).message

    def todo(k, d_model, base=10000.0):
        raise NotImplementedError

    assert "Not answered" in check_concat_offset(todo).message
    assert not check_concat_offset(lambda k, d, base=1e4: float("nan") * _concat(k, d, base)).ok
    for bad in (3, "M", lambda k, d, base: None, lambda k, d, base: torch.zeros(d, d)):
        feedback = check_concat_offset(bad)
        assert not feedback.ok and "cos" not in feedback.message.split(":")[0]  # never the answer itself


def test_check_return_offset():
    best = min(range(1, 101), key=lambda k: abs(math.remainder(k, 2 * math.pi)))
    assert best == 44
    assert check_return_offset(44).ok and check_return_offset(torch.tensor(44)).ok
    assert "one turn" in check_return_offset(6).message
    assert "closer" in check_return_offset(88).message and "44" not in check_return_offset(88).message
    assert "integer" in check_return_offset(2 * math.pi).message
    assert "outside" in check_return_offset(0).message and "outside" in check_return_offset(710).message
    assert not check_return_offset(25).ok and not check_return_offset(True).ok
    assert check_return_offset(710, max_offset=1000).ok  # 710/113 ≈ 2π
