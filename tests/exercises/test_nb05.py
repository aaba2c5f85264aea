"""Checkers of notebook 05 (the pair block, the concatenated-layout M_k, one row product, many row products, the
return offset): right answers pass in every ordinary type, each slip the reviews list gets its own hint, the
forbidden routes (fitting, trig, the angle, leaving torch, work that grows with k) are refused, and nothing hangs."""

from __future__ import annotations

import math

import numpy as np
import numpy.linalg as numpy_linalg
import pytest
import torch
from numpy.linalg import lstsq, pinv  # bound before any check runs, as a student's notebook may

from pe_lessons.exercises import _feedback
from pe_lessons.exercises.nb05 import (
    check_concat_offset,
    check_pair_block,
    check_return_offset,
    check_shift,
    check_shift_by,
)
from pe_lessons.offsets import best_linear_map, offset_matrix
from pe_lessons.sinusoidal import sinusoidal_table


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


# ----------------------------------------------------------------------------- exercise 1: the concatenated layout


def _perm(d):
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])


def _concat(k, d_model, base=10000.0):
    return offset_matrix(k, d_model, base)[_perm(d_model)][:, _perm(d_model)]


def _by_hand(k, d, base=10000.0, dtype=torch.float64, angle=None, sin_cos_swapped=False, rows_swapped=False):
    h = d // 2
    m = torch.zeros(d, d, dtype=dtype)
    for i in range(h):
        b = angle(k, i, d, base) if angle else k * base ** (-2 * i / d)
        c, s = (math.sin(b), math.cos(b)) if sin_cos_swapped else (math.cos(b), math.sin(b))
        top, bottom = (i + h, i) if rows_swapped else (i, i + h)
        m[top, i], m[top, i + h] = c, s
        m[bottom, i], m[bottom, i + h] = -s, c
    return m


def _by_hand_vectorized_float32_frequencies(k, d, base=10000.0):
    h = d // 2
    b = k * torch.tensor(base) ** (-torch.arange(0, d, 2) / d)  # float32 frequencies
    m = torch.zeros(d, d, dtype=torch.float64)
    i = torch.arange(h)
    m[i, i], m[i, i + h], m[i + h, i], m[i + h, i + h] = (
        b.cos().double(),
        b.sin().double(),
        -b.sin().double(),
        b.cos().double(),
    )
    return m


@pytest.mark.parametrize(
    "answer",
    [
        _by_hand,
        lambda k, d, base=1e4: _by_hand(k, d, base).numpy(),
        lambda k, d, base=1e4: _by_hand(k, d, base).tolist(),
        lambda k, d, base=1e4: tuple(map(tuple, _by_hand(k, d, base).tolist())),
    ],
)
def test_concat_offset_right_answers_in_any_type(answer):
    feedback = check_concat_offset(answer)
    assert feedback.ok and "by permuting" not in feedback.message, feedback


def test_concat_offset_accepts_p_mk_pt_on_purpose_and_names_it():
    feedback = check_concat_offset(_concat)
    assert feedback.ok and "P M_k Pᵀ" in feedback.message and "by permuting" in feedback.message


@pytest.mark.parametrize("rows", [512, 200, 64])
def test_concat_offset_refuses_fitting_the_map(rows):
    def fit(k, d, base=10000.0):
        t = sinusoidal_table(rows, d, base=base, dtype=torch.float64)
        return best_linear_map(torch.cat([t[:, 0::2], t[:, 1::2]], 1), k).matrix

    feedback = check_concat_offset(fit)
    assert not feedback.ok and "lstsq" in feedback.message and "best_linear_map" in feedback.message
    assert "derive" in feedback.message


@pytest.mark.parametrize(
    "solve",
    [
        lambda x, y: torch.linalg.solve(x, y),
        lambda x, y: torch.linalg.pinv(x) @ y,
        lambda x, y: torch.linalg.inv(x) @ y,
        lambda x, y: x.inverse() @ y,
        lambda x, y: torch.from_numpy(np.linalg.lstsq(x.numpy(), y.numpy(), rcond=None)[0]),
        lambda x, y: torch.from_numpy(np.linalg.solve(x.numpy(), y.numpy())),
    ],
)
def test_concat_offset_refuses_every_solver(solve):
    def exact_fit(k, d, base=10000.0):
        t = sinusoidal_table(d + abs(k) + 8, d, base=base, dtype=torch.float64)
        t = torch.cat([t[:, 0::2], t[:, 1::2]], 1)
        x, y = (t[:d], t[k : k + d]) if k >= 0 else (t[-k : -k + d], t[:d])
        return solve(x, y).T

    feedback = check_concat_offset(exact_fit)
    assert not feedback.ok and ("fits (or solves for)" in feedback.message or "refuses inverses" in feedback.message)
    assert torch.linalg.solve(torch.eye(2), torch.ones(2)).tolist() == [1.0, 1.0]  # restored afterwards
    assert np.linalg.inv(np.eye(2)).tolist() == [[1.0, 0.0], [0.0, 1.0]]


