"""pe_lessons.relative: ALiBi slopes and biases, T5 buckets and bias, checked against transformers' own code."""

import math

import pytest
import torch

from pe_lessons import set_memory_limit
from pe_lessons.relative import (
    ALiBiBias,
    RelativePositionBias,
    alibi_bias,
    alibi_slopes,
    t5_bucket_edges,
    t5_relative_bucket,
)

bloom = pytest.importorskip("transformers.models.bloom.modeling_bloom")
t5 = pytest.importorskip("transformers.models.t5.modeling_t5")


# --------------------------------------------------------------------------- ALiBi


def test_slopes_follow_the_paper_for_powers_of_two():
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]  # 1/2 … 1/256, exact
    want16 = torch.tensor([2.0 ** (-k / 2) for k in range(1, 17)], dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(16), want16)
    assert alibi_slopes(1).tolist() == [2.0**-8]
    assert alibi_slopes(8).dtype == torch.float64


def test_slopes_for_other_head_counts_interleave_the_next_power_of_two():
    # 12 heads: the 8 slopes of 8 heads, then slopes 1, 3, 5, 7 of 16 heads (2^-0.5, 2^-1.5, …)
    want = [2.0**-k for k in range(1, 9)] + [2.0 ** (-k / 2) for k in (1, 3, 5, 7)]
    torch.testing.assert_close(alibi_slopes(12), torch.tensor(want, dtype=torch.float64), rtol=1e-15, atol=0)
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


@pytest.mark.parametrize("n_heads", range(1, 65))
def test_slopes_match_bloom_build_alibi_tensor(n_heads):
    # BLOOM's tensor is slope_h · key position (shift-invariant under softmax); key position 1 gives the slope
    ref = bloom.build_alibi_tensor(torch.ones(1, 3), n_heads, torch.float32)[:, 0, 1]
    torch.testing.assert_close(alibi_slopes(n_heads), ref.double(), rtol=1e-6, atol=0)


def test_alibi_bias_values_and_shape():
    bias = alibi_bias(4, 5, 7, dtype=torch.float64)
    assert bias.shape == (4, 5, 7) and bias.dtype == torch.float64
    slopes = alibi_slopes(4)
    for h, i, j in [(0, 0, 0), (1, 4, 0), (3, 2, 6), (2, 1, 3)]:
        assert bias[h, i, j].item() == -slopes[h].item() * abs(i - j)
    assert alibi_bias(2, 3).shape == (2, 3, 3) and alibi_bias(2, 3).dtype == torch.float32


def test_alibi_bias_gives_the_same_causal_attention_as_bloom():
    g = torch.Generator().manual_seed(0)
    n_heads, seq = 6, 9
    scores = torch.randn(n_heads, seq, seq, generator=g, dtype=torch.float64)
    future = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    ref_bias = bloom.build_alibi_tensor(torch.ones(1, seq), n_heads, torch.float64).view(n_heads, 1, seq)
    ours = torch.softmax((scores + alibi_bias(n_heads, seq, dtype=torch.float64)).masked_fill(future, -math.inf), -1)
    ref = torch.softmax((scores + ref_bias).masked_fill(future, -math.inf), -1)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-9)


def test_alibi_module_matches_the_function_and_has_no_parameters():
    module = ALiBiBias(12)
    assert list(module.parameters()) == [] and "slopes" not in module.state_dict()
    torch.testing.assert_close(module(6, 8), alibi_bias(12, 6, 8))
    assert module(5).shape == (12, 5, 5)


