"""pe_lessons.learned: shapes, the table it adds, gradients, the clear error past max_len, bad input."""

import pytest
import torch

from pe_lessons.learned import LearnedPositionalEmbedding


def test_adds_the_first_seq_rows_and_keeps_shape_and_dtype():
    pe = LearnedPositionalEmbedding(10, 8, generator=torch.Generator().manual_seed(0))
    x = torch.randn(3, 7, 8)
    out = pe(x)
    assert out.shape == (3, 7, 8) and out.dtype == torch.float32
    torch.testing.assert_close(out, x + pe.weight[:7], rtol=0, atol=0)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        y = pe(x.to(dtype))
        assert y.dtype == dtype
        torch.testing.assert_close(y.float(), (x.to(dtype) + pe.weight[:7].to(dtype)).float())


def test_table_is_a_trainable_parameter_with_the_documented_init():
    pe = LearnedPositionalEmbedding(4096, 64, generator=torch.Generator().manual_seed(1))
    assert isinstance(pe.weight, torch.nn.Parameter) and pe.weight.requires_grad
    assert pe.weight.shape == (4096, 64)
    assert abs(pe.weight.mean().item()) < 1e-3 and abs(pe.weight.std().item() - 0.02) < 5e-4
    assert "weight" in pe.state_dict()
    # only the rows used get a gradient
    pe(torch.zeros(2, 5, 64)).sum().backward()
    grad = pe.weight.grad
    assert torch.equal(grad[:5], torch.full((5, 64), 2.0)) and not grad[5:].any()


def test_same_generator_seed_same_table():
    a = LearnedPositionalEmbedding(6, 4, generator=torch.Generator().manual_seed(3))
    b = LearnedPositionalEmbedding(6, 4, generator=torch.Generator().manual_seed(3))
    assert torch.equal(a.weight, b.weight)
    assert LearnedPositionalEmbedding(6, 4, init_std=0.5).weight.std() > 0.1


def test_full_length_works_one_more_raises_naming_both_numbers():
    pe = LearnedPositionalEmbedding(12, 8)
    assert pe(torch.zeros(1, 12, 8)).shape == (1, 12, 8)
    with pytest.raises(ValueError, match=r"sequence length 13 .* max_len 12") as info:
        pe(torch.zeros(1, 13, 8))
    assert "12…12" in str(info.value)  # the positions without a row
    with pytest.raises(ValueError, match="512.*511"):
        LearnedPositionalEmbedding(511, 8)(torch.zeros(1, 512, 8))


def test_extended_keeps_trained_rows_and_adds_fresh_ones():
    pe = LearnedPositionalEmbedding(4, 8, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        pe.weight.fill_(1.0)
    longer = pe.extended(10, generator=torch.Generator().manual_seed(0))
    assert longer.max_len == 10 and longer.weight.shape == (10, 8)
    assert torch.equal(longer.weight[:4], torch.ones(4, 8))
    assert longer.weight[4:].abs().max() < 0.2 and longer.weight[4:].std() > 0.005
    assert pe.max_len == 4  # the original is unchanged
    assert longer(torch.zeros(1, 10, 8)).shape == (1, 10, 8)
    with pytest.raises(ValueError, match="max_len"):
        pe.extended(3)


def test_repr():
    assert repr(LearnedPositionalEmbedding(5, 4)) == "LearnedPositionalEmbedding(max_len=5, d_model=4, init_std=0.02)"


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: LearnedPositionalEmbedding(0, 8), ValueError, "max_len"),
        (lambda: LearnedPositionalEmbedding(10**9, 512), ValueError, "max_len × d_model.*GiB"),
        (lambda: LearnedPositionalEmbedding(4, 8).extended(10**10), ValueError, "max_len.*extended table"),
        (lambda: LearnedPositionalEmbedding(2.0, 8), TypeError, "max_len"),
        (lambda: LearnedPositionalEmbedding(8, 7), ValueError, "d_model"),
        (lambda: LearnedPositionalEmbedding(8, 8, init_std=0.0), ValueError, "init_std"),
        (lambda: LearnedPositionalEmbedding(8, 8, init_std="0.02"), TypeError, "init_std"),
        (lambda: LearnedPositionalEmbedding(8, 8, generator=0), TypeError, "generator"),
        (lambda: LearnedPositionalEmbedding(8, 8)(torch.zeros(2, 3, 6)), ValueError, "d_model=8"),
        (lambda: LearnedPositionalEmbedding(8, 8)(torch.zeros(3, 8)), ValueError, "x must have shape"),
        (
            lambda: LearnedPositionalEmbedding(8, 8)(torch.zeros(1, 3, 8, dtype=torch.long)),
            TypeError,
            "x must hold floating",
        ),
        (lambda: LearnedPositionalEmbedding(8, 8)([[0.0] * 8]), TypeError, "x must be a torch.Tensor"),
    ],
)
def test_bad_input_raises_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()
