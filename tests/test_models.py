"""pe_lessons.models checked against transformers' own code (test-only), built offline from tiny configs.

Position ids, cos/sin (as angles), rotated q and k, DeepSeek-V3's attention output and pieces,
Llama 4's temperature tuning and NoPE layers, Gemma 3's and ModernBERT's per-type bases,
partial rotary (GPT-NeoX, Phi) and p-RoPE (transformers' "proportional"). float64 where the
reference computes in any dtype; float32 tolerances where it forces float32 (cos/sin tables).
"""

from __future__ import annotations

import functools
import math
import types

import pytest
import torch

from pe_lessons import models
from pe_lessons.rotary import apply_rope, rope_formula, to_half_layout

transformers = pytest.importorskip("transformers")

F64 = dict(rtol=0, atol=1e-10)
F32 = dict(rtol=1e-5, atol=2e-5)  # the references form angles in float32


def _cos_sin_from_angles(angles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's half-layout tables: cat(angles, angles)."""
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


# --------------------------------------------------------------------------- Qwen2-VL / Qwen2.5-VL


def _get_rope_index(model_cls, input_ids, token_types, image_grid_thw=None, video_grid_thw=None, merge=2, **kw):
    """Call transformers' get_rope_index on a stub holding only what it reads (no weights are involved)."""
    vision = types.SimpleNamespace(spatial_merge_size=merge, tokens_per_second=kw.pop("tokens_per_second", 2))
    stub = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=vision))
    stub.get_vision_position_ids = functools.partial(model_cls.get_vision_position_ids, stub)
    return model_cls.get_rope_index(
        stub, input_ids, token_types, image_grid_thw=image_grid_thw, video_grid_thw=video_grid_thw, **kw
    )