@pytest.mark.parametrize(
    "answer, hint",
    [
        (lambda k, d, base=1e4: _by_hand(k, d, base, dtype=torch.float32), "float32 precision"),
        (_by_hand_vectorized_float32_frequencies, "float32 precision"),
        (lambda k, d, base=1e4: _by_hand(k, d), "ignored the base argument: this call passed base = 100"),
        (lambda k, d, base=1e4: _by_hand(k, d, base, angle=lambda k, i, d, b: k * b ** (-i / d)), "pair index"),
        (lambda k, d, base=1e4: _by_hand(k, d, base, angle=lambda k, i, d, b: k * b ** (-4 * i / d)), "pair index"),
        (lambda k, d, base=1e4: _by_hand(k + 1, d, base), "offset"),
        (lambda k, d, base=1e4: _by_hand(k, d, base, sin_cos_swapped=True), "sin b and cos b are swapped"),
        (lambda k, d, base=1e4: _by_hand(k, d, base, rows_swapped=True), "rows of each pair are exchanged"),
        (lambda k, d, base=1e4: offset_matrix(k, d, base), "interleaved"),
        (lambda k, d, base=1e4: _concat(-k, d, base), "backwards"),
        (lambda k, d, base=1e4: _concat(k, d, base).abs(), "signs"),
        (lambda k, d, base=1e4: offset_matrix(k, d, base)[_perm(d)], "rows of M_k but not its columns"),
        (lambda k, d, base=1e4: offset_matrix(k, d, base)[:, _perm(d)], "columns of M_k but not its rows"),
        (
            lambda k, d, base=1e4: offset_matrix(k, d, base)[torch.argsort(_perm(d))][:, torch.argsort(_perm(d))],
            "inverse permutation",
        ),
        (lambda k, d, base=1e4: _concat(k, 8, base), "[2, 2]"),
    ],
)
def test_concat_offset_names_each_slip(answer, hint):
    feedback = check_concat_offset(answer)
    assert not feedback.ok and hint in feedback.message, feedback


def test_concat_offset_inverting_the_permutation_is_told_the_transpose_is_its_inverse():
    def with_inverse(k, d, base=10000.0):
        p = torch.eye(d, dtype=torch.float64)[_perm(d)]
        return p @ offset_matrix(k, d, base) @ torch.linalg.inv(p)

    feedback = check_concat_offset(with_inverse)
    assert not feedback.ok and "its inverse is its transpose" in feedback.message

    def with_transpose(k, d, base=10000.0):
        p = torch.eye(d, dtype=torch.float64)[_perm(d)]
        return p @ offset_matrix(k, d, base) @ p.T

    assert check_concat_offset(with_transpose).ok


def test_concat_offset_garbage_and_stubs():
    assert "Not answered" in check_concat_offset(None).message

    def todo(k, d_model, base=10000.0):
        raise NotImplementedError

    assert "Not answered" in check_concat_offset(todo).message
    assert not check_concat_offset(lambda k, d, base=1e4: float("nan") * _concat(k, d, base)).ok
    for bad in (3, "M", lambda k, d, base: None, lambda k, d, base: torch.zeros(d, d)):
        feedback = check_concat_offset(bad)
        assert not feedback.ok and "cos" not in feedback.message.split(":")[0]  # never the answer itself


# ----------------------------------------------------------------------------- one row product (check_shift)


def _shift(p, k, sign=1):
    out = torch.empty_like(p)
    out[0::2] = p[0::2] * k[1::2] + sign * p[1::2] * k[0::2]
    out[1::2] = p[1::2] * k[1::2] - sign * p[0::2] * k[0::2]
    return out


def _pairs(f):
    """A row product written from the four numbers of each pair: f(sa, ca, sb, cb) -> (new sin, new cos)."""

    def g(p, k):
        s, c = f(p[0::2], p[1::2], k[0::2], k[1::2])
        return torch.stack((s, c), -1).flatten()

    return g


def _in_place(p, k):  # the aliasing bug: the cos columns read sines already overwritten
    p[0::2] = p[0::2] * k[1::2] + p[1::2] * k[0::2]
    p[1::2] = p[1::2] * k[1::2] - p[0::2] * k[0::2]
    return p


def _in_place_cos_first(p, k):
    p[1::2] = p[1::2] * k[1::2] - p[0::2] * k[0::2]
    p[0::2] = p[0::2] * k[1::2] + p[1::2] * k[0::2]
    return p