# --------------------------------------------------------------------------- T5


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(
    "num_buckets, max_distance", [(32, 128), (16, 64), (8, 16), (64, 1000), (33, 100), (6, 7), (4, 3)]
)
def test_t5_buckets_identical_to_transformers(bidirectional, num_buckets, max_distance):
    r = torch.arange(-3000, 3001)
    ref = t5.T5Attention._relative_position_bucket(
        r, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    ours = t5_relative_bucket(r, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert ours.dtype == torch.int64 and torch.equal(ours, ref)
    # int32 input and a 2-D shape give the same
    grid = torch.arange(20)[None, :] - torch.arange(20)[:, None]
    assert torch.equal(
        t5_relative_bucket(grid.int(), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance),
        t5.T5Attention._relative_position_bucket(
            grid, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        ),
    )


def test_t5_bucket_structure_exact_then_logarithmic_then_clipped():
    r = -torch.arange(0, 400)
    b = t5_relative_bucket(r)  # bidirectional, 32 buckets: 16 per side, 8 exact
    assert b[:8].tolist() == list(range(8))
    assert int(b[40]) == int(t5_relative_bucket(-40)) == 12  # 8 + floor(ln(40/8) / ln(128/8) · 8) = 8 + 4
    assert int(b[127]) == 15 and (b[128:] == 15).all() and int(b[91]) == 15 and int(b[90]) == 14
    assert bool((b.diff() >= 0).all())  # further away, never a smaller bucket
    assert t5_bucket_edges() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 23, 32, 46, 64, 91]
    # positive offsets use the upper half of the buckets
    assert int(t5_relative_bucket(3)) == 16 + 3 and int(t5_relative_bucket(0)) == 0
    # causal: positive offsets (never seen) share bucket 0 with r = 0; all buckets go to r ≤ 0
    assert t5_relative_bucket([5, 0, -1, -15, -16], bidirectional=False).tolist() == [0, 0, 1, 15, 16]


def test_relative_position_bias_matches_t5_compute_bias():
    for is_decoder in (False, True):
        config = t5.T5Config(
            d_model=16,
            d_kv=4,
            num_heads=4,
            relative_attention_num_buckets=16,
            relative_attention_max_distance=40,
            is_decoder=is_decoder,
        )
        ref = t5.T5Attention(config, has_relative_attention_bias=True)
        ours = RelativePositionBias(4, num_buckets=16, max_distance=40, bidirectional=not is_decoder)
        with torch.no_grad():
            ours.weight.copy_(torch.randn(16, 4, generator=torch.Generator().manual_seed(1)))
            ref.relative_attention_bias.weight.copy_(ours.weight)
        for q_len, k_len in [(7, 7), (50, 50), (3, 60)]:
            torch.testing.assert_close(ours(q_len, k_len), ref.compute_bias(q_len, k_len)[0], rtol=0, atol=0)


def test_relative_position_bias_is_learned_and_starts_at_zero():
    bias = RelativePositionBias(3, num_buckets=8, max_distance=16)
    assert bias.weight.shape == (8, 3) and bias.weight.requires_grad and not bias.weight.any()
    out = bias(5, 5)
    out.sum().backward()
    assert bias.weight.grad is not None and bias.weight.grad.abs().sum() > 0
    seeded = RelativePositionBias(
        3, num_buckets=8, max_distance=16, init_std=0.02, generator=torch.Generator().manual_seed(0)
    )
    assert 0 < seeded.weight.std().item() < 0.1
    assert "num_buckets=8" in repr(bias)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: alibi_slopes(0), ValueError, "n_heads must be an integer >= 1"),
        (lambda: alibi_slopes(2.0), TypeError, "n_heads must be an integer"),
        (lambda: alibi_bias(4, 0), ValueError, "q_len"),
        (lambda: alibi_bias(4, 3, -1), ValueError, "k_len"),
        (lambda: alibi_bias(4, 3, dtype=torch.int64), TypeError, "dtype"),
        (lambda: ALiBiBias(-2), ValueError, "n_heads"),
        (lambda: t5_relative_bucket(torch.tensor([0.5])), TypeError, "integer offsets"),
        (lambda: t5_relative_bucket([1.5, 2.0]), TypeError, "integer offsets"),
        (lambda: t5_relative_bucket("far"), TypeError, "relative_position"),
        (lambda: t5_relative_bucket(True), TypeError, "bool"),
        (lambda: t5_relative_bucket(3, num_buckets=0), ValueError, "num_buckets must be an integer >= 4"),
        (
            lambda: t5_relative_bucket(3, num_buckets=1, bidirectional=False),
            ValueError,
            "num_buckets must be an .* >= 2",
        ),
        (lambda: t5_relative_bucket(3, max_distance=8), ValueError, "max_distance must be above the exact range"),
        (lambda: t5_relative_bucket(3, max_distance=-5), ValueError, "max_distance"),
        (lambda: t5_relative_bucket(3, bidirectional=1), TypeError, "bidirectional"),
        (lambda: RelativePositionBias(0), ValueError, "n_heads"),
        (lambda: RelativePositionBias(2, num_buckets=-4), ValueError, "num_buckets"),
        (lambda: RelativePositionBias(2, num_buckets=8, max_distance=2), ValueError, "max_distance"),
        (lambda: RelativePositionBias(2, init_std=-1.0), ValueError, "init_std"),
        (lambda: RelativePositionBias(2)(0, 3), ValueError, "q_len"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_absurd_sizes_are_refused_before_allocating():
    set_memory_limit(2**20)
    try:
        with pytest.raises(ValueError, match="q_len: the bias would have shape"):
            alibi_bias(8, 10**6)
        with pytest.raises(ValueError, match="q_len"):
            RelativePositionBias(8)(10**5, 10**5)
        with pytest.raises(ValueError, match="num_buckets"):
            RelativePositionBias(8, num_buckets=10**6, max_distance=10**7)
        with pytest.raises(ValueError, match="n_heads"):
            alibi_slopes(10**6)
    finally:
        set_memory_limit(None)


# --------------------------------------------------------------------------- notebook 09: chart (checkers: tests/exercises)


def test_attention_heatmaps_chart():
    from pe_lessons import plots

    w = torch.softmax(torch.randn(4, 6, generator=torch.Generator().manual_seed(0)), -1)
    chart = plots.attention_heatmaps({"a": w, "b": w.flip(-1)}, queries=range(10, 14), title="t")
    spec = chart.to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert len(rows) == 2 * 4 * 6 and {r["query"] for r in rows} == {10, 11, 12, 13}
    assert {r["panel"] for r in rows} == {"a", "b"}
    with pytest.raises(ValueError, match="same shape"):
        plots.attention_heatmaps({"a": w, "b": w[:2]})
    with pytest.raises(ValueError, match="queries has 3 positions for 4 rows"):
        plots.attention_heatmaps({"a": w}, queries=range(3))
    with pytest.raises(ValueError, match=r"\[q, k\] matrix"):
        plots.attention_heatmaps({"a": w[None]})
    with pytest.raises(TypeError, match="non-empty dict"):
        plots.attention_heatmaps({})
    with pytest.raises(ValueError, match="exceed"):
        plots.attention_heatmaps({"a": torch.zeros(100, 100)})


def test_accuracy_by_length_chart_keeps_single_points_and_drops_nan():
    import pandas as pd

    from pe_lessons import plots

    frame = pd.DataFrame(
        {
            "scheme": ["a", "a", "a", "a", "b", "b"],
            "length": [16, 16, 32, 32, 16, 32],
            "accuracy": [1.0, 0.9, 0.5, 0.7, 0.8, float("nan")],
        }
    )
    rows = next(iter(plots.accuracy_by_length(frame).to_dict()["datasets"].values()))
    means = {(r["scheme"], r["length"]): r["accuracy"] for r in rows}
    assert means == {("a", 16): 0.95, ("a", 32): 0.6, ("b", 16): 0.8}
    with pytest.raises(ValueError, match="columns scheme, length, accuracy"):
        plots.accuracy_by_length(frame.drop(columns="scheme"))


@pytest.mark.parametrize("causal", [False, True])
def test_toy_t5_attention_matches_t5attention_unscaled_scores(causal):
    """The toy's T5 scheme computes what ``T5Attention`` does: ``q kᵀ + bias`` with no 1/√head_dim."""
    from pe_lessons.toy import ToyTransformer

    model = ToyTransformer(8, 8, scheme="t5", d_model=32, n_heads=4, causal=causal, max_len=16, num_buckets=8)
    attn = model.blocks[0].attn
    assert attn.scale == 1.0
    config = t5.T5Config(
        d_model=32,
        d_kv=8,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        is_decoder=causal,
        dropout_rate=0.0,
    )
    ref = t5.T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        attn.qkv.weight.copy_(torch.randn(96, 32, generator=g))  # large weights: a missing or extra scale shows
        attn.qkv.bias.zero_()  # T5's projections have no bias
        attn.out.bias.zero_()
        model.relative.weight.copy_(torch.randn(8, 4, generator=g) * 3)
        ref.q.weight.copy_(attn.qkv.weight[:32])
        ref.k.weight.copy_(attn.qkv.weight[32:64])
        ref.v.weight.copy_(attn.qkv.weight[64:])
        ref.o.weight.copy_(attn.out.weight)
        ref.relative_attention_bias.weight.copy_(model.relative.weight)
        x = torch.randn(2, 40, 32, generator=g)  # 40 > max_distance: the last bucket is shared
        mask = None
        if causal:
            mask = torch.zeros(40, 40).masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
            mask = mask[None, None]
        want = ref(x, mask=mask)[0]
        torch.testing.assert_close(attn(x, torch.arange(40)), want, rtol=1e-4, atol=1e-4)
        # with 1/√head_dim, the scores the toy used to compute, the outputs differ
        attn.scale = None
        assert (attn(x, torch.arange(40)) - want).abs().max() > 0.1


def test_toy_t5_starts_like_scaled_attention():
    """T5 folds 1/√head_dim into the query projection's initialisation: the untrained toy's query weights are
    a plain model's divided by √head_dim, so it computes what scaled attention with the plain weights does."""
    import copy

    from pe_lessons.toy import ToyTransformer

    torch.manual_seed(0)
    t5_model = ToyTransformer(8, 8, scheme="t5", d_model=32, n_heads=4, causal=True)
    torch.manual_seed(0)
    plain = ToyTransformer(8, 8, scheme="none", d_model=32, n_heads=4, causal=True)  # same draws, no folding
    for a, b in zip(plain.blocks, t5_model.blocks):
        torch.testing.assert_close(b.attn.qkv.weight[:32], a.attn.qkv.weight[:32] / 8**0.5)
        torch.testing.assert_close(b.attn.qkv.weight[32:], a.attn.qkv.weight[32:])
    unfolded = copy.deepcopy(t5_model)
    with torch.no_grad():
        for block in unfolded.blocks:
            block.attn.qkv.weight[:32] *= 8**0.5
            block.attn.qkv.bias[:32] *= 8**0.5
            block.attn.scale = 8**-0.5
    tokens = torch.randint(0, 8, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(unfolded(tokens), t5_model(tokens), rtol=1e-5, atol=1e-5)