@pytest.mark.parametrize(
    "segments",
    [
        [3, (1, 4, 6), 2],  # text, one image (2×3 tokens after merging), text
        [1, (1, 8, 4), 4, (1, 2, 2), 1],  # two images of different shapes
        [(1, 6, 6), 5],  # the image first
    ],
)
def test_mrope_position_ids_match_get_rope_index(segments):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    types_, grids = [], []
    for s in segments:
        if isinstance(s, int):
            types_ += [0] * s
        else:
            grids.append(s)
            types_ += [1] * (s[0] * s[1] * s[2] // 4)
    token_types = torch.tensor([types_])
    ids, deltas = _get_rope_index(Qwen2VLModel, torch.zeros_like(token_types), token_types, torch.tensor(grids))
    mine = models.mrope_position_ids(segments, spatial_merge_size=2)
    assert torch.equal(mine, ids[:, 0])
    assert int(deltas[0, 0]) == int(mine.max()) + 1 - mine.shape[1]
    # for images the paper's rule (one past the largest id) gives the same ids
    assert torch.equal(models.mrope_position_ids(segments, spatial_merge_size=2, rule="paper"), mine)


def test_mrope_position_ids_after_a_video_paper_rule_and_transformers_5_24():
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    video = {"grid_thw": (4, 4, 4), "time_interval": 2}  # 4 temporal patches 2 apart, 2 × 2 tokens each
    lib = models.mrope_position_ids([2, video, 1], spatial_merge_size=2)
    paper = models.mrope_position_ids([2, video, 1], spatial_merge_size=2, rule="paper")
    assert torch.equal(lib[:, :-1], paper[:, :-1])  # the same up to the text after the video
    assert lib[:, -1].tolist() == [4, 4, 4]  # 2 + max(2, 2): inside the video's times 2, 4, 6, 8
    assert paper[:, -1].tolist() == [9, 9, 9]  # one past the video's largest id, 8
    # a real clip's shape: 32 temporal patches of 28 × 28 patches, τ = 2
    clip = {"grid_thw": (32, 28, 28), "time_interval": 2}
    assert models.mrope_position_ids([5, clip, 1], spatial_merge_size=2)[0, -1] == 5 + 14
    assert models.mrope_position_ids([5, clip, 1], spatial_merge_size=2, rule="paper")[0, -1] == 5 + 62 + 1
    # transformers 5.24's own decoding continues a prompt that ends with the video at the paper's id
    token_types = torch.tensor([[0] * 2 + [2] * 16])
    _, deltas = _get_rope_index(
        Qwen2_5_VLModel,
        torch.zeros_like(token_types),
        token_types,
        video_grid_thw=torch.tensor([video["grid_thw"]]),
        second_per_grid_ts=torch.tensor([1.0]),
        tokens_per_second=2,
    )
    assert token_types.shape[1] + int(deltas[0, 0]) == paper[0, -1] == 9


def test_mrope_position_ids_of_a_video_match_qwen2_5_vl():
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    grid, seconds, tps = (3, 4, 4), 0.5, 4  # 3 frames, 0.5 s apart, 4 tokens per second: τ = 2
    token_types = torch.tensor([[0] * 2 + [2] * 12 + [0] * 3])
    ids, _ = _get_rope_index(
        Qwen2_5_VLModel,
        torch.zeros_like(token_types),
        token_types,
        video_grid_thw=torch.tensor([grid]),
        second_per_grid_ts=torch.tensor([seconds]),
        tokens_per_second=tps,
    )
    mine = models.mrope_position_ids([2, {"grid_thw": grid, "time_interval": tps * seconds}, 3], spatial_merge_size=2)
    assert torch.equal(mine, ids[:, 0])
    assert mine[0, 2:14].unique().tolist() == [2, 4, 6]  # frames 2 positions apart


@pytest.mark.parametrize("section", [(16, 24, 24), (2, 3, 3)])
def test_mrope_angles_and_rotation_match_qwen2_vl(section):
    from transformers import Qwen2VLTextConfig
    from transformers.models.qwen2_vl import modeling_qwen2_vl as hf

    head_dim = 2 * sum(section)
    cfg = Qwen2VLTextConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_hidden_layers=1,
        intermediate_size=8,
        vocab_size=16,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": list(section)},
    )
    config = cfg.to_dict()
    ids = models.mrope_position_ids([3, (1, 4, 6), 2, (1, 2, 4), 1], spatial_merge_size=2)
    rope = hf.Qwen2VLRotaryEmbedding(cfg)
    x = torch.randn(1, ids.shape[1], head_dim)
    cos, sin = rope(x, ids[:, None])  # float32 tables, [batch, seq, head_dim]
    angles = models.mrope_angles(ids, config)
    my_cos, my_sin = _cos_sin_from_angles(angles)
    torch.testing.assert_close(cos[0].double(), my_cos, **F32)
    torch.testing.assert_close(sin[0].double(), my_sin, **F32)
    # float64: transformers' recomposition and rotation, fed float64 angles, against mrope_rotate
    freqs = ids[:, None, :, None].double() * models.rope_frequencies(head_dim, 10000.0)
    cos64, sin64 = rope.recomposition_frequencies(freqs.cos()), rope.recomposition_frequencies(freqs.sin())
    q, k = torch.randn(2, 1, 2, ids.shape[1], head_dim, dtype=torch.float64)
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos64, sin64)
    torch.testing.assert_close(models.mrope_rotate(q, ids, config), q_hf, **F64)
    torch.testing.assert_close(models.mrope_rotate(k, ids[:, None], config), k_hf, **F64)  # [3, batch, seq]
    torch.testing.assert_close(_cos_sin_from_angles(angles)[0], cos64[0], **F64)


def test_mrope_text_only_is_plain_rope():
    config = {"head_dim": 16, "rope_parameters": {"rope_theta": 10000.0, "mrope_section": [2, 3, 3]}}
    ids = models.mrope_position_ids([7])
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    torch.testing.assert_close(models.mrope_rotate(x, ids, config), apply_rope(x, layout="half"), **F64)


# --------------------------------------------------------------------------- Pixtral 2-D RoPE


