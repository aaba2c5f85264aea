"""pe_lessons.offsets: the offset property over whole tables, the algebra of M_k, similarity, fits, bad input."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pe_lessons.offsets import (
    best_linear_map,
    offset_blocks,
    offset_matrix,
    offset_similarity,
    relative_similarity,
    table_by_rotation,
)
from pe_lessons.sinusoidal import sinusoidal_table

widths = st.integers(1, 48).map(lambda h: 2 * h)
bases = st.sampled_from([2.0, 100.0, 10000.0, 500000.0]) | st.floats(1.5, 1e6)
offsets = st.integers(-600, 600) | st.sampled_from([0, 1, -1, 2**20, -(2**20)])


def reference(positions, d_model, base=10000.0):
    """Independent float64 formula, column by column."""
    pos = torch.as_tensor(positions, dtype=torch.float64)
    out = torch.empty(pos.shape[0], d_model, dtype=torch.float64)
    for col in range(d_model):
        angle = pos / base ** (2 * (col // 2) / d_model)
        out[:, col] = torch.sin(angle) if col % 2 == 0 else torch.cos(angle)
    return out


def sin_only(max_len, d_model, base=10000.0):
    """The source notebook's bug: sin in the odd columns too (built here, independent of pe_lessons.variants)."""
    table = reference(range(max_len), d_model, base)
    table[:, 1::2] = table[:, 0::2]
    return table


@given(d_model=widths, base=bases, k=offsets)
def test_offset_property_over_whole_table(d_model, base, k):
    positions = torch.arange(0, 700)
    start = reference(positions, d_model, base)
    shifted = reference(positions + k, d_model, base)
    m = offset_matrix(k, d_model, base)
    assert m.shape == (d_model, d_model) and m.dtype == torch.float64
    assert (start @ m.T - shifted).abs().max().item() <= 1e-9


@pytest.mark.parametrize("k", [1, 3, 64, 511, -1, -7, -300])
def test_offset_property_on_sinusoidal_table_slices(k):
    table = sinusoidal_table(1024, 512, dtype=torch.float64)
    m = offset_matrix(k, 512)
    src, dst = (table[: 1024 - k], table[k:]) if k > 0 else (table[-k:], table[: 1024 + k])
    assert (src @ m.T - dst).abs().max().item() <= 1e-9


def test_block_layout_matches_angle_addition():
    m = offset_matrix(2, 4, base=100.0)
    w = [1.0, 0.1]
    for i, omega in enumerate(w):
        b = 2 * omega
        want = torch.tensor([[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]], dtype=torch.float64)
        torch.testing.assert_close(m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2], want, rtol=0, atol=1e-15)
    assert m[0:2, 2:4].abs().max() == 0 and m[2:4, 0:2].abs().max() == 0
    torch.testing.assert_close(torch.block_diag(*offset_blocks(2, 4, 100.0)), m)


@given(d_model=widths, base=bases, k=offsets)
def test_orthogonal_and_inverse_is_transpose(d_model, base, k):
    m = offset_matrix(k, d_model, base)
    eye = torch.eye(d_model, dtype=torch.float64)
    torch.testing.assert_close(m @ m.T, eye, rtol=0, atol=1e-12)
    torch.testing.assert_close(offset_matrix(-k, d_model, base), m.T, rtol=0, atol=0)
    x = torch.randn(5, d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(k % 1000))
    torch.testing.assert_close((x @ m.T).norm(dim=1), x.norm(dim=1), rtol=1e-12, atol=0)
    assert torch.equal(offset_matrix(0, d_model, base), eye)


@given(d_model=widths, base=bases, a=st.integers(-500, 500), b=st.integers(-500, 500))
def test_composition(d_model, base, a, b):
    ma, mb = offset_matrix(a, d_model, base), offset_matrix(b, d_model, base)
    torch.testing.assert_close(ma @ mb, offset_matrix(a + b, d_model, base), rtol=0, atol=1e-12)
    torch.testing.assert_close(ma @ mb, mb @ ma, rtol=0, atol=1e-12)