def _python_floats(p, k):
    p, k = p.tolist(), k.tolist()
    out = []
    for i in range(0, len(p), 2):
        out += [p[i] * k[i + 1] + p[i + 1] * k[i], p[i + 1] * k[i + 1] - p[i] * k[i]]
    return out


def _complex_product(p, k):  # products and sums in complex form: allowed
    z = torch.complex(p[1::2], p[0::2]) * torch.complex(k[1::2], k[0::2])
    return torch.stack((z.imag, z.real), -1).flatten()


@pytest.mark.parametrize(
    "answer",
    [
        _shift,
        lambda p, k: _shift(p, k).tolist(),
        lambda p, k: _shift(p, k).numpy(),
        lambda p, k: _shift(p, k).float(),  # float32 is judged at 1e-6
        lambda p, k: _shift(p, k).numpy().astype(np.float32),
        lambda p, k: _shift(p, k).view(-1, 2),
        _python_floats,
        _complex_product,
    ],
)
def test_check_shift_right_answers_in_any_type(answer):
    assert check_shift(answer).ok


@pytest.mark.parametrize(
    "answer, hint",
    [
        (lambda p, k: _shift(p, k, -1), "PE(pos − k)"),
        (lambda p, k: p + k, "added the rows"),
        (lambda p, k: p * k, "multiplied"),
        (lambda p, k: _shift(p, k)[[1, 0, 3, 2, 5, 4, 7, 6]], "swapped in your result"),
        (_pairs(lambda sa, ca, sb, cb: (ca * cb - sa * sb, sa * cb + ca * sb)), "swapped in your result"),
        (_pairs(lambda sa, ca, sb, cb: (sa * sb + ca * cb, ca * sb - sa * cb)), "PE(k)'s pairs the wrong way round"),
        (_pairs(lambda sa, ca, sb, cb: (sa * cb + ca * sb, ca * cb + sa * sb)), "cos columns hold cos(a − b)"),
        (_pairs(lambda sa, ca, sb, cb: (sa * cb - ca * sb, ca * cb - sa * sb)), "sin columns hold sin(a − b)"),
        (_in_place, "overwrote the sines of pe_pos"),
        (_in_place_cos_first, "overwrote the cosines of pe_pos"),
        (lambda p, k: (_shift(p, k) + 0.03).bfloat16(), "bfloat16 row (3 significant digits)"),
        (lambda p, k: (_shift(p, k) + 0.005).half(), "float16 row (4 significant digits)"),
        (lambda p, k: (_shift(p, k) + 1e-5).float(), "close but not exact"),
        (lambda p, k: p[:4], "returned 4 numbers"),
    ],
)
def test_check_shift_names_each_slip(answer, hint):
    feedback = check_shift(answer)
    assert not feedback.ok and hint in feedback.message, feedback
    assert "(d_model = " not in feedback.message  # the width is said once


def test_check_shift_hints_say_which_half_is_wrong():
    only_cos_wrong = _pairs(lambda sa, ca, sb, cb: (sa * cb + ca * sb, ca * cb))
    message = check_shift(only_cos_wrong).message
    assert "sin columns (even) are right; the cos columns (odd) are wrong" in message


def _atan2_in_place(p, k):
    a = p[0::2].clone().atan2_(p[1::2]) + k[0::2].clone().atan2_(k[1::2])
    return torch.stack([a.clone().sin_(), a.clone().cos_()], -1).flatten()


def _e_power(p, k):
    a = p[0::2].clone().atan2_(p[1::2]) + k[0::2].clone().atan2_(k[1::2])
    z = math.e ** (1j * a)
    return torch.stack([z.imag, z.real], -1).flatten()


def _through_angles(p, k):
    angle = torch.atan2(p[0::2], p[1::2]) + torch.atan2(k[0::2], k[1::2])
    return torch.stack((angle.sin(), angle.cos()), -1).flatten()


def _complex_exp(p, k):
    z = torch.exp(1j * (torch.angle(torch.complex(p[1::2], p[0::2])) + torch.angle(torch.complex(k[1::2], k[0::2]))))
    return torch.stack((z.imag, z.real), -1).flatten()


def _numpy_arctan(p, k):
    a = np.arctan2(p[0::2].numpy(), p[1::2].numpy()) + np.arctan2(k[0::2].numpy(), k[1::2].numpy())
    return torch.from_numpy(np.stack((np.sin(a), np.cos(a)), -1).reshape(-1))


def _swallowed(p, k):  # a student's `except Exception` must not hide the refusal
    try:
        a = torch.atan2(p[0::2], p[1::2])
    except Exception:
        a = torch.zeros(1)
    return _shift(p, k) + 0 * a.sum()