def test_axial_matches_pixtral():
    from transformers import PixtralVisionConfig
    from transformers.models.pixtral import modeling_pixtral as hf

    cfg = PixtralVisionConfig(
        hidden_size=64, num_attention_heads=2, num_hidden_layers=1, intermediate_size=8, image_size=64, patch_size=8
    )
    config = cfg.to_dict()
    ids = models.axial_position_ids(3, 5)
    assert ids.tolist()[:6] == [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0]]
    rope = hf.PixtralVisionRotaryEmbedding(cfg)
    x = torch.randn(1, 15, 32)
    cos, sin = rope(x, ids)
    angles = models.axial_angles(ids, config)
    torch.testing.assert_close(cos.double(), _cos_sin_from_angles(angles)[0], **F32)
    torch.testing.assert_close(sin.double(), _cos_sin_from_angles(angles)[1], **F32)
    theta = models.rope_frequencies(32, cfg.rope_parameters["rope_theta"])
    freqs = ids[..., None].double() * torch.cat([theta[0::2], theta[1::2]])
    cos64, sin64 = rope.recomposition_frequencies(freqs.cos()), rope.recomposition_frequencies(freqs.sin())
    q, k = torch.randn(2, 1, 2, 15, 32, dtype=torch.float64)
    q_hf, k_hf = hf.apply_rotary_pos_emb(q, k, cos64, sin64, unsqueeze_dim=0)
    torch.testing.assert_close(models.axial_rotate(q, ids, config), q_hf, **F64)
    torch.testing.assert_close(models.axial_rotate(k, ids, config), k_hf, **F64)


def test_axial_relative_property():
    config = {"head_dim": 16, "rope_parameters": {"rope_type": "axial", "rope_theta": 100.0}}
    q, k = torch.randn(2, 1, 16, dtype=torch.float64)

    def score(a, b):
        qa = models.axial_rotate(q, torch.tensor([a]), config)
        kb = models.axial_rotate(k, torch.tensor([b]), config)
        return (qa * kb).sum().item()

    assert math.isclose(score((5, 2), (3, 7)), score((2, 0), (0, 5)), abs_tol=1e-12)
    assert not math.isclose(score((5, 2), (3, 7)), score((5, 7), (3, 2)), abs_tol=1e-3)


# --------------------------------------------------------------------------- DeepSeek-V3 MLA


def _deepseek_config(**kw):
    from transformers import DeepseekV3Config

    base = dict(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        q_lora_rank=12,
        kv_lora_rank=8,
        qk_nope_head_dim=6,
        qk_rope_head_dim=4,
        v_head_dim=5,
        num_hidden_layers=1,
        intermediate_size=16,
        moe_intermediate_size=8,
        n_routed_experts=2,
        num_experts_per_tok=1,
        n_group=1,
        topk_group=1,
        vocab_size=16,
        max_position_embeddings=64,
    )
    base.update(kw)
    return DeepseekV3Config(**base)


@pytest.mark.parametrize("interleave", [True, False])
@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "rope_theta": 10000.0},
        {
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    ],
)
def test_latent_attention_matches_deepseek_v3(interleave, rope):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf

    cfg = _deepseek_config(rope_interleave=interleave, rope_parameters=rope)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    ref = hf.DeepseekV3Attention(cfg, layer_idx=0).double().eval()
    for p in ref.parameters():
        torch.nn.init.normal_(p, std=0.3)
    mine = models.LatentAttention(cfg.to_dict()).double()
    mine.load_state_dict(ref.state_dict())
    assert mine.scaling == ref.scaling
    seq = 40  # past original_max_position_embeddings: the YaRN frequencies matter
    hidden = torch.randn(2, seq, 32, dtype=torch.float64)
    positions = torch.arange(seq)[None].expand(2, -1)
    cos, sin = hf.DeepseekV3RotaryEmbedding(cfg)(hidden, positions)
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    out, _ = ref(hidden, (cos.double(), sin.double()), mask)
    # DeepseekV3RMSNorm rounds to float32 inside, and the tables are float32: float32-level agreement
    torch.testing.assert_close(mine(hidden), out, rtol=1e-5, atol=1e-5)
    # the rotated pieces, float64: transformers' rotation fed float64 tables of our angles
    theta, attention = models.scaled_frequencies(
        4, None if rope["rope_type"] == "default" else models.rope_settings({**cfg.to_dict(), "head_dim": 4})["scaling"]
    )
    emb = torch.arange(seq, dtype=torch.float64)[:, None] * theta
    emb = torch.cat((emb, emb), dim=-1)
    cos64, sin64 = attention * emb.cos(), attention * emb.sin()
    q, k = torch.randn(2, 2, 4, seq, 4, dtype=torch.float64)
    apply = hf.apply_rotary_pos_emb_interleave if interleave else hf.apply_rotary_pos_emb
    q_hf, k_hf = apply(q, k, cos64[None], sin64[None])
    config = cfg.to_dict()
    torch.testing.assert_close(models.decoupled_rotate(q, None, config), q_hf, **F64)
    torch.testing.assert_close(models.decoupled_rotate(k, None, config), k_hf, **F64)
    if interleave:  # DeepSeek's convention: interleaved pairs in, half layout out
        torch.testing.assert_close(
            q_hf,
            to_half_layout(
                rope_formula(
                    q,
                    layout="interleaved",
                    scaling=None
                    if rope["rope_type"] == "default"
                    else models.rope_settings({**config, "head_dim": 4})["scaling"],
                )
            ),
            **F64,
        )


