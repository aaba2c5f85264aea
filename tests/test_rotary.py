"""pe_lessons.rotary against two independent formulations (pe_lessons.baselines: pair rotation, complex
multiply), its properties, and bad input."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pe_lessons.baselines import rope_angles, rope_complex_reference, rope_reference
from pe_lessons.rotary import (
    LAYOUTS,
    RotaryEmbedding,
    apply_rope,
    clear_rope_cache,
    rope_cache_bytes,
    rope_formula,
    rope_frequencies,
    to_half_layout,
    to_interleaved_layout,
)

head_dims = st.integers(1, 40).map(lambda h: 2 * h)
bases = st.sampled_from([2.0, 100.0, 10000.0, 500000.0]) | st.floats(1.5, 1e6)
starts = st.sampled_from([0, 1, 255, 257, 4095, 65536, 10**6, 2**31 + 5, -1, -(10**6)]) | st.integers(-(10**7), 10**7)


def thetas(head_dim, base):
    """θ_i = base^(-2i/head_dim), written with Python's pow (not exp/log as in the package)."""
    return rope_angles([1.0], head_dim, base)[0]


def perm(head_dim):
    """P = [0, 2, …, d-2, 1, 3, …, d-1] written out by hand."""
    return list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))


def random_positions(draw_seq, start, kind, gen):
    if kind == "offset":
        return torch.arange(start, start + draw_seq)
    return torch.randint(0, max(start, 1) + 1000, (draw_seq,), generator=gen)


# --------------------------------------------------------------------------- values


def test_rope_frequencies():
    theta = rope_frequencies(8)
    assert theta.dtype == torch.float64 and theta.shape == (4,)
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64), rtol=1e-15, atol=0)
    torch.testing.assert_close(rope_frequencies(64, 500000.0), thetas(64, 500000.0), rtol=1e-14, atol=0)
    assert rope_frequencies(6, dtype=torch.float32).dtype == torch.float32


@given(
    head_dim=head_dims,
    seq=st.integers(1, 24),
    base=bases,
    start=starts,
    kind=st.sampled_from(["default", "offset", "random"]),
    seed=st.integers(0, 2**16),
)
def test_float32_matches_both_independent_formulations(head_dim, seq, base, start, kind, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, seq, head_dim, generator=gen)
    positions = None if kind == "default" else random_positions(seq, start, kind, gen)
    pos = torch.arange(seq) if positions is None else positions
    P = perm(head_dim)
    got_i = apply_rope(x, positions, base=base)
    got_h = apply_rope(x, positions, base=base, layout="half")
    assert got_i.dtype == got_h.dtype == torch.float32 and got_i.shape == got_h.shape == x.shape
    # interleaved vs complex multiply on pairs (2i, 2i+1)
    assert (got_i.double() - rope_complex_reference(x, pos, base)).abs().max() <= 1e-5
    # half vs rotate_half on pairs (i, i + d/2)
    assert (got_h.double() - rope_reference(x, "half", base, positions=pos)).abs().max() <= 1e-5
    # and across: interleaved, permuted, is rotate_half of the permuted input
    assert (got_i[..., P].double() - rope_reference(x[..., P], "half", base, positions=pos)).abs().max() <= 1e-5


@given(head_dim=head_dims, seq=st.integers(1, 16), base=bases, start=starts, seed=st.integers(0, 2**16))
def test_float64_matches_to_angle_rounding(head_dim, seq, base, start, seed):
    x = torch.randn(3, seq, head_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    pos = torch.arange(start, start + seq)
    # both sides compute m·θ in float64; they differ by the rounding of θ and of m·θ (≤ m·1e-16)
    tol = 1e-12 + 4 * max(abs(start), abs(start + seq)) * 2**-52 * 8
    assert (apply_rope(x, pos, base=base) - rope_complex_reference(x, pos, base)).abs().max() <= tol
    assert (
        apply_rope(x, pos, base=base, layout="half") - rope_reference(x, "half", base, positions=pos)
    ).abs().max() <= tol


def test_large_positions_stay_accurate_in_float32():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))
    for start in (2**20, 10**6, 10**9):
        pos = torch.arange(start, start + 4)
        assert (apply_rope(x, pos).double() - rope_complex_reference(x, pos)).abs().max() <= 1e-5
        assert (
            apply_rope(x, pos, layout="half").double() - rope_reference(x, "half", positions=pos)
        ).abs().max() <= 1e-5
    # the float32-angle formula is visibly off there
    pos = torch.arange(10**6, 10**6 + 4)
    a32 = pos.float()[:, None] * thetas(64, 10000.0).float()
    assert (a32.cos().double() - rope_angles(pos, 64, 10000.0).cos()).abs().max() > 1e-2


def test_positions_default_list_and_cached_decoding_agree():
    x = torch.randn(2, 4, 50, 16, generator=torch.Generator().manual_seed(1))
    for layout in LAYOUTS:
        full = apply_rope(x, layout=layout)
        torch.testing.assert_close(apply_rope(x, torch.arange(50), layout=layout), full, rtol=0, atol=0)
        torch.testing.assert_close(apply_rope(x, list(range(50)), layout=layout), full, rtol=0, atol=0)
        # decoding one token at a time with a position offset gives the same rows
        for t in (0, 1, 37, 49):
            torch.testing.assert_close(apply_rope(x[..., t : t + 1, :], [t], layout=layout), full[..., t : t + 1, :])
        # int32 positions work too, and so do lists of numpy integers or 0-d integer tensors
        torch.testing.assert_close(
            apply_rope(x, torch.arange(50, dtype=torch.int32), layout=layout), full, rtol=0, atol=0
        )
        np_pos = [np.int64(t) if t % 2 else torch.tensor(t, dtype=torch.int32) for t in range(50)]
        torch.testing.assert_close(apply_rope(x, np_pos, layout=layout), full, rtol=0, atol=0)