def test_matrix_does_not_depend_on_pos():
    # least-squares fits on two disjoint windows of positions recover the same M_k
    table = reference(range(4000), 8, base=100.0)
    for k in (5, -9):
        first = best_linear_map(table[:400], k)
        later = best_linear_map(table[3000:3400], k)
        for fit in (first, later):
            assert fit.residual < 1e-12
            torch.testing.assert_close(fit.matrix, offset_matrix(k, 8, 100.0), rtol=0, atol=1e-8)


def test_dtypes():
    m32 = offset_matrix(12345, 16, dtype=torch.float32)
    assert m32.dtype == torch.float32
    torch.testing.assert_close(m32, offset_matrix(12345, 16).float(), rtol=0, atol=0)
    assert offset_matrix(3, 8, dtype=torch.bfloat16).dtype == torch.bfloat16


@given(n=st.integers(1, 80), d_model=widths, base=bases)
def test_similarity_closed_form_symmetric_toeplitz_max_at_zero(n, d_model, base):
    table = reference(range(n), d_model, base)
    s = relative_similarity(n, d_model, base)
    torch.testing.assert_close(s, table @ table.T, rtol=0, atol=1e-10)
    torch.testing.assert_close(s, s.T, rtol=0, atol=0)
    profile = offset_similarity(n, d_model, base)
    for p in range(n):  # Toeplitz: S[p, q] = s(p - q)
        torch.testing.assert_close(s[p], profile[(torch.arange(n) - p).abs()], rtol=0, atol=1e-12)
    assert torch.allclose(s.diagonal(), torch.full((n,), d_model / 2, dtype=torch.float64))
    off = s - torch.diag(s.diagonal())
    assert n == 1 or off.max().item() < d_model / 2  # cos(k) < 1 for every integer k != 0


def test_similarity_on_arbitrary_positions_and_not_monotone():
    pos = [0, 5, 100, 7]
    s = relative_similarity(pos, 16)
    table = reference(pos, 16)
    torch.testing.assert_close(s, table @ table.T, rtol=0, atol=1e-12)
    torch.testing.assert_close(relative_similarity(torch.tensor(pos), 16), s)
    prof = offset_similarity(200, 64)
    assert (prof[1:] > prof[:-1]).any()  # falls off, but not monotonically
    torch.testing.assert_close(offset_similarity([-3, 3], 64)[0], offset_similarity([-3, 3], 64)[1])


def test_similarity_of_long_inputs_stays_small_in_memory():
    # a [n, n, d_model/2] tensor of angles would need 2000·2000·256·8 bytes = 8 GB here
    s = relative_similarity(2000, 512)
    assert s.shape == (2000, 2000) and torch.equal(s, s.T)
    prof = offset_similarity(2000, 512)
    assert torch.equal(s[1999], prof.flip(0)) and torch.equal(s[:, 0], prof)
    rows = reference([0, 1234, 1999], 512)
    torch.testing.assert_close(s[1234, [0, 1999]], rows[1] @ rows[[0, 2]].T, rtol=0, atol=1e-9)
    big = offset_similarity(torch.arange(20000), 1024)  # chunked: 20000·512 angles
    torch.testing.assert_close(big[[0, 7, 19999]], offset_similarity([0, 7, 19999], 1024), rtol=0, atol=1e-12)


def test_huge_positions_are_rejected_not_wrapped():
    with pytest.raises(ValueError, match="less than 2\\*\\*63 apart"):
        relative_similarity([2**62, -(2**62)], 8)  # p − q would overflow int64
    for bad in (torch.tensor([-(2**63), 0]), [-(2**63)], [2**63]):  # |−2**63| overflows int64
        with pytest.raises(ValueError, match="2\\*\\*63"):
            offset_similarity(bad, 8)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        relative_similarity(torch.tensor([-(2**63), 0]), 8)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        offset_matrix(-(2**63), 8)