def test_latent_attention_absorbed_scores_equal_explicit_ones():
    cfg = _deepseek_config(q_lora_rank=None).to_dict()
    torch.manual_seed(1)
    mla = models.LatentAttention(cfg).double()
    hidden = torch.randn(1, 9, 32, dtype=torch.float64)
    torch.testing.assert_close(mla.scores(hidden, absorbed=True), mla.scores(hidden), **F64)
    pieces = mla.pieces(hidden)
    assert pieces["k_rope"].shape == (1, 1, 9, 4)  # one rotated key part, shared by the 4 heads
    assert pieces["latent"].shape == (1, 9, 8)


def test_deepseek_v2_rotates_in_place():
    from transformers.models.deepseek_v2 import modeling_deepseek_v2 as hf

    config = {"model_type": "deepseek_v2", **_deepseek_config().to_dict()}
    config["model_type"] = "deepseek_v2"
    x = torch.randn(1, 3, 10, 4)
    freqs = torch.arange(10)[None, :, None].float() * models.rope_frequencies(4, 10000.0).float()
    q_hf, _ = hf.apply_rotary_emb(x, x, torch.polar(torch.ones_like(freqs), freqs))
    torch.testing.assert_close(models.decoupled_rotate(x, None, config), q_hf, **F32)


# --------------------------------------------------------------------------- Llama 4 and SmolLM3: NoPE layers


def _llama4_config(**kw):
    from transformers import Llama4TextConfig

    base = dict(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        num_hidden_layers=8,
        intermediate_size=16,
        intermediate_size_mlp=16,
        vocab_size=16,
        floor_scale=4,
        attn_scale=0.5,
        use_qk_norm=False,
    )
    base.update(kw)
    return Llama4TextConfig(**base)


def test_nope_layers_match_llama4_and_smollm3():
    from transformers import SmolLM3Config

    for n, every in ((8, 4), (10, 3), (5, 1)):
        llama = _llama4_config(num_hidden_layers=n, no_rope_layer_interval=every).to_dict()
        smol = SmolLM3Config(num_hidden_layers=n, no_rope_layer_interval=every).to_dict()
        want = [not bool(f) for f in llama["no_rope_layers"]]
        assert models.nope_layers(llama) == want == models.nope_layers(smol)
        bare = {"num_hidden_layers": n, "no_rope_layer_interval": every}  # the rule, without the list
        assert models.nope_layers(bare) == want
    assert models.nope_layers(_llama4_config().to_dict()) == [False, False, False, True] * 2


def test_llama4_temperature_tuning_matches_the_attention_module():
    from transformers.models.llama4 import modeling_llama4 as hf

    cfg = _llama4_config()
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    layer = 3
    assert models.layer_rope(cfg.to_dict(), layer).nope
    ref = hf.Llama4TextAttention(cfg, layer).double().eval()
    seq = 20
    hidden = torch.randn(1, seq, 32, dtype=torch.float64)
    mask = torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    out, _ = ref(hidden, torch.zeros(1, seq, 4, dtype=torch.complex128), mask)
    scale = models.attention_temperature(torch.arange(seq), cfg.to_dict()).double()
    assert scale[:3].tolist() == [1.0, 1.0, 1.0] and math.isclose(scale[3].item(), 1 + 0.5 * math.log(2))
    q = ref.q_proj(hidden).view(1, seq, 4, 8).transpose(1, 2) * scale[:, None]
    k = ref.k_proj(hidden).view(1, seq, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = ref.v_proj(hidden).view(1, seq, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8) + mask, dim=-1)
    mine = ref.o_proj((w @ v).transpose(1, 2).reshape(1, seq, 32))
    torch.testing.assert_close(mine, out, **F64)
    off = models.attention_temperature(torch.arange(seq), {**cfg.to_dict(), "attn_temperature_tuning": False})
    assert torch.equal(off, torch.ones(seq))