def _aten(p, k):
    return torch.ops.aten.sin.default(p)


@pytest.mark.parametrize(
    "answer, called",
    [
        (lambda p, k: torch.sin(p), "torch.sin"),
        (lambda p, k: p.cos(), "x.cos"),
        (lambda p, k: p.clone().sin_(), "x.sin_"),
        (lambda p, k: [math.cos(0.0)] * 8, "math.cos"),
        (_atan2_in_place, "x.atan2_"),
        (_e_power, "x.atan2_"),
        (_through_angles, "torch.atan2"),
        (_complex_exp, "torch.angle"),
        (_numpy_arctan, "numpy.arctan2"),
        (_swallowed, "torch.atan2"),
        (_aten, "torch.ops.aten.sin.default"),
        (lambda p, k: torch.polar(p, k), "torch.polar"),
        (lambda p, k: torch.cosh(p), "torch.cosh"),
    ],
)
def test_check_shift_refuses_trig_and_the_angle_however_called(answer, called):
    feedback = check_shift(answer)
    assert not feedback.ok and f"calls {called}" in feedback.message, feedback
    assert math.sin(0.5) == pytest.approx(0.4794255386) and torch.cos(torch.tensor(0.0)).item() == 1.0  # restored
    assert torch.atan2(torch.tensor(1.0), torch.tensor(1.0)).item() == pytest.approx(math.pi / 4)


def test_check_shift_probes_several_widths_and_stubs():
    def only_width_8(p, k):
        return _shift(p, k) if p.numel() == 8 else torch.zeros_like(p)

    feedback = check_shift(only_width_8)
    assert not feedback.ok and "d_model = 2" in feedback.message
    assert "width" in check_shift(lambda p, k: _shift(p[:8], k[:8]) if p.numel() > 8 else _shift(p, k)).message
    assert "Not answered" in check_shift(None).message

    def todo(p, k):
        raise NotImplementedError

    assert "Not answered" in check_shift(todo).message


# ----------------------------------------------------------------------------- many row products (check_shift_by)


def _product(a, b):
    return torch.stack((a[0::2] * b[1::2] + a[1::2] * b[0::2], a[1::2] * b[1::2] - a[0::2] * b[0::2]), -1).flatten()


def _by_doubling(pe_pos, pe_1, k):
    result, power = pe_pos, pe_1
    while k:
        if k & 1:
            result = _product(result, power)
        power = _product(power, power)
        k >>= 1
    return result