def test_negative_positions_rotate_backwards():
    x = torch.randn(3, 10, 8, dtype=torch.float64)
    pos = torch.arange(100, 110)
    for layout in LAYOUTS:
        back = apply_rope(apply_rope(x, pos, layout=layout), -pos, layout=layout)
        torch.testing.assert_close(back, x, rtol=0, atol=1e-12)
    torch.testing.assert_close(apply_rope(x, -pos), rope_complex_reference(x, -pos), rtol=0, atol=1e-12)


def test_non_contiguous_input_and_input_left_untouched():
    base = torch.randn(10, 3, 32)
    x = base.transpose(0, 1)  # [3, 10, 32], not contiguous
    before = base.clone()
    for layout in LAYOUTS:
        torch.testing.assert_close(apply_rope(x, layout=layout), apply_rope(x.contiguous(), layout=layout))
        sliced = torch.randn(3, 10, 34)[..., 1:33]  # odd storage offset: no complex view possible
        torch.testing.assert_close(apply_rope(sliced, layout=layout), apply_rope(sliced.contiguous(), layout=layout))
    assert torch.equal(base, before)


def test_empty_inputs():
    assert apply_rope(torch.randn(0, 5, 8)).shape == (0, 5, 8)
    assert apply_rope(torch.randn(2, 0, 8), [], layout="half").shape == (2, 0, 8)


# --------------------------------------------------------------------------- properties


@pytest.mark.parametrize("layout", LAYOUTS)
def test_relative_property_score_depends_only_on_offset(layout):
    gen = torch.Generator().manual_seed(2)
    d = 32
    q, k = torch.randn(d, generator=gen, dtype=torch.float64), torch.randn(d, generator=gen, dtype=torch.float64)
    m = torch.randint(0, 5000, (400,), generator=gen)
    n = torch.randint(0, 5000, (400,), generator=gen)
    qm = apply_rope(q.expand(400, d), m, layout=layout)
    kn = apply_rope(k.expand(400, d), n, layout=layout)
    scores = (qm * kn).sum(-1)
    # same offset m - n, at position 0: <R_{m-n} q, k> (negative offsets included)
    shifted = (apply_rope(q.expand(400, d), m - n, layout=layout) * k).sum(-1)
    torch.testing.assert_close(scores, shifted, rtol=0, atol=1e-9)
    # and the rotation keeps norms
    torch.testing.assert_close(qm.norm(dim=-1), q.norm().expand(400), rtol=0, atol=1e-12)


def test_relative_property_in_float32_over_a_grid():
    gen = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 64, generator=gen), torch.randn(1, 64, generator=gen)
    qs = apply_rope(q.expand(200, 64).contiguous(), torch.arange(200))
    ks = apply_rope(k.expand(200, 64).contiguous(), torch.arange(200))
    scores = (qs @ ks.T).double()  # [m, n]
    for offset in (-150, -7, 0, 1, 99):
        diag = torch.diagonal(scores, offset=-offset)  # entries with m - n = offset
        assert diag.numel() >= 50 and (diag - diag[0]).abs().max() <= 1e-4


@given(head_dim=head_dims, seq=st.integers(1, 12), start=starts, seed=st.integers(0, 2**16))
def test_layout_permutation(head_dim, seq, start, seed):
    x = torch.randn(2, seq, head_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    pos = torch.arange(start, start + seq)
    P = perm(head_dim)
    assert torch.equal(to_half_layout(x), x[..., P])
    assert torch.equal(to_interleaved_layout(to_half_layout(x)), x)
    assert torch.equal(to_half_layout(to_interleaved_layout(x)), x)
    # rope_half(x[..., P]) == rope_interleaved(x)[..., P]
    torch.testing.assert_close(
        apply_rope(x[..., P], pos, layout="half"), apply_rope(x, pos)[..., P], rtol=0, atol=1e-12
    )


def test_permuting_q_and_k_keeps_every_score_and_mixing_layouts_does_not():
    gen = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 4, 30, 16, generator=gen), torch.randn(2, 4, 30, 16, generator=gen)
    P = perm(16)
    scores = apply_rope(q) @ apply_rope(k).transpose(-1, -2)
    torch.testing.assert_close((q[..., P] @ k[..., P].transpose(-1, -2)), q @ k.transpose(-1, -2))
    fixed = apply_rope(to_half_layout(q), layout="half") @ apply_rope(to_half_layout(k), layout="half").transpose(
        -1, -2
    )
    torch.testing.assert_close(fixed, scores, rtol=1e-5, atol=1e-5)
    mixed = apply_rope(q, layout="half") @ apply_rope(k, layout="half").transpose(-1, -2)  # weights in the wrong layout
    assert (mixed - scores).abs().max() > 0.5


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_low_precision_input_is_float32_result_rounded_once(dtype, layout):
    """float16/bfloat16 pairs are rotated in float32 and rounded once at the end."""
    x = torch.randn(2, 3, 40, 64, generator=torch.Generator().manual_seed(5)).to(dtype)
    for pos in (None, torch.arange(70000, 70040)):
        out = apply_rope(x, pos, layout=layout)
        assert out.dtype == dtype and out.shape == x.shape
        assert torch.equal(out, apply_rope(x.float(), pos, layout=layout).to(dtype))
    # positions held in bf16 collide above 256: the bug apply_rope avoids by refusing float16/bfloat16 positions
    assert torch.arange(300, dtype=torch.bfloat16).unique().numel() < 300
    with pytest.raises(TypeError, match=rf"positions of dtype {dtype} are refused: .* pass integers") as caught:
        apply_rope(x, torch.arange(40, dtype=dtype))
    assert "256" not in str(caught.value)  # notebook 07's exercise 2 asks where bfloat16's first gap opens
    for bad in (torch.zeros(40, dtype=torch.bool), torch.zeros(40, dtype=torch.complex64)):
        with pytest.raises(TypeError, match=rf"positions must hold integers .* got dtype {bad.dtype}"):
            apply_rope(x, bad)