def test_llama4_rope_layers_rotate_interleaved_pairs():
    from transformers.models.llama4 import modeling_llama4 as hf

    cfg = _llama4_config()
    spec = models.layer_rope(cfg.to_dict(), 0)
    assert spec.layout == "interleaved" and spec.base == cfg.rope_parameters["rope_theta"]
    x = torch.randn(1, 12, 4, 8)  # transformers' [batch, seq, heads, head_dim]
    freqs = hf.Llama4TextRotaryEmbedding(cfg)(x, torch.arange(12)[None])
    q_hf, _ = hf.apply_rotary_emb(x, x, freqs)
    torch.testing.assert_close(spec.rotate(x.transpose(1, 2)).transpose(1, 2), q_hf, **F32)


# --------------------------------------------------------------------------- Gemma 3, ModernBERT: a base per layer type


def test_gemma3_layer_types_and_bases():
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3 import modeling_gemma3 as hf

    cfg = Gemma3TextConfig(
        hidden_size=32,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        num_hidden_layers=12,
        intermediate_size=8,
        vocab_size=16,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
        },
    )
    config = cfg.to_dict()
    bare = {
        "model_type": "gemma3_text",
        "num_hidden_layers": 12,
        "head_dim": 16,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    }
    assert models.layer_types(config) == cfg.layer_types == models.layer_types(bare)
    assert [i for i, t in enumerate(cfg.layer_types) if t == "full_attention"] == [5, 11]
    rope = hf.Gemma3RotaryEmbedding(cfg)
    x = torch.randn(1, 30, 16)
    positions = torch.arange(30)[None] * 37
    for layer, kind in enumerate(cfg.layer_types):
        for source in (config, bare):
            spec = models.layer_rope(source, layer)
            cos, sin = rope(x, positions, kind)
            angles = positions[0, :, None].double() * spec.frequencies()
            torch.testing.assert_close(cos[0].double(), torch.cat((angles, angles), -1).cos(), **F32)
            torch.testing.assert_close(sin[0].double(), torch.cat((angles, angles), -1).sin(), **F32)
    assert models.layer_rope(config, 5).scaling == {"rope_type": "linear", "factor": 8.0}
    assert models.layer_rope(config, 0).base == 10_000.0 and models.layer_rope(config, 0).scaling is None
    q = torch.randn(2, 30, 16, dtype=torch.float64)
    spec = models.layer_rope(config, 5)
    cos, sin = _cos_sin_from_angles(positions[0, :, None].double() * spec.frequencies())
    q_hf, _ = hf.apply_rotary_pos_emb(q, q, cos, sin, unsqueeze_dim=0)
    torch.testing.assert_close(spec.rotate(q, positions[0]), q_hf, **F64)


def test_modernbert_layer_types_and_bases():
    from transformers import ModernBertConfig
    from transformers.models.modernbert import modeling_modernbert as hf

    cfg = ModernBertConfig(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=7, intermediate_size=8, vocab_size=16
    )
    config = cfg.to_dict()
    bare = {
        "model_type": "modernbert",
        "num_hidden_layers": 7,
        "hidden_size": 32,
        "num_attention_heads": 2,
        "global_attn_every_n_layers": 3,
        "global_rope_theta": 160_000.0,
        "local_rope_theta": 10_000.0,
    }
    assert models.layer_types(config) == cfg.layer_types == models.layer_types(bare)
    rope = hf.ModernBertRotaryEmbedding(cfg)
    x = torch.randn(1, 10, 16)
    positions = torch.arange(10)[None]
    for layer, kind in enumerate(cfg.layer_types):
        spec = models.layer_rope(config, layer)
        assert spec.base == models.layer_rope(bare, layer).base == (160_000.0 if kind == "full_attention" else 1e4)
        cos, _ = rope(x, positions, kind)
        angles = positions[0, :, None].double() * spec.frequencies()
        torch.testing.assert_close(cos[0].double(), torch.cat((angles, angles), -1).cos(), **F32)