def _by_doubling_recursive(pe_pos, pe_1, k):
    if k == 0:
        return pe_pos
    half = _by_doubling_recursive(torch.tensor([0.0, 1.0] * (pe_1.numel() // 2), dtype=pe_1.dtype), pe_1, k // 2)
    row = _product(pe_pos, _product(half, half))
    return _product(row, pe_1) if k % 2 else row


def _by_doubling_per_pair(pe_pos, pe_1, k):  # a Python loop over the pairs, 0-d tensors: slower, still log k
    out = []
    for i in range(0, pe_pos.numel(), 2):
        s, c, ps, pc = pe_pos[i], pe_pos[i + 1], pe_1[i], pe_1[i + 1]
        kk = k
        while kk:
            if kk & 1:
                s, c = s * pc + c * ps, c * pc - s * ps
            ps, pc = 2 * ps * pc, pc * pc - ps * ps
            kk >>= 1
        out += [s, c]
    return out


def _by_doubling_complex(pe_pos, pe_1, k):
    z, w = torch.complex(pe_pos[1::2], pe_pos[0::2]), torch.complex(pe_1[1::2], pe_1[0::2])
    while k:
        if k & 1:
            z = z * w
        w = w * w
        k >>= 1
    return torch.stack((z.imag, z.real), -1).flatten()


@pytest.mark.parametrize(
    "answer",
    [
        _by_doubling,
        lambda p, q, k: _by_doubling(p, q, k).tolist(),
        lambda p, q, k: _by_doubling(p, q, k).numpy(),
        lambda p, q, k: [x.item() for x in _by_doubling(p, q, k)],
        _by_doubling_recursive,
        _by_doubling_per_pair,
        _by_doubling_complex,
    ],
)
def test_check_shift_by_right_answers(answer):
    feedback = check_shift_by(answer)
    assert feedback.ok and "log k" in feedback.message, feedback


def _one_by_one(pe_pos, pe_1, k):
    for _ in range(k):
        pe_pos = _product(pe_pos, pe_1)
    return pe_pos


def _baby_giant(pe_pos, pe_1, k):  # about 2√k products: still grows too fast
    step = max(1, math.isqrt(k))
    giant = pe_1
    for _ in range(step - 1):
        giant = _product(giant, pe_1)
    for _ in range(k // step):
        pe_pos = _product(pe_pos, giant)
    for _ in range(k % step):
        pe_pos = _product(pe_pos, pe_1)
    return pe_pos


def _highest_bit_only(pe_pos, pe_1, k):
    power = pe_1
    if k == 0:
        return pe_pos
    for _ in range(k.bit_length() - 1):
        power = _product(power, power)
    return _product(pe_pos, power)


def _off_by_one(pe_pos, pe_1, k):
    return _by_doubling(pe_pos, pe_1, k - 1) if k > 1 else _by_doubling(pe_pos, pe_1, k)


def _digits_add_pe_1(pe_pos, pe_1, k):  # multiplies by pe_1 on each 1-digit of k, not by the squared power
    row = pe_pos
    while k:
        if k & 1:
            row = _product(row, pe_1)
        k >>= 1
    return row


def _squares_pe_pos(pe_pos, pe_1, k):  # x^k's loop from the top digit, started from pe_pos: squares pe_pos too
    row = pe_pos
    for digit in f"{k:b}":
        row = _product(row, row)
        if digit == "1":
            row = _product(row, pe_1)
    return row


def _squares_pe_pos_after_top(pe_pos, pe_1, k):  # the same, started from PE(pos + 1) after the leading 1
    if k == 0:
        return pe_pos
    row = _product(pe_pos, pe_1)
    for digit in f"{k:b}"[1:]:
        row = _product(row, row)
        if digit == "1":
            row = _product(row, pe_1)
    return row


def _squares_pe_pos_20_digits(pe_pos, pe_1, k):  # a fixed 20-digit loop from the top, squaring pe_pos 20 times
    row = pe_pos
    for bit in range(19, -1, -1):
        row = _product(row, row)
        if k >> bit & 1:
            row = _product(row, pe_1)
    return row


def _by_doubling_with(product):
    """The right doubling loop around a given row product."""

    def shift_by(pe_pos, pe_1, k):
        row, power = pe_pos, pe_1
        while k:
            if k & 1:
                row = product(row, power)
            power = product(power, power)
            k >>= 1
        return row

    return shift_by


def _subtracts(a, b):  # the transposed rotation: PE(a − b)
    return torch.stack((a[0::2] * b[1::2] - a[1::2] * b[0::2], a[1::2] * b[1::2] + a[0::2] * b[0::2]), -1).flatten()


def _doubling_power_first(pe_pos, pe_1, k):  # the doubling loop with the product's arguments the other way round
    row, power = pe_pos, pe_1
    while k:
        if k & 1:
            row = _subtracts(power, row)
        power = _subtracts(power, power)
        k >>= 1
    return row


def _cos_sign_slip(a, b):  # cos(a + b) written ca·cb + sa·sb
    return torch.stack((a[0::2] * b[1::2] + a[1::2] * b[0::2], a[1::2] * b[1::2] + a[0::2] * b[0::2]), -1).flatten()


def _cos_term_dropped(a, b):
    return torch.stack((a[0::2] * b[1::2] + a[1::2] * b[0::2], a[1::2] * b[1::2]), -1).flatten()


def _sin_term_dropped(a, b):
    return torch.stack((a[1::2] * b[0::2], a[1::2] * b[1::2] - a[0::2] * b[0::2]), -1).flatten()


def _ignores_pos(pe_pos, pe_1, k):
    return _by_doubling(torch.tensor([0.0, 1.0] * (pe_1.numel() // 2), dtype=pe_1.dtype), pe_1, k)


def _cumulative(pe_pos, pe_1, k):  # all of PE(1) … PE(k) at once: a tensor that grows with k
    z = torch.complex(pe_pos[1::2], pe_pos[0::2])
    if k:
        z = z * torch.complex(pe_1[1::2], pe_1[0::2]).expand(k, -1).cumprod(0)[-1]
    return torch.stack((z.imag, z.real), -1).flatten()


def _sign_slip(pe_pos, pe_1, k):
    return _by_doubling(pe_pos, pe_1 * torch.tensor([-1.0, 1.0], dtype=pe_1.dtype).repeat(pe_1.numel() // 2), k)


def _aliasing(pe_pos, pe_1, k):
    for _ in range(k):
        pe_pos[0::2] = pe_pos[0::2] * pe_1[1::2] + pe_pos[1::2] * pe_1[0::2]
        pe_pos[1::2] = pe_pos[1::2] * pe_1[1::2] - pe_pos[0::2] * pe_1[0::2]
    return pe_pos


def _matrix_power(pe_pos, pe_1, k):
    d = pe_pos.numel()
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(0, d, 2):
        m[i, i], m[i, i + 1], m[i + 1, i], m[i + 1, i + 1] = pe_1[i + 1], pe_1[i], -pe_1[i], pe_1[i + 1]
    return torch.linalg.matrix_power(m, k) @ pe_pos


def _complex_power(pe_pos, pe_1, k):
    z = torch.complex(pe_pos[1::2], pe_pos[0::2]) * torch.complex(pe_1[1::2], pe_1[0::2]) ** k
    return torch.stack((z.imag, z.real), -1).flatten()


def _leaves_torch(pe_pos, pe_1, k):  # computes on Python floats, where no product can be counted
    return _python_floats(pe_pos, pe_1) if k == 1 else pe_pos


@pytest.mark.parametrize(
    "answer, hint",
    [
        (_one_by_one, "grows like k (or √k), not like log k"),
        (_baby_giant, "grows like k (or √k), not like log k"),
        (_highest_bit_only, "largest power of two"),
        (_off_by_one, "one step off"),
        (_ignores_pos, "does not depend on pe_pos"),
        (_cumulative, "built a tensor of"),
        (_sign_slip, "PE(pos − k)"),
        (_aliasing, "overwrote the sines of pe_pos"),
        (_matrix_power, "calls torch.linalg.matrix_power"),
        (_complex_power, "complex number"),
        (lambda p, q, k: torch.sin(p), "calls torch.sin"),
        (_leaves_torch, "calls x.tolist"),
        (lambda p, q, k: _by_doubling(p, q, k).float(), "float32 row"),
        (lambda p, q, k: _by_doubling(p, q, k)[:8], "returned 8 numbers"),
        (lambda p, q, k: p, "k = 1"),
        (lambda p, q, k: _by_doubling(p, q, k + 1), "one step off"),  # range(k + 1): a loop bound, right product
        (_digits_add_pe_1, "number of 1-digits"),  # first wrong at k = 2: PE(pos + 1)
        (_squares_pe_pos, "pe_pos was squared along with the powers"),  # PE(2·pos + 1) at k = 1
        (_squares_pe_pos_after_top, "pe_pos was squared along with the powers"),  # PE(2·pos + 2) at k = 2
        (_squares_pe_pos_20_digits, "pe_pos was squared along with the powers"),  # PE(2^20·pos + k)
        (_by_doubling_with(_cos_sign_slip), "one row product"),  # from PE(0) these still give PE(1):
        (_by_doubling_with(_cos_term_dropped), "one row product"),  # the product must be blamed, not the loop
        (_by_doubling_with(_sin_term_dropped), "one row product"),
        (_doubling_power_first, "one row product"),  # PE(1 − pos) is a table row, but not a squared pe_pos
    ],
)
def test_check_shift_by_names_each_slip(answer, hint):
    feedback = check_shift_by(answer)
    assert not feedback.ok and hint in feedback.message, feedback


def test_check_shift_by_stops_a_loop_and_the_linear_loop_quickly(monkeypatch):
    import time

    start = time.monotonic()
    assert not check_shift_by(_one_by_one).ok
    assert time.monotonic() - start < 10  # the 2**20 loop is stopped by the operation budget, not run
    monkeypatch.setattr(_feedback, "TIME_LIMIT", 0.2)

    def forever(p, q, k):
        while True:
            pass

    assert "did not return within 0.2 s" in check_shift_by(forever).message
    assert "Not answered" in check_shift_by(None).message


# ----------------------------------------------------------------------------- exercise 3


@pytest.mark.parametrize(
    "answer",
    [44, 44.0, np.int64(44), np.float64(44.0), torch.tensor(44), torch.tensor(44.0), [44], (44,), np.array([44])],
)
def test_check_return_offset_right_in_any_type(answer):
    feedback = check_return_offset(answer)
    assert feedback.ok and "6, 13, 19, 25, 32, 38, 44" in feedback.message, feedback


def test_check_return_offset_feedback():
    assert "one turn" in check_return_offset(6).message
    assert "fewer turns" in check_return_offset(88).message and "44" not in check_return_offset(88).message
    assert "fraction" in check_return_offset(25).message and "44" not in check_return_offset(25).message
    assert "integer" in check_return_offset(2 * math.pi).message
    assert "outside" in check_return_offset(0).message and "outside" in check_return_offset(710).message
    assert not check_return_offset(True).ok and not check_return_offset([44, 45]).ok
    assert check_return_offset(710, max_offset=1000).ok  # 710/113 ≈ 2π


# ----------------------------------------------------------------------------- review 2's points


def test_concat_offset_transpose_hint_names_the_row_vector_convention():
    feedback = check_concat_offset(lambda k, d, base=1e4: _concat(k, d, base).T)
    assert not feedback.ok and "row vectors" in feedback.message and "backwards" in feedback.message


def test_numpy_lstsq_is_not_blamed_on_best_linear_map():
    def numpy_fit(k, d, base=10000.0):
        t = sinusoidal_table(200, d, base=base, dtype=torch.float64)
        t = torch.cat([t[:, 0::2], t[:, 1::2]], 1).numpy()
        return np.linalg.lstsq(t[: 200 - k], t[k:], rcond=None)[0].T

    message = check_concat_offset(numpy_fit).message
    assert "numpy.linalg.lstsq" in message and "best_linear_map" not in message


def test_check_shift_by_names_the_width_and_never_mentions_float32_where_it_is_refused():
    def hard_coded_8(pe_pos, pe_1, k):
        return _by_doubling(pe_pos.view(4, 2).flatten(), pe_1, k)

    message = check_shift_by(hard_coded_8).message
    assert "at d_model = 2" in message and "RuntimeError" in message

    def nearly(pe_pos, pe_1, k):
        return _by_doubling(pe_pos, pe_1, k) + 1e-7

    message = check_shift_by(nearly).message
    assert "close but not exact" in message and "float32" not in message


def _fixed_doublings(pe_pos, pe_1, k):  # always 24 doublings; the products still follow k's binary digits
    result, power = pe_pos, pe_1
    for j in range(24):
        if k >> j & 1:
            result = _product(result, power)
        power = _product(power, power)
    return result


def _constant_work(pe_pos, pe_1, k):  # 24 doublings and 24 products, each kept or not by torch.where
    result, power = pe_pos, pe_1
    for j in range(24):
        result = torch.where(torch.tensor(bool(k >> j & 1)), _product(result, power), result)
        power = _product(power, power)
    return result


def _hand_squared(pe_pos, pe_1, k):  # M_1 built from pe_1 (a fixed set-up of ~4 writes per pair), then squared
    d = pe_pos.numel()
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(0, d, 2):
        m[i, i], m[i, i + 1], m[i + 1, i], m[i + 1, i + 1] = pe_1[i + 1], pe_1[i], -pe_1[i], pe_1[i + 1]
    result = pe_pos
    while k:
        if k & 1:
            result = m @ result
        m = m @ m
        k >>= 1
    return result


def _taylor_base_10000(pe_pos, pe_1, k):  # ignores pe_1: PE(k) from the formula (base 10000) and a Taylor series
    d = pe_pos.numel()
    w = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    x = torch.remainder(k * w + math.pi, 2 * math.pi) - math.pi
    s, c, term = torch.zeros_like(x), torch.zeros_like(x), torch.ones_like(x)
    for n in range(40):
        if n % 4 == 0:
            c = c + term
        elif n % 4 == 1:
            s = s + term
        elif n % 4 == 2:
            c = c - term
        else:
            s = s - term
        term = term * x / (n + 1)
    return _product(pe_pos, torch.stack((s, c), -1).flatten())


def test_check_shift_by_judges_the_growth_of_the_work_not_its_total():
    """Review 4: the work is judged by its growth with k's binary digits, so a fixed set-up (building M_1 by hand)
    does not hide log₂ k squarings, and a count that does not grow with k fails."""
    feedback = check_shift_by(_hand_squared)
    assert feedback.ok and "grows like log k" in feedback.message and "set-up of about" in feedback.message, feedback
    assert "(2.0×)" in feedback.message
    feedback = check_shift_by(_fixed_doublings)
    assert feedback.ok and "grows like log k" in feedback.message, feedback
    feedback = check_shift_by(_constant_work)
    assert not feedback.ok and "does not grow with k" in feedback.message, feedback
    assert "grows like log k" in check_shift_by(_by_doubling).message


def test_check_shift_by_probes_rows_of_another_base():
    """Review 4: an answer that computes its frequencies from the formula (base 10000) instead of reading them
    from pe_1 passed every base-10000 probe with a constant count; the base-500 probe names the slip."""
    feedback = check_shift_by(_taylor_base_10000)
    assert not feedback.ok and "base = 500" in feedback.message and "pe_1" in feedback.message, feedback
    row = _taylor_base_10000(*sinusoidal_table(2, 16, dtype=torch.float64).flip(0), 1000)  # PE(1) shifted by 1000
    assert (row - sinusoidal_table(1002, 16, dtype=torch.float64)[1001]).abs().max() < 1e-9  # right at base 10000


@pytest.mark.parametrize(
    "solve",
    [
        lambda x, y: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(x.T @ x), x.T @ y),
        lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x.T @ x), x.T @ y),
        lambda x, y: torch.cholesky_solve(x.T @ y, torch.linalg.cholesky(x.T @ x)),
    ],
    ids=["ldl", "lu", "cholesky"],
)
def test_concat_offset_refuses_factor_and_solve_pairs(solve):
    """Review 4: ldl_factor + ldl_solve on the normal equations passed; every torch.linalg factor/solve is refused."""

    def fit(k, d, base=10000.0):
        x, y = (torch.as_tensor(v) for v in _concat_rows(k, d, base))
        return solve(x, y).T

    feedback = check_concat_offset(fit)
    assert not feedback.ok and "torch.linalg" in feedback.message, feedback


# ----------------------------------------------------------------------------- review 3's points


def _concat_rows(k, d, base, rows=4000):
    t = sinusoidal_table(rows, d, base=base, dtype=torch.float64)
    t = torch.cat([t[:, 0::2], t[:, 1::2]], 1).numpy()
    return (t[: rows - k], t[k:]) if k >= 0 else (t[-k:], t[: rows + k])


def _fit_with(solve):
    def fit(k, d, base=10000.0):
        x, y = _concat_rows(k, d, base)
        return solve(x, y).T

    return fit


def _lstsq_helper(x, y):  # a helper beside the student's function, calling a name imported earlier
    return lstsq(x, y, rcond=None)[0]


def _closure_fit():
    solver = numpy_linalg.lstsq  # bound in an enclosing scope

    def fit(k, d, base=10000.0):
        x, y = _concat_rows(k, d, base)
        return solver(x, y, rcond=None)[0].T

    return fit


def _default_fit(k, d, base=10000.0, invert=numpy_linalg.pinv):
    x, y = _concat_rows(k, d, base)
    return (invert(x) @ y).T


def _imported_inside(k, d, base=10000.0):
    from numpy.linalg import lstsq as solve

    x, y = _concat_rows(k, d, base)
    return solve(x, y, rcond=None)[0].T


def _private_module(k, d, base=10000.0):
    x, y = _concat_rows(k, d, base)
    return np.linalg._linalg.lstsq(x, y, rcond=None)[0].T


@pytest.mark.parametrize(
    "fit, called",
    [
        (_fit_with(lambda x, y: lstsq(x, y, rcond=None)[0]), "numpy.linalg.lstsq"),  # imported before the check
        (_fit_with(lambda x, y: pinv(x) @ y), "numpy.linalg.pinv"),
        (_fit_with(_lstsq_helper), "numpy.linalg.lstsq"),
        (_closure_fit(), "numpy.linalg.lstsq"),
        (_default_fit, "numpy.linalg.pinv"),
        (_imported_inside, "numpy.linalg.lstsq"),
        (_private_module, "numpy.linalg.lstsq"),
    ],
    ids=["imported-before", "pinv-imported-before", "helper", "closure", "default-argument", "inside", "_linalg"],
)
def test_concat_offset_refuses_a_solver_however_it_was_bound(fit, called):
    """Review 3: `from numpy.linalg import lstsq` before the check (with a 4000-row window, which fits M_k
    exactly) passed, because only the module attribute was replaced. Every binding is refused now, and restored."""
    feedback = check_concat_offset(fit)
    assert not feedback.ok and called in feedback.message, feedback
    assert lstsq is np.linalg.lstsq and pinv is np.linalg.pinv and np.linalg._linalg.lstsq is lstsq
    assert _default_fit.__defaults__[-1] is np.linalg.pinv
    assert globals()["lstsq"] is np.linalg.lstsq
    assert np.allclose(lstsq(np.eye(2), np.ones(2), rcond=None)[0], 1.0)  # restored, and it still works


def test_the_loophole_fit_would_be_right_without_the_guard():
    """The fit refused above is a real loophole: unguarded it returns the right matrix (so the refusal is what
    stops it, not a wrong answer)."""
    fit = _fit_with(lambda x, y: lstsq(x, y, rcond=None)[0])
    perm = torch.cat([torch.arange(0, 16, 2), torch.arange(1, 16, 2)])
    want = offset_matrix(5, 16, base=100.0)[perm][:, perm]
    assert (torch.as_tensor(fit(5, 16, 100.0)) - want).abs().max() < 1e-9


def test_check_return_offset_lists_the_ripple_peaks_at_each_width():
    """Review 3: the peaks of s(k) line up with pair 0's returns at d_model = 16 only; the pass message says so."""
    message = check_return_offset(44).message
    assert "d_model = 16" in message and "6, 13, 19, 25, 32, 38, 44, 50" in message
    assert "d_model = 64" in message and "6, 12, 18, 25, 32, 44, 50" in message
    assert "at 512 only at k = 44, 50" in message