def _accuracy_positions():
    """0 … 255, random positions up to 2^20, and 2^20 itself."""
    gen = torch.Generator().manual_seed(11)
    return torch.cat([torch.arange(256), torch.randint(0, 2**20 + 1, (255,), generator=gen), torch.tensor([2**20])])


def _pair_norms(x, layout):
    """|(a, b)| of the pair each feature belongs to (a rotation keeps it), float64, x's shape."""
    x = x.double()
    if layout == "interleaved":
        return x.unflatten(-1, (x.shape[-1] // 2, 2)).norm(dim=-1).repeat_interleave(2, -1)
    return x.unflatten(-1, (2, x.shape[-1] // 2)).norm(dim=-2).repeat(*[1] * (x.dim() - 1), 2)


def _rotations(x, layout, positions):
    """apply_rope eager, and the fused formula torch.compile runs, on the same input."""
    from pe_lessons import _rope_fast

    eager = apply_rope(x, positions, layout=layout)
    size = _rope_fast.CHUNK_ELEMENTS_PER_THREAD
    try:  # the eager kernels in runs of a few positions (large tensors go through them so)
        _rope_fast.CHUNK_ELEMENTS_PER_THREAD = max(1, x.numel() // 7 // torch.get_num_threads())
        in_runs = apply_rope(x, positions, layout=layout)
    finally:
        _rope_fast.CHUNK_ELEMENTS_PER_THREAD = size
    cos, sin = _rope_fast.cos_sin(positions, rope_frequencies(x.shape[-1]), 1.0, x.device, torch.float32)
    return {"eager": eager, "eager in runs": in_runs, "fused": _rope_fast.rotate_fusable(x, cos, sin, layout)}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_float32_is_within_2e7_of_the_float64_truth_up_to_position_2_pow_20(layout):
    """Every output feature is within 2e-7 × |its pair| of the float64 rotation (rotations keep |pair|)."""
    x = torch.randn(2, 3, 512, 64, generator=torch.Generator().manual_seed(12))
    pos = _accuracy_positions()
    truth = rope_reference(x, layout, positions=pos)
    for name, out in _rotations(x, layout, pos).items():
        relative = ((out.double() - truth).abs() / _pair_norms(x, layout)).max().item()
        assert relative <= 2e-7, (name, relative)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_low_precision_is_within_one_ulp_of_the_float64_truth_up_to_position_2_pow_20(dtype, layout):
    """bfloat16: within one unit in the last place of the truth. float16 has finer steps than float32's
    error near zero (a pair that turns to (tiny, large)), so there the bound is float32's 2e-7 × |pair|."""
    x = torch.randn(2, 3, 512, 64, generator=torch.Generator().manual_seed(13)).to(dtype)
    pos = _accuracy_positions()
    truth = rope_reference(x, layout, positions=pos)
    info = torch.finfo(dtype)
    digits = round(-math.log2(info.eps)) + 1  # significand bits: 8 (bfloat16), 11 (float16)
    _, exponent = torch.frexp(truth)  # truth = m·2^e, 1/2 <= |m| < 1: its unit in the last place is 2^(e - digits)
    ulp = torch.ldexp(torch.ones_like(truth), exponent - digits).clamp(min=info.smallest_normal * info.eps)
    for name, out in _rotations(x, layout, pos).items():
        assert out.dtype == dtype
        if dtype == torch.float16:
            ulp = torch.maximum(ulp, 2e-7 * _pair_norms(x, layout))
        ulps = ((out.double() - truth).abs() / ulp).max().item()
        assert ulps <= 1.0, (name, ulps)


def test_float64_input_is_rotated_in_float64():
    x = torch.randn(5, 8, dtype=torch.float64)
    pos = torch.arange(10**6, 10**6 + 5)
    out = apply_rope(x, pos)
    assert out.dtype == torch.float64
    assert (out - rope_complex_reference(x, pos)).abs().max() <= 1e-9


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradient_is_the_inverse_rotation(layout):
    x = torch.randn(2, 6, 8, dtype=torch.float64, requires_grad=True)
    pos = torch.arange(3, 9)
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, pos, layout=layout), (x,))
    assert torch.autograd.gradgradcheck(lambda t: apply_rope(t, pos, layout=layout), (x,))
    g = torch.randn(2, 6, 8, dtype=torch.float64)
    (grad,) = torch.autograd.grad(apply_rope(x, pos, layout=layout), x, g)
    torch.testing.assert_close(grad, apply_rope(g, -pos, layout=layout))
    # low precision: the gradient has the input's dtype
    xh = torch.randn(6, 8, dtype=torch.bfloat16, requires_grad=True)
    apply_rope(xh, layout=layout).sum().backward()
    assert xh.grad is not None and xh.grad.dtype == torch.bfloat16


# --------------------------------------------------------------------------- the module


def test_rotary_embedding_matches_function_and_grows_its_cache():
    rope = RotaryEmbedding(16)
    assert rope.max_len == 0 and dict(rope.state_dict()) == {} and list(rope.parameters()) == []
    x = torch.randn(2, 2, 100, 16)
    torch.testing.assert_close(rope(x), apply_rope(x), rtol=0, atol=0)
    assert rope.max_len == 128 and rope.cos.shape == (128, 8) and rope.cos.dtype == torch.float32
    rope(x[..., :10, :])
    assert rope.max_len == 128  # no shrink, no rebuild
    cos_before = rope.cos
    rope(x[..., :10, :])
    assert rope.cos is cos_before
    # decoding past the cache: it grows to hold the position
    torch.testing.assert_close(rope(x[..., :1, :], [300]), apply_rope(x[..., :1, :], [300]), rtol=0, atol=0)
    assert rope.max_len == 512
    # the cache is exact float64 angles rounded once
    torch.testing.assert_close(rope.cos.double(), rope_angles(range(512), 16, 10000.0).cos(), rtol=0, atol=6e-8)
    # positions past the cap are computed directly (no huge table)
    far = torch.arange(10**8, 10**8 + 3)
    assert (rope(x[0, 0, :3], far).double() - rope_complex_reference(x[0, 0, :3], far)).abs().max() <= 1e-5
    assert rope.max_len <= rope.max_cached_len


def test_rotary_embedding_follows_dtype_and_layout():
    rope = RotaryEmbedding(8, base=500.0, layout="half")
    assert "layout='half'" in repr(rope)
    x = torch.randn(3, 20, 8, dtype=torch.float64)
    out = rope(x)
    assert out.dtype == torch.float64 and rope.cos.dtype == torch.float64
    torch.testing.assert_close(out, rope_reference(x, "half", 500.0, positions=range(20)), rtol=0, atol=1e-12)
    rope.half()  # casting the module must not degrade the cache: it is rebuilt in float32
    xh = x.half()
    assert torch.equal(rope(xh), apply_rope(xh.float(), base=500.0, layout="half").half())
    assert rope.cos.dtype == torch.float32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_rotary_embedding_follows_device():  # pragma: no cover - needs a GPU
    rope = RotaryEmbedding(16)
    x = torch.randn(2, 40, 16)
    want = rope(x)
    got = rope(x.cuda())
    assert got.device.type == "cuda" and rope.cos.device.type == "cuda"
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(
        apply_rope(x.cuda(), torch.arange(40).cuda(), layout="half").cpu(), apply_rope(x, layout="half")
    )


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: apply_rope(torch.randn(3, 7)), ValueError, "even"),
        (lambda: apply_rope(torch.randn(8)), ValueError, r"\[..., seq, head_dim\]"),
        (lambda: apply_rope(torch.arange(16).view(2, 8)), TypeError, "floating"),
        (lambda: apply_rope([[1.0, 2.0]]), TypeError, "torch.Tensor"),
        (lambda: apply_rope(torch.randn(3, 8), torch.arange(3.0).half()), TypeError, "float16/bfloat16"),
        (lambda: apply_rope(torch.randn(3, 8), torch.ones(3, dtype=torch.bool)), TypeError, "integers"),
        (lambda: apply_rope(torch.randn(3, 8), [0, float("nan"), 2]), ValueError, "finite"),
        (lambda: apply_rope(torch.randn(3, 8), torch.tensor([0.0, float("inf"), 2.0])), ValueError, "finite"),
        (lambda: apply_rope(torch.randn(3, 8), [0, True, 2]), TypeError, "bool item"),
        (lambda: apply_rope(torch.randn(3, 8), [0, "1", 2]), TypeError, "str item"),
        (lambda: apply_rope(torch.randn(3, 8), [[0, 1, 2]]), TypeError, "must be a tensor"),
        (lambda: apply_rope(torch.randn(3, 8), torch.arange(3.0) + 0j), TypeError, "integers"),
        (lambda: apply_rope(torch.randn(3, 8), [0, 1, 2**70]), ValueError, "int64"),
        (lambda: apply_rope(torch.randn(3, 8), torch.arange(4)), ValueError, "length seq"),
        (lambda: apply_rope(torch.randn(3, 8), torch.arange(3)[None]), ValueError, r"\[batch, seq\]"),
        (lambda: apply_rope(torch.randn(2, 3, 8), torch.arange(9).view(3, 3)), ValueError, "same batch"),
        (lambda: apply_rope(torch.randn(2, 3, 8), torch.arange(6).view(1, 2, 3)), ValueError, "1-D or 2-D"),
        (lambda: apply_rope(torch.randn(3, 8), rotary_dim=10), ValueError, "rotary_dim"),
        (lambda: apply_rope(torch.randn(3, 8), rotary_dim=3), ValueError, "rotary_dim"),
        (lambda: apply_rope(torch.randn(3, 8), rotary_dim=2.0), TypeError, "rotary_dim"),
        (lambda: RotaryEmbedding(8, rotary_dim=0), ValueError, "rotary_dim"),
        (lambda: apply_rope(torch.randn(3, 8), 3), TypeError, "positions"),
        (lambda: apply_rope(torch.randn(3, 8), layout="halves"), ValueError, "'interleaved'"),
        (lambda: apply_rope(torch.randn(3, 8), layout=1), TypeError, "layout"),
        (lambda: apply_rope(torch.randn(3, 8), base=1.0), ValueError, "base"),
        (lambda: rope_frequencies(7), ValueError, "head_dim"),
        (lambda: to_half_layout(torch.randn(3, 5)), ValueError, "even"),
        (lambda: to_interleaved_layout(torch.randn(3, 4), dim=2), ValueError, "dim"),
        (lambda: RotaryEmbedding(6)(torch.randn(3, 8)), ValueError, "head_dim = 6"),
        (lambda: RotaryEmbedding(8, layout="neox"), ValueError, "layout"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_layout_functions_take_a_dim():
    heads, head_dim, d_model = 2, 6, 5
    w = torch.randn(heads * head_dim, d_model)
    per_head = to_half_layout(w.view(heads, head_dim, d_model), dim=1)
    assert torch.equal(per_head, w.view(heads, head_dim, d_model)[:, perm(head_dim), :])
    assert torch.equal(to_interleaved_layout(per_head, dim=-2), w.view(heads, head_dim, d_model))
    # converting W_q's output features is converting q itself
    x = torch.randn(4, d_model)
    q = (x @ w.T).view(4, heads, head_dim)
    torch.testing.assert_close(x @ per_head.reshape(-1, d_model).T, to_half_layout(q).reshape(4, -1))
    assert math.isclose(float(rope_frequencies(2)[0]), 1.0)


# --------------------------------------------------------------------------- the toy model's "rotary" scheme (notebook 06's toy)


def test_toy_model_rotary_scheme_uses_apply_rope():
    from pe_lessons import toy  # a plain import: a broken toy module must fail here, not skip

    assert "rotary" in toy.available_schemes()
    task = toy.make_task("previous")
    model = toy.make_model(task, "rotary", seed=0)
    assert model.position is None  # nothing is added to the embeddings
    hook = model.blocks[0].attn.rotate
    gen = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(2, 2, 9, 16, generator=gen) for _ in range(3))
    pos = torch.arange(9)
    rq, rk = hook(q, k, pos)
    torch.testing.assert_close(rq, apply_rope(q, pos), rtol=0, atol=0)
    torch.testing.assert_close(rk, apply_rope(k, pos), rtol=0, atol=0)
    # attention with rotary depends on offsets only: shifting every position changes nothing
    shifted = toy.attention(q, k, v, rotate=hook, positions=pos + 1000)
    torch.testing.assert_close(shifted, toy.attention(q, k, v, rotate=hook, positions=pos), rtol=1e-4, atol=1e-5)
    # … but it does see order: the model is not permutation equivariant
    tokens = torch.randint(0, task.vocab_size, (3, 10), generator=gen)
    perm_idx = torch.randperm(10, generator=gen)
    with torch.no_grad():
        out, out_perm = model(tokens), model(tokens[:, perm_idx])
    assert (out[:, perm_idx] - out_perm).abs().max() > 1e-3
    # and it trains (gradients flow through apply_rope)
    history = toy.train(model, task, seq_len=8, steps=3, batch_size=8)
    assert len(history) == 3 and history["loss"].notna().all()


# --------------------------------------------------------------------------- under torch.compile


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fusable_formula_equals_the_eager_kernels(dtype, inverse, layout):
    """The real-arithmetic formula used under torch.compile is the same rotation as the eager kernels."""
    from pe_lessons import _rope_fast

    x = torch.randn(2, 3, 40, 16, dtype=dtype)
    cache = _rope_fast.CosSinCache(rope_frequencies(16))
    kind = _rope_fast.table_kind(layout, dtype)
    eager = _rope_fast.rotate(x, cache.lookup(None, None, 40, x.device, dtype, kind), layout, inverse)
    cos, sin = cache.lookup(None, None, 40, x.device, dtype, "pairs")
    fused = _rope_fast.rotate_fusable(x, cos, sin, layout, inverse)
    torch.testing.assert_close(fused, eager, rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-14)
    positions = [-m for m in range(40)] if inverse else list(range(40))  # the inverse of R_m is R_-m
    assert (fused.double() - rope_reference(x, layout, positions=positions)).abs().max() <= (
        1e-5 if dtype == torch.float32 else 1e-12
    )


def _position_forms(device):
    """Every form apply_rope takes positions in, for x of shape [2, 3, 24, head_dim]."""
    forms = {
        "none": None,
        "list": list(range(3, 27)),
        "cpu tensor": torch.arange(3, 27),
        "[batch, seq]": torch.arange(48).view(2, 24),
        "fractional": torch.arange(24, dtype=torch.float64) * 0.5,
    }
    if torch.cuda.is_available():  # pragma: no cover - needs a GPU
        forms["device tensor"] = torch.arange(3, 27, device="cuda")
    return forms


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_apply_rope_traces_into_one_graph_for_every_form_of_positions(layout, dtype):
    """torch.compile sees apply_rope whole (one graph, no graph break) whatever the positions are,
    traces the real-arithmetic formula (no complex numbers, no writes into views) and computes eager's values.

    The ``aot_eager`` backend traces and runs the graph without generating C++, so this stays fast.
    """
    import torch._dynamo

    for name, pos in _position_forms("cpu").items():
        device = pos.device if isinstance(pos, torch.Tensor) else torch.device("cpu")
        x = torch.randn(2, 3, 24, 8, dtype=dtype, device=device)

        def f(t, pos=pos):
            return apply_rope(t, pos, layout=layout)

        eager = f(x)  # the cached table is built eagerly first, as a model's first call would
        torch._dynamo.reset()
        explained = torch._dynamo.explain(f)(x)
        assert explained.graph_count == 1 and explained.graph_break_count == 0, (name, explained.break_reasons)
        nodes = [node for graph in explained.graphs for node in graph.graph.nodes]
        targets = {node.target for node in nodes}
        assert torch.view_as_complex not in targets and torch.empty_like not in targets, name
        compiled = torch.compile(f, backend="aot_eager", dynamic=False)
        tol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.bfloat16: 0.0}[dtype]
        if dtype == torch.bfloat16:  # float32 results that differ in their last bit may round apart
            assert (compiled(x).float() - eager.float()).abs().max() <= 2**-7 * eager.float().abs().max(), name
        else:
            torch.testing.assert_close(compiled(x), eager, rtol=0, atol=tol)
    torch._dynamo.reset()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradients_match_eager_when_compiled(layout):
    import torch._dynamo

    def f(t):
        return apply_rope(t, layout=layout)

    x = torch.randn(2, 3, 24, 8, dtype=torch.float64)
    f(x)
    compiled = torch.compile(f, backend="aot_eager", dynamic=False)
    xc = x.clone().requires_grad_()
    xe = x.clone().requires_grad_()
    out_c, out_e = compiled(xc), f(xe)
    torch.testing.assert_close(out_c, out_e, rtol=0, atol=1e-12)
    (out_c * torch.arange(8.0, dtype=torch.float64)).sum().backward()
    (out_e * torch.arange(8.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(xc.grad, xe.grad, rtol=0, atol=1e-12)
    torch._dynamo.reset()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_inductor_fuses_each_layout_into_one_kernel(layout):
    """With Inductor (the default backend) a float32 or bfloat16 call is one generated kernel:
    conversion up, rotation and conversion down in a single loop over x."""
    import torch._dynamo
    from torch._inductor import metrics

    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 3, 24, 8).to(dtype)

        def f(t):
            return apply_rope(t, layout=layout)

        eager = f(x)
        torch._dynamo.reset()
        metrics.reset()
        compiled = torch.compile(f, dynamic=False)
        try:
            out = compiled(x)
        except Exception as err:  # pragma: no cover - no C++ compiler on this machine
            pytest.skip(f"Inductor cannot build kernels here: {type(err).__name__}")
        assert metrics.generated_kernel_count == 1, (dtype, metrics.generated_kernel_count)
        assert (out.float() - eager.float()).abs().max() <= 2**-7 * eager.float().abs().max()
    torch._dynamo.reset()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_func_transforms_grad_vmap_and_jacrev(layout):
    """torch.func.grad, vmap (over any batch dim) and jacrev agree with autograd and the plain call."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 8, 6, dtype=torch.float64, generator=gen)
    w = torch.randn(2, 3, 8, 6, dtype=torch.float64, generator=gen)

    def rope(t):
        return apply_rope(t, layout=layout)

    grad = torch.func.grad(lambda t: (rope(t) * w).sum())(x)
    xe = x.clone().requires_grad_()
    (rope(xe) * w).sum().backward()
    torch.testing.assert_close(grad, xe.grad, rtol=0, atol=1e-12)
    for dim in (0, 1):  # the vmapped dim is never one of the last two (seq, head_dim)
        torch.testing.assert_close(torch.func.vmap(rope, in_dims=dim)(x), rope(x.movedim(dim, 0)), rtol=0, atol=0)
    jac = torch.func.jacrev(rope)(x[0, 0])  # d out[s, d] / d x[t, e]
    torch.testing.assert_close(torch.einsum("sdte,sd->te", jac, w[0, 0]), grad[0, 0], rtol=0, atol=1e-12)
    assert torch.count_nonzero(jac.sum((1, 3)) - torch.diag(jac.sum((1, 3)).diagonal())) == 0  # no mixing of positions


# --------------------------------------------------------------------------- the definition and the fast path


@given(head_dim=head_dims, seq=st.integers(1, 12), base=bases, start=starts, seed=st.integers(0, 2**16))
def test_rope_formula_is_the_definition_and_apply_rope_computes_it(head_dim, seq, base, start, seed):
    x = torch.randn(2, seq, head_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    pos = torch.arange(start, start + seq)
    tol = 1e-12 + 4 * max(abs(start), abs(start + seq)) * 2**-52 * 8
    assert (rope_formula(x, pos, base=base) - rope_complex_reference(x, pos, base)).abs().max() <= tol
    assert (
        rope_formula(x, pos, base=base, layout="half") - rope_reference(x, "half", base, positions=pos)
    ).abs().max() <= tol
    for layout in LAYOUTS:
        fast = apply_rope(x.float(), pos, base=base, layout=layout).double()
        assert (fast - rope_formula(x, pos, base=base, layout=layout)).abs().max() <= 1e-5


def test_rope_frequencies_are_the_sinusoidal_frequencies():
    from pe_lessons.sinusoidal import inverse_frequencies

    for d, base in ((2, 10.0), (64, 10000.0), (128, 500000.0)):
        assert torch.equal(rope_frequencies(d, base), inverse_frequencies(d, base))


def test_no_private_torch_api():
    """The rotary code reaches torch.func's rules through public API only (no torch._C)."""
    import inspect

    from pe_lessons import _rope_fast, rotary

    for module in (rotary, _rope_fast):
        assert "torch._C" not in inspect.getsource(module)


def test_shared_cache_is_bounded_by_bytes_and_can_be_cleared(monkeypatch):
    from pe_lessons import _rope_fast

    clear_rope_cache()
    assert rope_cache_bytes() == 0
    # many bases, both layouts, one input whose positions fill large tables: unbounded, this would keep 224 MiB
    x = torch.randn(1, 1, 2048, 64)  # 0.5 MiB
    pos = torch.arange(60000, 62048)
    for base in (1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6):
        for layout in LAYOUTS:
            out = apply_rope(x, pos, base=base, layout=layout)
            assert rope_cache_bytes() <= _rope_fast.CACHE_LIMIT_BYTES
    assert (
        out.double() - rope_reference(x, "half", 5e6, positions=pos)
    ).abs().max() <= 1e-5  # still right after evictions
    assert rope_cache_bytes() > 0
    clear_rope_cache()
    assert rope_cache_bytes() == 0
    # a smaller bound: the least recently used tables go first, results stay the same
    monkeypatch.setattr(_rope_fast, "CACHE_LIMIT_BYTES", 200_000)
    small = torch.randn(3, 100, 16)
    first = apply_rope(small, base=100.0)
    for base in (200.0, 300.0, 400.0, 500.0):
        apply_rope(small, base=base)
        assert rope_cache_bytes() <= 200_000
    assert torch.equal(apply_rope(small, base=100.0), first)
    # a table larger than the bound on its own is used once and not kept
    apply_rope(torch.randn(1, 4000, 16), base=600.0)
    assert rope_cache_bytes() <= 200_000
    clear_rope_cache()


def test_positions_without_host_bounds_are_not_read_back():
    """Device-resident positions skip the cache: nothing is read back (no sync), the rows are computed directly."""
    from pe_lessons import _rope_fast

    tables = _rope_fast.CosSinCache(rope_frequencies(16))
    pos = torch.tensor([3, 70000, -5, 12])
    for layout in LAYOUTS:
        got = tables.lookup(pos, None, 4, pos.device, torch.float64, layout)
        cos, sin = _rope_fast.cos_sin(pos, rope_frequencies(16), 1.0, pos.device, torch.float64)
        want = _rope_fast.layout_tables(cos, sin, layout)
        assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    assert tables.max_len == 0  # the cache was not consulted
    # with host bounds (a CPU tensor or a list), the cache is used and grows
    for positions in (torch.tensor([3, 100, 5, 12]), [3, 100, 5, 12]):
        rope = RotaryEmbedding(16)
        rope(torch.randn(4, 16), positions)
        assert rope.max_len == 128


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_no_synchronisation_with_device_positions():  # pragma: no cover - needs a GPU
    x = torch.randn(2, 4, 64, 32, device="cuda")
    pos = torch.arange(64, device="cuda") + 7
    rope = RotaryEmbedding(32)
    want = apply_rope(x.cpu(), pos.cpu())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        out_module, out_fn = rope(x, pos), apply_rope(x, pos, layout="interleaved")
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.testing.assert_close(out_module.cpu(), want, rtol=0, atol=1e-5)
    torch.testing.assert_close(out_fn.cpu(), want, rtol=0, atol=1e-5)


# --------------------------------------------------------------------------- eager chunks


def _chunk_cases():
    """x shapes that chunk into runs of positions at 48 elements per thread: a smaller last run, one
    position per run (the leading dims alone hold more than 48), a 2-D x, a run of a single row."""
    return [(3, 5, 7, 6), (2, 1, 40, 8), (37, 4), (2, 3, 2, 10)]


def _truth(x, layout, pos):
    """The float64 rotation of x at pos (None, [seq] or [batch, seq] positions)."""
    if pos is not None and pos.dim() == 2:
        return torch.stack([rope_reference(x[b].double(), layout, positions=pos[b]) for b in range(x.shape[0])])
    return rope_reference(x.double(), layout, positions=torch.arange(x.shape[-2]) if pos is None else pos)


def _same_rotation(got, want, x):
    """Equal up to float32 rounding of the products, then rounding to x's dtype: one unit in the last place of
    the largest |x| (a rotation keeps |pair| <= sqrt(2)·max|x|)."""
    eps = (
        torch.finfo(got.dtype).eps
        if got.dtype in (torch.bfloat16, torch.float16)
        else 4 * torch.finfo(torch.float32).eps
    )
    if got.dtype == torch.float64:
        eps = 4 * torch.finfo(torch.float64).eps
    limit = eps * 2 * x.double().abs().max().item()
    assert (got.double() - want.double()).abs().max().item() <= limit


def _small_chunks(monkeypatch, elements):
    """Make every eager chunk about ``elements`` elements, whatever the thread count."""
    from pe_lessons import _rope_fast

    monkeypatch.setattr(_rope_fast, "CHUNK_ELEMENTS_PER_THREAD", max(1, elements // torch.get_num_threads()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_eager_runs_of_positions_give_the_one_pass_results(monkeypatch, layout, dtype):
    """Large tensors are rotated run by run (so the later passes find a run in the cache): the same operations
    on every element, for every form of positions, the inverse rotation (the gradient's) included. Bits may
    differ in float32's last place (a vectorised kernel's body and its tail round a complex product
    differently), so the results agree to float32's rounding, then the dtype's."""
    from pe_lessons import _rope_fast

    gen = torch.Generator().manual_seed(21)
    for shape in _chunk_cases():
        x = torch.randn(shape, generator=gen).to(dtype)
        seq = shape[-2]
        forms = [None, torch.arange(1000, 1000 + seq), torch.randint(0, 5000, (seq,), generator=gen)]
        if len(shape) >= 3:
            forms.append(torch.randint(0, 5000, (shape[0], seq), generator=gen))  # per-row positions
        for pos in forms:
            monkeypatch.setattr(_rope_fast, "CHUNK_ELEMENTS_PER_THREAD", 1 << 30)
            whole = apply_rope(x, pos, layout=layout)
            whole_back = apply_rope(whole, None if pos is None else -pos, layout=layout)
            _small_chunks(monkeypatch, 48)
            chunked = apply_rope(x, pos, layout=layout)
            assert chunked.dtype == dtype
            _same_rotation(chunked, whole, x)
            _same_rotation(apply_rope(whole, None if pos is None else -pos, layout=layout), whole_back, x)
            error = (chunked.double() - _truth(x, layout, pos)).abs().max().item()
            assert error <= (1e-10 if dtype == torch.float64 else 1e-5 if dtype == torch.float32 else 4e-2), error
            if pos is not None:  # R_-m undoes R_m, chunked
                back = apply_rope(chunked, -pos, layout=layout).double()
                assert (back - x.double()).abs().max() <= (
                    1e-10 if dtype == torch.float64 else 1e-5 if dtype == torch.float32 else 8e-2
                )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_chunked_inverse_rotation_inside_the_kernel(monkeypatch, layout):
    """rotate(..., inverse=True), as the backward pass calls it, chunked and not."""
    from pe_lessons import _rope_fast

    cache = _rope_fast.CosSinCache(rope_frequencies(8))
    kind = _rope_fast.table_kind(layout, torch.float32)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(3, 4, 30, 8).to(dtype)
        tables = cache.lookup(None, None, 30, x.device, torch.float32, kind)
        whole = _rope_fast.rotate(x, tables, layout, True)
        _small_chunks(monkeypatch, 100)
        assert len(_rope_fast.chunks(x, (x, *tables))) > 1
        _same_rotation(_rope_fast.rotate(x, tables, layout, True), whole, x)
        monkeypatch.undo()
        assert (whole.double() - rope_reference(x.double(), layout, positions=-torch.arange(30))).abs().max() < 2e-2


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_half_layout_runs_the_whole_width_multiply_first(monkeypatch, dtype):
    """Each run of the eager half layout: x·[cos | cos] over the whole run first (it reads x from memory in one
    sweep), then a multiply-add into each half (which finds the run in the cache); float16/bfloat16 between a
    converting copy up and one down, and equal to the float32 result rounded once. One run and several, at
    several sizes."""
    from pe_lessons.optrace import trace_ops

    for shape, elements in (((1, 1, 1, 2), None), ((2, 3, 17, 8), None), ((2, 3, 17, 8), 60), ((4, 2, 33, 64), 900)):
        if elements is not None:
            _small_chunks(monkeypatch, elements)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(7)).to(dtype)
        apply_rope(x, layout="half")  # builds the cached tables
        kernels = [op["op"] for op in trace_ops(lambda t: apply_rope(t, layout="half"), x) if op["kernel"]]
        per_run = ["mul", "addcmul_", "addcmul_"]
        if dtype != torch.float32:
            per_run = ["copy_", *per_run, "copy_"] if elements is not None else ["to", *per_run, "to"]
        runs, left = divmod(len(kernels), len(per_run))
        assert left == 0 and kernels == per_run * runs, (shape, kernels)
        assert (runs > 1) == (elements is not None), (shape, runs)
        # one run or several: the float32 rotation, rounded once (the same order as float32's, so the same bits)
        assert torch.equal(apply_rope(x, layout="half"), apply_rope(x.float(), layout="half").to(dtype)), shape
        monkeypatch.undo()
    if dtype == torch.float32:
        return
    # at full size the other order (sin terms first) rounds some elements differently, so the equality above can
    # tell the orders apart there: the bfloat16/float16 path must run float32's order
    from pe_lessons import _rope_fast

    x = torch.randn(4, 8, 1024, 64, generator=torch.Generator().manual_seed(0)).to(dtype)
    want = apply_rope(x.float(), layout="half")
    assert torch.equal(apply_rope(x, layout="half"), want.to(dtype))
    xf, other = x.float(), torch.empty(x.shape)
    a, b = xf.chunk(2, -1)
    cos, sin = _rope_fast.cos_sin(torch.arange(1024), rope_frequencies(64), 1.0, xf.device, torch.float32)
    multiplier, neg_sin, sin = _rope_fast.layout_tables(cos, sin, "half")
    torch.mul(b, neg_sin, out=other[..., :32])
    torch.mul(a, sin, out=other[..., 32:])
    other.addcmul_(xf, multiplier)
    assert (other - want).abs().max() <= 2 * torch.finfo(torch.float32).eps * xf.abs().max()  # the same rotation
    if torch.equal(other, want):  # addcmul_ rounds its product apart here (ATEN_CPU_CAPABILITY=default): same bits
        pytest.skip("the two kernel orders give the same float32 bits on this CPU: nothing to tell apart")
    assert (other.to(dtype) != want.to(dtype)).sum() > 0  # but other bits, that the equality above would catch


def test_chunks_cover_the_output_once_with_the_right_table_rows(monkeypatch):
    from pe_lessons import _rope_fast

    _small_chunks(monkeypatch, 40)
    size = _rope_fast.CHUNK_ELEMENTS_PER_THREAD * torch.get_num_threads()
    for shape, per_row in (((3, 5, 7, 6), False), ((2, 1, 40, 8), False), ((3, 2, 9, 4), True), ((37, 4), False)):
        x = torch.arange(math.prod(shape), dtype=torch.float32).view(shape)
        out = torch.zeros(shape)
        rows = shape[0] if per_row else 1
        table = torch.arange(rows * shape[-2], dtype=torch.float32)  # one value per (batch row, position)
        table = table.view(rows, *[1] * (len(shape) - 3), shape[-2], 1) if per_row else table.view(shape[-2], 1)
        parts = _rope_fast.chunks(x, (x, out, table))
        assert len(parts) > 1
        for xc, oc, tc in parts:
            assert xc.shape == oc.shape and xc.numel() <= max(size, math.prod(shape) // shape[-2])
            oc += xc + 1000 * (tc + 1)  # written once, with this chunk's own table rows
        want = x + 1000 * (torch.broadcast_to(table, (*shape[:-1], 1)) + 1)
        assert torch.equal(out, want), shape
    # not contiguous, or small: one chunk, x itself
    x = torch.randn(4, 64, 8).transpose(0, 1)
    assert len(_rope_fast.chunks(x, (x, torch.ones(64, 4)))) == 1
    x = torch.randn(2, 4)
    assert _rope_fast.chunks(x, (x, torch.ones(2, 2)))[0][0] is x
    x = torch.randn(3, 5, 7, 6, device="meta")  # off the CPU: one run (a GPU takes each kernel whole)
    assert len(_rope_fast.chunks(x, (x, torch.ones(7, 3, device="meta")))) == 1


@pytest.mark.parametrize("layout", LAYOUTS)
def test_chunked_rotation_keeps_its_gradient_and_takes_non_contiguous_input(monkeypatch, layout):
    _small_chunks(monkeypatch, 64)
    x = torch.randn(2, 3, 20, 8, dtype=torch.float64, requires_grad=True)
    pos = torch.arange(5, 25)
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, pos, layout=layout), (x,))
    g = torch.randn(2, 3, 20, 8, dtype=torch.float64)
    (grad,) = torch.autograd.grad(apply_rope(x, pos, layout=layout), x, g)
    torch.testing.assert_close(grad, apply_rope(g, -pos, layout=layout))
    for dtype in (torch.float32, torch.bfloat16):
        view = torch.randn(20, 2, 3, 8).to(dtype).permute(1, 2, 0, 3)  # not contiguous: one chunk
        torch.testing.assert_close(
            apply_rope(view, pos, layout=layout), apply_rope(view.contiguous(), pos, layout=layout)
        )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_rotation_is_one_graph_without_runs(monkeypatch, layout):
    """Under torch.compile the rotation is the fused formula: a tensor the eager kernels would take in runs
    of positions traces into one graph with no split and no scratch copies, and computes the same values."""
    import torch._dynamo

    _small_chunks(monkeypatch, 64)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 3, 24, 8).to(dtype)

        def f(t):
            return apply_rope(t, layout=layout)

        eager = f(x)  # in runs (the cached tables are built here)
        torch._dynamo.reset()
        explained = torch._dynamo.explain(f)(x)
        assert explained.graph_count == 1 and explained.graph_break_count == 0, explained.break_reasons
        targets = {str(node.target) for graph in explained.graphs for node in graph.graph.nodes}
        assert not any("split" in t or "copy_" in t for t in targets), targets
        compiled = torch.compile(f, backend="aot_eager", dynamic=False)
        assert (compiled(x).float() - eager.float()).abs().max() <= 2**-7 * eager.float().abs().max()
    torch._dynamo.reset()