# --------------------------------------------------------------------------- partial rotary and p-RoPE


@pytest.mark.parametrize("name", ["gpt_neox", "phi"])
def test_partial_rotary_matches_neox_and_phi(name):
    from transformers import GPTNeoXConfig, PhiConfig
    from transformers.models.gpt_neox import modeling_gpt_neox as neox
    from transformers.models.phi import modeling_phi as phi

    cls, mod, rope_cls = {
        "gpt_neox": (GPTNeoXConfig, neox, neox.GPTNeoXRotaryEmbedding),
        "phi": (PhiConfig, phi, phi.PhiRotaryEmbedding),
    }[name]
    cfg = cls(hidden_size=64, num_attention_heads=2, num_hidden_layers=1, intermediate_size=8, vocab_size=16)
    config = cfg.to_dict()
    spec = models.layer_rope(config, 0)
    factor = cfg.rope_parameters["partial_rotary_factor"]
    assert spec.rotary_dim == int(32 * factor) and spec.layout == "half"
    x = torch.randn(1, 2, 25, 32, dtype=torch.float64)
    cos, sin = rope_cls(cfg)(x, torch.arange(25)[None])
    angles = torch.arange(25, dtype=torch.float64)[:, None] * spec.frequencies()[: spec.rotary_dim // 2]
    torch.testing.assert_close(cos[0].double(), torch.cat((angles, angles), -1).cos(), **F32)
    c64, s64 = _cos_sin_from_angles(angles)
    r = spec.rotary_dim
    q_rot, _ = mod.apply_rotary_pos_emb(x[..., :r], x[..., :r], c64[None], s64[None])
    torch.testing.assert_close(spec.rotate(x), torch.cat((q_rot, x[..., r:]), -1), **F64)


def test_proportional_rope_matches_transformers():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama import modeling_llama as hf

    for p in (0.25, 0.5, 1.0):
        params = {"rope_type": "proportional", "partial_rotary_factor": p, "rope_theta": 1_000_000.0}
        cfg = LlamaConfig(
            hidden_size=64,
            num_attention_heads=2,
            num_hidden_layers=1,
            intermediate_size=8,
            vocab_size=16,
            rope_parameters=dict(params),
        )
        inv_freq, attention = ROPE_INIT_FUNCTIONS["proportional"](cfg)
        spec = models.layer_rope({"num_hidden_layers": 1, "head_dim": 32, "rope_parameters": params}, 0)
        torch.testing.assert_close(spec.frequencies(), inv_freq.double(), rtol=1e-6, atol=0)
        assert attention == 1.0 and int((spec.frequencies() == 0).sum()) == 16 - int(p * 32 // 2)
        x = torch.randn(3, 20, 32, dtype=torch.float64)
        positions = torch.arange(20) * 11
        cos, sin = _cos_sin_from_angles(positions[:, None].double() * spec.frequencies())
        q_hf, _ = hf.apply_rotary_pos_emb(x, x, cos, sin, unsqueeze_dim=0)
        torch.testing.assert_close(spec.rotate(x, positions), q_hf, **F64)


def test_gemma4_defaults_to_proportional_global_layers():
    gemma4 = pytest.importorskip("transformers.models.gemma4.configuration_gemma4")
    cfg = gemma4.Gemma4TextConfig()
    full = cfg.rope_parameters["full_attention"]
    assert full["rope_type"] == "proportional" and full["partial_rotary_factor"] == 0.25


# --------------------------------------------------------------------------- clear errors


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: models.layer_rope([1], 0), "dict of a model's configuration"),
        (lambda: models.layer_rope({"num_hidden_layers": 2, "head_dim": 8}, 0), "rope_theta"),
        (lambda: models.layer_rope({"num_hidden_layers": 2, "head_dim": 8, "rope_theta": 1e4}, 2), "below"),
        (lambda: models.layer_rope({"num_hidden_layers": 2, "rope_theta": 1e4}, 0), "hidden_size"),
        (lambda: models.nope_layers({"num_hidden_layers": 2, "no_rope_layers": [1]}), "one 0/1 per layer"),
        (lambda: models.nope_layers({"num_hidden_layers": 2, "no_rope_layers": [1, 2]}), "0 .no RoPE."),
        (lambda: models.mrope_position_ids([3, (1, 3, 4)], spatial_merge_size=2), "multiples of spatial_merge_size"),
        (lambda: models.mrope_position_ids([]), "non-empty"),
        (lambda: models.mrope_position_ids([2], rule="qwen"), "rule must be"),
        (lambda: models.mrope_position_ids([True]), "must be an int"),
        (lambda: models.mrope_position_ids([(1, 2)]), r"\(t, h, w\)"),
        (
            lambda: models.mrope_rotate(
                torch.randn(4, 16),
                torch.zeros(3, 4, dtype=torch.long),
                {"head_dim": 16, "rope_theta": 1e4, "rope_scaling": {"type": "mrope", "mrope_section": [2, 2, 2]}},
            ),
            "add up to head_dim/2",
        ),
        (
            lambda: models.mrope_rotate(
                torch.randn(4, 16),
                torch.zeros(2, 4, dtype=torch.long),
                {"head_dim": 16, "rope_parameters": {"rope_theta": 1e4, "mrope_section": [2, 3, 3]}},
            ),
            r"\[3, seq\]",
        ),
        (
            lambda: models.axial_rotate(
                torch.randn(4, 10), torch.zeros(4, 2, dtype=torch.long), {"head_dim": 10, "rope_theta": 1e4}
            ),
            "multiple of 4",
        ),
        (
            lambda: models.axial_rotate(torch.randn(4, 16), torch.zeros(4, 2), {"head_dim": 16, "rope_theta": 1e4}),
            "integers",
        ),
        (lambda: models.LatentAttention({"hidden_size": 8}), "num_attention_heads"),
        (lambda: models.attention_temperature([-1], {"attn_temperature_tuning": True}), ">= 0"),
        (
            lambda: models.layer_rope(
                {
                    "num_hidden_layers": 1,
                    "head_dim": 8,
                    "rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 1.5},
                },
                0,
            ),
            "fraction",
        ),
        (
            lambda: models.layer_rope(
                {"num_hidden_layers": 1, "head_dim": 8, "rope_parameters": {"rope_theta": 1e4, "rope_type": "yarn"}},
                0,
            ),
            "factor",
        ),
        (
            lambda: models.rope_settings({"head_dim": 8, "rope_parameters": {"full_attention": {"rope_theta": 1e4}}}),
            "one entry per layer type",
        ),
        (lambda: models.proportional_frequencies(8, 1e4, 0.0), "fraction"),
        (lambda: models.mrope_position_ids([(1, 10**6, 10**6)]), "limit"),
        (lambda: models.mrope_position_ids([10**12]), "limit"),
        (lambda: models.axial_position_ids(10**6, 10**6), "limit"),
    ],
)
def test_bad_configs_get_clear_errors(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2), (torch.float16, 2e-3)])
def test_every_rotation_keeps_the_dtype_and_rounds_once(dtype, tol):
    """Low-precision inputs: same dtype out, within a few units in the last place of the float64 result."""
    qwen = {"head_dim": 16, "rope_parameters": {"rope_theta": 1e4, "mrope_section": [2, 3, 3]}}
    pix = {"head_dim": 16, "rope_parameters": {"rope_type": "axial", "rope_theta": 1e4}}
    prope = {"num_hidden_layers": 1, "head_dim": 16,
             "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e4, "partial_rotary_factor": 0.5}}  # fmt: skip
    ids = models.mrope_position_ids([3, (1, 4, 4), 2], spatial_merge_size=2)
    grid = models.axial_position_ids(3, 3)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    cases = [
        (lambda t: models.mrope_rotate(t, ids, qwen)),
        (lambda t: models.axial_rotate(t, grid, pix)),
        (lambda t: models.layer_rope(prope, 0).rotate(t, torch.arange(9) * 300)),
    ]
    for rotate in cases:
        exact = rotate(x)
        low = rotate(x.to(dtype))
        assert low.dtype == dtype
        torch.testing.assert_close(low.double(), exact, rtol=tol, atol=tol)
