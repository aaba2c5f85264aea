"""Checkers of notebook 05 (the pair block, the shift, the return offset):
right answers pass, the usual slips are named, any input gets feedback."""

from __future__ import annotations

import math

import pytest
import torch

from pe_lessons.exercises.nb05 import check_pair_block, check_return_offset, check_shift


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
    assert "calls sin or cos" in check_shift(lambda p, k: torch.sin(p)).message
    assert "calls sin or cos" in check_shift(lambda p, k: [math.cos(0.0)] * 8).message
    assert "calls sin or cos" in check_shift(lambda p, k: p.cos()).message
    assert math.sin(0.5) == pytest.approx(0.4794255386) and torch.cos(torch.tensor(0.0)).item() == 1.0  # restored
    assert "swapped" in check_shift(lambda p, k: _shift(p, k)[[1, 0, 3, 2, 5, 4, 7, 6]]).message
    assert "Not answered" in check_shift(None).message

    def todo(p, k):
        raise NotImplementedError

    assert "Not answered" in check_shift(todo).message
    assert "4 numbers" in check_shift(lambda p, k: p[:4]).message


def test_check_return_offset():
    best = min(range(1, 101), key=lambda k: abs(math.remainder(k, 2 * math.pi)))
    assert best == 44
    assert check_return_offset(44).ok and check_return_offset(torch.tensor(44)).ok
    assert "one turn" in check_return_offset(6).message
    assert "smaller k" in check_return_offset(88).message
    assert "integer" in check_return_offset(2 * math.pi).message
    assert "outside" in check_return_offset(0).message and "outside" in check_return_offset(710).message
    assert not check_return_offset(25).ok and not check_return_offset(True).ok
    assert check_return_offset(710, max_offset=1000).ok  # 710/113 ≈ 2π