def _exact_cos_sum(k: int, d_model: int, base: float = 10000.0) -> float:
    import mpmath

    mpmath.mp.prec = 200
    return float(
        sum(mpmath.cos(k * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / d_model)) for i in range(d_model // 2))
    )


huge = st.sampled_from([2**53, 2**53 + 1, -(2**53) - 1, 2**62 + 3, 2**63 - 1, -(2**63) + 1, 2**24 + 1]) | st.integers(
    -(2**63) + 1, 2**63 - 1
)


@given(k=huge, d_model=st.sampled_from([2, 8, 64]), base=st.sampled_from([10000.0, 500000.0, 2.5]))
def test_huge_offsets_match_an_exact_reference(k, d_model, base):
    """Angles k·ω_i are reduced modulo 2π exactly: every int64 offset is right to float64 accuracy
    (float(k)·ω_i was off by up to 0.19 in the sum at |k| = 2**53, and wrong past it)."""
    pytest.importorskip("mpmath")
    want = _exact_cos_sum(k, d_model, base)
    # exact reduction past 2**24; below, the float64 product k·ω_i is within |k|·2⁻⁵¹ rad per pair
    tol = 1e-12 * d_model + (abs(k) * 2**-51 * d_model / 2 if abs(k) <= 2**24 else 0)
    assert abs(float(offset_similarity([k], d_model, base)[0]) - want) < tol
    m = offset_matrix(k, d_model, base)
    assert abs(float(torch.diagonal(m).sum()) / 2 - want) < tol
    s = relative_similarity([0, k], d_model, base)
    assert abs(float(s[1, 0]) - want) < tol


@pytest.mark.parametrize("d_model", [4, 8, 16, 64])
@pytest.mark.parametrize("k", [1, 7, -5])
def test_best_linear_map_correct_vs_sin_only(d_model, k):
    good = best_linear_map(reference(range(512), d_model), k)
    assert good.residual < 1e-10
    bad = best_linear_map(sin_only(512, d_model), k)
    assert bad.residual > 0.05, bad.residual
    m, r = good  # unpacks as a pair
    assert m.shape == (d_model, d_model) and isinstance(r, float)


def test_best_linear_map_with_float32_table_and_k0():
    fit = best_linear_map(sinusoidal_table(300, 16), 4)
    assert fit.residual < 1e-6
    assert best_linear_map(sin_only(100, 8), 0).residual < 1e-12


@given(max_len=st.integers(0, 3000), d_model=widths, base=bases, block=st.none() | st.integers(1, 80))
def test_table_by_rotation_matches_formula(max_len, d_model, base, block):
    t = table_by_rotation(max_len, d_model, base=base, block=block)
    assert t.shape == (max_len, d_model) and t.dtype == torch.float32
    if max_len:
        assert (t.double() - reference(range(max_len), d_model, base)).abs().max().item() <= 5e-7
        t64 = table_by_rotation(max_len, d_model, base=base, block=block, dtype=torch.float64)
        assert (t64 - reference(range(max_len), d_model, base)).abs().max().item() <= 1e-12


def test_table_by_rotation_block_longer_than_table():
    # B >= max_len: every row is an exact row; a huge B must not allocate B rows
    assert torch.equal(table_by_rotation(10, 8, block=10**12), table_by_rotation(10, 8, block=10))
    torch.testing.assert_close(
        table_by_rotation(10, 8, block=10**12, dtype=torch.float64), reference(range(10), 8), rtol=0, atol=1e-15
    )


def test_table_by_rotation_large_positions():
    max_len = 2**20
    t = table_by_rotation(max_len, 16)
    assert (t.double() - sinusoidal_table(max_len, 16, dtype=torch.float64)).abs().max().item() <= 5e-7
    assert (t - sinusoidal_table(max_len, 16)).abs().max().item() <= 2e-7
    for dtype in (torch.float16, torch.bfloat16):
        low = table_by_rotation(5000, 16, dtype=dtype)
        assert low.dtype == dtype
        tol = 2**-8 if dtype == torch.bfloat16 else 2**-11  # half a unit in the last place near 1
        assert (low.double() - reference(range(5000), 16)).abs().max().item() <= tol


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: offset_matrix(1, 7), ValueError, "d_model"),
        (lambda: offset_matrix(1, 0), ValueError, "d_model"),
        (lambda: offset_matrix(1.5, 8), TypeError, "k must be an integer"),
        (lambda: offset_matrix(2.0, 8), TypeError, "k must be an integer"),
        (lambda: offset_matrix(True, 8), TypeError, "k must be an integer"),
        (lambda: offset_matrix(torch.tensor(1.5), 8), TypeError, "k must be an integer"),
        (lambda: offset_matrix(2**63, 8), ValueError, "2\\*\\*63"),
        (lambda: offset_matrix(1, 8, base=1.0), ValueError, "base"),
        (lambda: offset_matrix(1, 8, base="10000"), TypeError, "base"),
        (lambda: offset_matrix(1, 8, dtype=torch.int32), TypeError, "dtype"),
        (lambda: relative_similarity(-1, 8), ValueError, "positions"),
        (lambda: relative_similarity(4.0, 8), TypeError, "positions"),
        (lambda: relative_similarity([0, 1.5], 8), TypeError, "positions\\[1\\]"),
        (lambda: relative_similarity(torch.zeros(3), 8), TypeError, "integer positions"),
        (lambda: relative_similarity(torch.zeros(2, 2, dtype=torch.long), 8), ValueError, "1-D"),
        (lambda: relative_similarity(5, 9), ValueError, "d_model"),
        (lambda: offset_similarity("abc", 8), TypeError, "offsets"),
        (lambda: best_linear_map([[0.0, 1.0]], 1), TypeError, "table must be a torch.Tensor"),
        (lambda: best_linear_map(torch.zeros(10, 4, dtype=torch.long), 1), TypeError, "table must hold floating"),
        (lambda: best_linear_map(torch.zeros(10), 1), ValueError, "2-D"),
        (lambda: best_linear_map(torch.zeros(10, 8), 5), ValueError, "row pairs"),
        (lambda: best_linear_map(torch.zeros(10, 4), -20), ValueError, "row pairs"),
        (lambda: best_linear_map(torch.zeros(10, 4), 0.5), TypeError, "k must be an integer"),
        (lambda: best_linear_map(torch.full((10, 2), float("nan")), 1), ValueError, "finite"),
        (lambda: table_by_rotation(-1, 8), ValueError, "max_len"),
        (lambda: table_by_rotation(10, 5), ValueError, "d_model"),
        (lambda: table_by_rotation(10, 8, block=0), ValueError, "block"),
        (lambda: table_by_rotation(10, 8, block=2.5), TypeError, "block"),
        (lambda: table_by_rotation(10, 8, dtype=torch.int64), TypeError, "dtype"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: table_by_rotation(10**9, 512), "max_len × d_model.*GiB"),
        (lambda: relative_similarity(10**6, 8), "positions.*similarity matrix"),
        (lambda: relative_similarity(list(range(10**5)), 8), "positions"),
        (lambda: offset_matrix(3, d_model=200_000), "d_model.*M_k"),
        (lambda: offset_similarity(10**12, 8), "offsets"),
    ],
)
def test_oversized_requests_are_refused_before_allocating(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_offset_matrix_equals_block_diag_of_its_blocks():
    for d_model, k in ((2, 5), (8, -3), (64, 1000)):
        assert torch.equal(offset_matrix(k, d_model), torch.block_diag(*offset_blocks(k, d_model)))


def test_best_linear_map_refuses_a_table_whose_float64_copy_is_too_big():
    from pe_lessons import set_memory_limit

    try:
        set_memory_limit(1000)
        with pytest.raises(ValueError, match="table: its float64 copy"):
            best_linear_map(torch.zeros(40, 4), 1)  # 40 × 4 × 8 = 1280 bytes
        with pytest.raises(ValueError, match="d_model: the blocks"):
            offset_blocks(1, 64)  # 32 × 2 × 2 × 8 = 2048 bytes
    finally:
        set_memory_limit(None)
