"""pe_lessons.baselines: the naive and library versions agree with the exact table and the float64 rotation."""

import pytest
import torch

from pe_lessons import baselines
from pe_lessons.baselines import (
    float64_angles_table,
    hf_cos_sin,
    hf_rope,
    loop_table,
    rope_complex_reference,
    rope_reference,
    rotate_half,
    textbook_table,
)
from pe_lessons.sinusoidal import sinusoidal_table


def test_reference_implementations_agree_with_the_exact_table():
    exact = sinusoidal_table(50, 8, dtype=torch.float64)
    for table in (loop_table(50, 8), textbook_table(50, 8), float64_angles_table(50, 8)):
        assert table.dtype == torch.float32 and table.shape == (50, 8)
        assert (table.double() - exact).abs().max() < 1e-5


def test_hf_formula_matches_the_float64_rotation_in_half_layout():
    x = torch.randn(2, 3, 17, 8, generator=torch.Generator().manual_seed(1))
    cos, sin = hf_cos_sin(17, 8)
    assert cos.shape == sin.shape == (17, 8)
    torch.testing.assert_close(hf_rope(x, cos, sin).double(), rope_reference(x, "half"), rtol=0, atol=1e-5)
    assert torch.equal(rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_interleaved_and_half_reference_are_a_permutation_of_each_other():
    x = torch.randn(5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    perm = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])
    torch.testing.assert_close(rope_reference(x[..., perm], "half"), rope_reference(x, "interleaved")[..., perm])


def test_the_complex_formulation_is_the_interleaved_reference():
    x = torch.randn(2, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    positions = [3, 1, 4, 1, 5, 9, 2]
    torch.testing.assert_close(rope_complex_reference(x, positions), rope_reference(x, positions=positions))


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: rope_reference(torch.ones(2, 4), "rotated"), ValueError),
        (lambda: rope_reference(torch.ones(2, 4, dtype=torch.int64)), TypeError),
        (lambda: rope_reference(torch.ones(2, 4), 1), TypeError),
    ],
)
def test_bad_arguments_are_named(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no GPU is present")
def test_cuda_without_a_gpu_is_a_clear_error():
    for call in (
        lambda: textbook_table(4, 8, device="cuda"),
        lambda: float64_angles_table(4, 8, device="cuda"),
        lambda: hf_cos_sin(4, 8, device="cuda"),
    ):
        with pytest.raises(ValueError, match="device='cuda' asks for a GPU"):
            call()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: loop_table(10**9, 64), "max_len × d_model.*Python lists"),
        (lambda: textbook_table(10**9, 512), "max_len × d_model"),
        (lambda: float64_angles_table(10**9, 512), "max_len × d_model"),
        (lambda: hf_cos_sin(10**9, 512), "seq_len × head_dim"),
    ],
)
def test_oversized_requests_are_refused_before_allocating(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_hf_step_is_transformers_llama_rotary_path():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=4096)
    rotary = modeling_llama.LlamaRotaryEmbedding(config)
    x = torch.randn(2, 4, 3, 16, generator=torch.Generator().manual_seed(3))
    position_ids = torch.tensor([[5, 6, 7], [1000, 1001, 1002]])
    for dtype in (torch.float32, torch.bfloat16):
        xd = x.to(dtype)
        cos, sin = rotary(xd, position_ids)
        expected, _ = modeling_llama.apply_rotary_pos_emb(xd, xd, cos, sin)
        got = baselines.hf_rope_step(xd, position_ids, baselines.hf_inv_freq(16, config.rope_parameters["rope_theta"]))
        assert torch.equal(got, expected)
