"""Context-extension rules, partial rotary and per-row positions, against Hugging Face transformers (test-only)."""

import math
import warnings

import pytest
import torch

from pe_lessons.rotary import (
    LAYOUTS,
    ROPE_TYPES,
    RotaryEmbedding,
    apply_rope,
    rope_formula,
    rope_frequencies,
    scaled_frequencies,
)

transformers = pytest.importorskip("transformers")
from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb  # noqa: E402

L = 256  # trained length in the rules below (original_max_position_embeddings)


def rules(head_dim):
    """(our scaling dict, HF rope_parameters minus rope_theta, HF max_position_embeddings) for every rope_type."""
    pairs = head_dim // 2
    short = [1.0 + 0.01 * i for i in range(pairs)]
    long = [1.0 + 0.5 * i * i / pairs for i in range(pairs)]
    out = [
        ({"rope_type": "default"}, {"rope_type": "default"}, L),
        ({"rope_type": "linear", "factor": 4.0}, {"rope_type": "linear", "factor": 4.0}, 4 * L),
        ({"rope_type": "linear", "factor": 2.5}, {"rope_type": "linear", "factor": 2.5}, 4 * L),
        # HF's dynamic rule reads the trained length from max_position_embeddings
        (
            {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": L},
            {"rope_type": "dynamic", "factor": 4.0},
            L,
        ),
    ]
    for extra in (
        {},
        {"beta_fast": 16.0, "beta_slow": 2.0},
        {"truncate": False},
        {"attention_factor": 1.3},
        {"mscale": 0.707, "mscale_all_dim": 1.0},
        {"mscale": 1.0, "mscale_all_dim": 1.0},
    ):
        ours = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": L, **extra}
        out.append((ours, dict(ours), 8 * L))
    for factor, low, high in ((8.0, 1.0, 4.0), (4.0, 2.0, 8.0)):
        ours = {
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": L,
        }
        out.append((ours, dict(ours), 16 * L))
    for extra in ({}, {"attention_factor": 1.1}):
        ours = {
            "rope_type": "longrope",
            "short_factor": short,
            "long_factor": long,
            "factor": 16.0,
            "original_max_position_embeddings": L,
            **extra,
        }
        out.append((ours, dict(ours), 16 * L))
    return out


def hf_config(head_dim, base, params, max_positions):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LlamaConfig(
            hidden_size=4 * head_dim,
            num_attention_heads=4,
            head_dim=head_dim,
            max_position_embeddings=max_positions,
            rope_parameters={"rope_theta": base, **params},
        )


def hf_frequencies(config, kind, seq_len):
    if kind == "default":
        return LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    return ROPE_INIT_FUNCTIONS[kind](config, "cpu", seq_len=seq_len)


@pytest.mark.parametrize("head_dim", [8, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0, 1e6])
def test_frequencies_and_attention_factor_match_transformers(head_dim, base):
    seen = set()
    for ours, theirs, max_positions in rules(head_dim):
        config = hf_config(head_dim, base, theirs, max_positions)
        for seq_len in (None, L // 2, L, L + 1, 3 * L):
            want, want_factor = hf_frequencies(config, ours["rope_type"], seq_len)
            got, factor = scaled_frequencies(head_dim, ours, base=base, seq_len=seq_len)
            assert got.dtype == torch.float64 and got.shape == (head_dim // 2,)
            rel = ((got - want.double()) / want.double()).abs().max().item()
            assert rel <= 1e-6, (ours, seq_len, rel)
            assert abs(factor - want_factor) <= 1e-9, (ours, seq_len)
            seen.add(ours["rope_type"])
    assert seen == set(ROPE_TYPES)


def test_the_rules_do_what_their_papers_say():
    d, s, base = 128, 4.0, 10000.0
    theta = rope_frequencies(d, base)
    # linear: every frequency divided by s
    lin, _ = scaled_frequencies(d, {"rope_type": "linear", "factor": s})
    torch.testing.assert_close(lin, theta / s, rtol=1e-15, atol=0)
    # dynamic at length n: the NTK base for α = s·n/L - (s - 1): θ_0 kept, the slowest θ divided by α; below L: nothing
    dyn = {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": L}
    for n in (L + 1, 2 * L, int(s * L)):
        alpha = s * n / L - (s - 1)
        got, _ = scaled_frequencies(d, dyn, seq_len=n)
        torch.testing.assert_close(got, rope_frequencies(d, base * alpha ** (d / (d - 2))), rtol=1e-14, atol=0)
        assert got[0] == 1.0 and math.isclose(got[-1].item(), theta[-1].item() / alpha, rel_tol=1e-12)
    assert torch.equal(scaled_frequencies(d, dyn, seq_len=L // 2)[0], theta)
    # yarn: fast pairs untouched, slow ones interpolated; temperature 0.1·ln s + 1
    yarn, att = scaled_frequencies(d, {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": L})
    assert yarn[0] == theta[0] and math.isclose(yarn[-1].item(), theta[-1].item() / s, rel_tol=1e-12)
    assert math.isclose(att, 0.1 * math.log(s) + 1)
    ratio = theta / yarn
    assert bool((ratio[1:] >= ratio[:-1] - 1e-12).all())  # the scale never decreases from fast to slow pairs
    # llama3 with its real numbers: wavelengths below 8192/4 = 2048 kept, above 8192 divided by 8
    l3 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    got, _ = scaled_frequencies(128, l3, base=500000.0)
    theta3 = rope_frequencies(128, 500000.0)
    wavelength = 2 * math.pi / theta3
    assert torch.equal(got[wavelength < 2048], theta3[wavelength < 2048])
    torch.testing.assert_close(got[wavelength > 8192], theta3[wavelength > 8192] / 8, rtol=1e-15, atol=0)


def test_bad_scaling_names_the_key():
    cases = [
        ({"factor": 2.0}, "rope_type"),
        ({"rope_type": "ntk"}, "rope_type"),
        ({"rope_type": "linear"}, "'factor'"),
        ({"rope_type": "linear", "factor": 0.5}, "'factor'"),
        ({"rope_type": "linear", "factor": float("nan")}, "'factor'"),
        ({"rope_type": "linear", "factor": 2.0, "beta_fast": 3.0}, "'beta_fast'"),
        ({"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}, "base="),
        ({"rope_type": "default", "partial_rotary_factor": 0.5}, "rotary_dim="),
        ({"rope_type": "dynamic", "factor": 2.0}, "'original_max_position_embeddings'"),
        (
            {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 0},
            "'original_max_position_embeddings'",
        ),
        (
            {
                "rope_type": "yarn",
                "factor": 2.0,
                "original_max_position_embeddings": 64,
                "beta_fast": 1,
                "beta_slow": 2,
            },
            "'beta_fast'",
        ),
        (
            {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "attention_factor": -1},
            "'attention_factor'",
        ),
        (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 4.0,
                "high_freq_factor": 1.0,
                "original_max_position_embeddings": 64,
            },
            "'high_freq_factor'",
        ),
        (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 64},
            "'high_freq_factor'",
        ),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [1.0] * 3,
                "original_max_position_embeddings": 64,
                "factor": 2.0,
            },
            "'long_factor'",
        ),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [1.0, 0.0, 1.0, 1.0],
                "original_max_position_embeddings": 64,
                "factor": 2.0,
            },
            "'long_factor'",
        ),
        (
            {
                "rope_type": "longrope",
                "short_factor": [1.0] * 4,
                "long_factor": [1.0] * 4,
                "original_max_position_embeddings": 64,
            },
            "'factor'",
        ),
    ]
    wrong_kinds = [  # a value of the wrong kind is a TypeError, still naming the key
        ({"rope_type": "linear", "factor": "2"}, "'factor'"),
        ({"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "truncate": 1}, "'truncate'"),
        ({"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64.0}, "'original_max"),
        ({"rope_type": 3}, "rope_type"),
    ]
    for error, scaling, match in [(ValueError, *case) for case in cases] + [(TypeError, *case) for case in wrong_kinds]:
        for call in (
            lambda s=scaling: scaled_frequencies(8, s),
            lambda s=scaling: apply_rope(torch.randn(3, 8), scaling=s),
        ):
            with pytest.raises(error, match=match):
                call()
    with pytest.raises(TypeError, match="scaling"):
        scaled_frequencies(8, [("rope_type", "linear")])
    with pytest.raises(ValueError, match="seq_len"):
        scaled_frequencies(8, None, seq_len=0)
    with pytest.raises(ValueError, match="head_dim >= 4"):
        scaled_frequencies(2, {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8})


# --------------------------------------------------------------------------- the whole rotation, against transformers


@pytest.mark.parametrize("index", range(len(rules(16))))
def test_apply_rope_with_scaling_matches_the_llama_rotary_path(index):
    head_dim, base = 16, 10000.0
    ours, theirs, max_positions = rules(head_dim)[index]
    gen = torch.Generator().manual_seed(index)
    batch, heads, seq = 2, 3, 12
    q = torch.randn(batch, heads, seq, head_dim, dtype=torch.float64, generator=gen)
    k = torch.randn(batch, heads, seq, head_dim, dtype=torch.float64, generator=gen)
    # per-row positions: a left-padded row and one far out (past L, so dynamic and longrope switch)
    position_ids = torch.stack((torch.arange(seq) + 5, torch.arange(seq) + 3 * L))
    top = int(position_ids.max())
    # 1. the HF rotation in float64, fed float64 cos/sin of our frequencies (checked against HF above to 1e-6)
    theta, factor = scaled_frequencies(head_dim, ours, base=base, seq_len=top + 1)
    angles = position_ids.double()[..., None] * theta
    emb = torch.cat((angles, angles), -1)
    want_q, want_k = apply_rotary_pos_emb(q, k, emb.cos() * factor, emb.sin() * factor)
    got_q = apply_rope(q, position_ids, layout="half", scaling=ours)
    got_k = RotaryEmbedding(head_dim, base, layout="half", scaling=ours)(k, position_ids)
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=1e-12)
    torch.testing.assert_close(rope_formula(q, position_ids, layout="half", scaling=ours), want_q, rtol=0, atol=1e-12)
    # 2. HF's own LlamaRotaryEmbedding (its dynamic/longrope update included); it forms angles in float32
    hf_rope = LlamaRotaryEmbedding(hf_config(head_dim, base, theirs, max_positions))
    cos, sin = hf_rope(q, position_ids)
    hf_q, _ = apply_rotary_pos_emb(q, k, cos, sin)
    tol = 4 * top * 2**-23 * q.abs().max().item() * factor  # float32 angles: error ~ position × float32 epsilon
    torch.testing.assert_close(got_q, hf_q, rtol=0, atol=tol)


@pytest.mark.parametrize("rotary_dim", [4, 8, 12])
def test_partial_rotary_matches_gpt_neox(rotary_dim):
    gen = torch.Generator().manual_seed(rotary_dim)
    q = torch.randn(2, 2, 9, 16, dtype=torch.float64, generator=gen)
    pos = torch.arange(100, 109)
    angles = pos.double()[:, None] * rope_frequencies(rotary_dim)
    emb = torch.cat((angles, angles), -1)
    want, _ = neox_apply(q, q, emb.cos()[None], emb.sin()[None])
    got = apply_rope(q, pos, layout="half", rotary_dim=rotary_dim)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert torch.equal(got[..., rotary_dim:], q[..., rotary_dim:])  # the rest passes through untouched
    module = RotaryEmbedding(16, layout="half", rotary_dim=rotary_dim)
    torch.testing.assert_close(module(q, pos), want, rtol=0, atol=1e-12)
    assert f"rotary_dim={rotary_dim}" in repr(module) or rotary_dim == 16


@pytest.mark.parametrize("layout", LAYOUTS)
def test_partial_rotary_is_full_rotary_of_the_first_features(layout):
    x = torch.randn(3, 7, 20, generator=torch.Generator().manual_seed(1))
    pos = torch.arange(7) * 11
    out = apply_rope(x, pos, layout=layout, rotary_dim=12)
    alone = apply_rope(x[..., :12].contiguous(), pos, layout=layout)
    torch.testing.assert_close(out[..., :12], alone, rtol=0, atol=1e-6)
    assert torch.equal(out[..., 12:], x[..., 12:])
    torch.testing.assert_close(out, rope_formula(x, pos, layout=layout, rotary_dim=12), rtol=0, atol=2e-6)
    # gradients flow through both parts
    xg = x.double().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: apply_rope(t, pos, layout=layout, rotary_dim=12), (xg[:1],))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_row_positions_equal_one_call_per_row(layout):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 2, 6, 8, generator=gen)
    pad = torch.tensor([0, 2, 5])  # left padding: row b starts at position -pad[b] (padded slots get negatives)
    pos = torch.arange(6)[None] - pad[:, None]
    out = apply_rope(x, pos, layout=layout)
    for b in range(3):
        torch.testing.assert_close(out[b], apply_rope(x[b], pos[b], layout=layout), rtol=0, atol=0)
    # [1, seq] is the same as [seq]; x without a heads dim works too
    torch.testing.assert_close(apply_rope(x, pos[:1], layout=layout), apply_rope(x, pos[0], layout=layout))
    torch.testing.assert_close(apply_rope(x[:, 0], pos, layout=layout), out[:, 0], rtol=0, atol=0)
    torch.testing.assert_close(RotaryEmbedding(8, layout=layout)(x, pos), out, rtol=0, atol=0)
    torch.testing.assert_close(out.double(), rope_formula(x.double(), pos, layout=layout), rtol=0, atol=1e-6)


def test_fractional_positions_are_position_interpolation():
    x = torch.randn(2, 10, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    pos = torch.arange(10)
    linear = apply_rope(x, pos, scaling={"rope_type": "linear", "factor": 4.0})
    for fractional in (pos / 4.0, (pos / 4.0).float(), [p / 4 for p in range(10)]):
        torch.testing.assert_close(apply_rope(x, fractional), linear, rtol=0, atol=1e-12)
    # integer positions given as floats land on the integer result
    torch.testing.assert_close(apply_rope(x, pos.double()), apply_rope(x, pos), rtol=0, atol=1e-13)
    # and RotaryEmbedding takes them too
    torch.testing.assert_close(RotaryEmbedding(16)(x, pos / 4.0), linear, rtol=0, atol=1e-12)


def test_dynamic_takes_its_length_from_the_positions():
    dyn = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 32}
    x = torch.randn(1, 8, 16, dtype=torch.float64)
    # within the trained length: no change at all
    assert torch.equal(apply_rope(x, torch.arange(8), scaling=dyn), apply_rope(x, torch.arange(8)))
    # past it: the base of length max(pos) + 1
    far = torch.arange(92, 100)
    theta, _ = scaled_frequencies(16, dyn, seq_len=100)
    angles = far.double()[:, None] * theta
    a, b = x[..., 0::2], x[..., 1::2]
    want = torch.stack((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), -1).flatten(-2)
    torch.testing.assert_close(apply_rope(x, far, scaling=dyn), want, rtol=0, atol=1e-12)
    module = RotaryEmbedding(16, scaling=dyn)
    torch.testing.assert_close(module(x, far), want, rtol=0, atol=1e-12)
    assert torch.equal(module(x), apply_rope(x))  # and back at short lengths
    assert "dynamic" in repr(module)


def test_attention_factor_scales_cos_and_sin():
    yarn = {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64}
    x = torch.randn(4, 5, 32, dtype=torch.float64)
    out = apply_rope(x, scaling=yarn)
    factor = 0.1 * math.log(16) + 1
    torch.testing.assert_close(out.norm(dim=-1), factor * x.norm(dim=-1), rtol=1e-12, atol=0)
    rope = RotaryEmbedding(32, scaling=yarn)
    torch.testing.assert_close(rope(x), out, rtol=0, atol=0)
    assert math.isclose(float(rope.cos[0, 0]), factor, rel_tol=1e-12)
