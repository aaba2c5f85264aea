"""pe_lessons.toy: attention, the model's shapes and schemes, permutation equivariance, tasks, training, determinism."""

import io
import pickle

import pytest
import torch

from pe_lessons import set_memory_limit
from pe_lessons.learned import LearnedPositionalEmbedding
from pe_lessons.relative import ALiBiBias, RelativePositionBias, alibi_bias
from pe_lessons.toy import (
    LagTask,
    OrderTask,
    PreviousTokenTask,
    ToyTransformer,
    attention,
    available_schemes,
    evaluate,
    make_model,
    make_task,
    train,
)


def test_attention_matches_torch_and_calls_the_rotate_hook():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(attention(q, k, v), ref)
    seen = {}

    def rotate(q_, k_, positions):
        seen["positions"] = positions
        return 2 * q_, k_  # doubling q doubles every score

    torch.testing.assert_close(
        attention(q, k, v, rotate=rotate), torch.nn.functional.scaled_dot_product_attention(2 * q, k, v)
    )
    assert torch.equal(seen["positions"], torch.arange(5))
    attention(q, k, v, rotate=rotate, positions=torch.arange(7, 12))
    assert torch.equal(seen["positions"], torch.arange(7, 12))


def test_schemes_list():
    assert available_schemes() == ("none", "sinusoidal", "learned", "rotary", "alibi", "t5")


def test_unknown_scheme_is_refused_with_the_list_of_schemes():
    with pytest.raises(ValueError, match="'none', 'sinusoidal', 'learned', 'rotary', 'alibi', 't5'; got 'xpos'"):
        ToyTransformer(10, 2, scheme="xpos")


@pytest.mark.parametrize("scheme", available_schemes())
@pytest.mark.parametrize("pooled", [False, True])
def test_shapes(scheme, pooled):
    model = ToyTransformer(10, 3, scheme=scheme, pooled=pooled, max_len=8)
    tokens = torch.randint(0, 10, (4, 6))
    out = model(tokens)
    assert out.shape == ((4, 3) if pooled else (4, 6, 3))
    assert model(tokens.int()).shape == out.shape


def test_position_parameters_per_scheme():
    def position_params(scheme):
        model = ToyTransformer(10, 2, scheme=scheme, max_len=12, d_model=32)
        return sum(p.numel() for name, p in model.named_parameters() if name.startswith("position"))

    assert position_params("none") == 0 and position_params("sinusoidal") == 0
    assert position_params("learned") == 12 * 32


def test_position_free_model_is_permutation_equivariant_and_positions_break_it():
    torch.manual_seed(0)
    tokens = torch.randint(0, 10, (3, 9))
    perm = torch.randperm(9)
    none = ToyTransformer(10, 4, scheme="none").double()
    out = none(tokens)
    assert (none(tokens[:, perm]) - out[:, perm]).abs().max() < 1e-12
    pooled = ToyTransformer(10, 4, scheme="none", pooled=True).double()
    assert (pooled(tokens[:, perm]) - pooled(tokens)).abs().max() < 1e-12
    for scheme in ("sinusoidal", "learned"):
        model = ToyTransformer(10, 4, scheme=scheme).double()
        assert (model(tokens[:, perm]) - model(tokens)[:, perm]).abs().max() > 1e-3


def test_order_task_batches():
    task = OrderTask(n_symbols=5)
    tokens, labels = task.sample(8, 6, torch.Generator().manual_seed(0))
    assert tokens.shape == (8, 6) and labels.shape == (8,) and tokens.dtype == torch.int64
    a, b = 5, 6
    assert ((tokens == a).sum(1) == 1).all() and ((tokens == b).sum(1) == 1).all()
    first_b = ((tokens == b).float().argmax(1) < (tokens == a).float().argmax(1)).long()
    assert torch.equal(labels, first_b)
    # the second half are the twins: A and B swapped, label flipped
    twins = tokens[:4].clone()
    twins[tokens[:4] == a], twins[tokens[:4] == b] = b, a
    assert torch.equal(tokens[4:], twins) and torch.equal(labels[4:], 1 - labels[:4])
    assert labels.sum() == 4


def test_previous_token_task_batches():
    task = make_task("previous", n_symbols=6)
    tokens, labels = task.sample(5, 7, torch.Generator().manual_seed(0))
    assert (labels[:, 0] == -100).all() and torch.equal(labels[:, 1:], tokens[:, :-1])
    assert isinstance(task, PreviousTokenTask) and task.vocab_size == task.n_classes == 6


def test_position_free_model_scores_exactly_half_on_the_order_task():
    task = make_task("order")
    model = make_model(task, "none", seed=0)
    assert evaluate(model, task, seq_len=10, n=256)["accuracy"] == 0.5


def test_training_lowers_the_loss_quickly():
    task = make_task("order")
    model = make_model(task, "sinusoidal", max_len=8, seed=0)
    before = evaluate(model, task, seq_len=8, n=256)["loss"]
    history = train(model, task, seq_len=8, steps=60, batch_size=32, lr=5e-3, seed=0)
    assert list(history.columns) == ["step", "seq_len", "loss", "accuracy"] and len(history) == 60
    after = evaluate(model, task, seq_len=8, n=256)
    assert after["loss"] < 0.5 * before and after["accuracy"] > 0.75
    assert model.training  # train() leaves the model in the mode it came in with (a new model: train mode)
    model.eval()
    train(model, task, seq_len=8, steps=2, seed=0)
    assert not model.training


def test_same_seed_same_run_bit_for_bit_whatever_the_thread_count():
    task = make_task("order")
    runs = []
    threads = torch.get_num_threads()
    for n_threads in (1, 2):
        torch.set_num_threads(n_threads)
        model = make_model(task, "learned", max_len=8, seed=3)
        history = train(model, task, seq_len=(4, 8), steps=15, batch_size=16, seed=5)
        runs.append((history, evaluate(model, task, seq_len=8, n=64)))
    torch.set_num_threads(threads)
    assert runs[0][0].equals(runs[1][0]) and runs[0][1] == runs[1][1]
    assert set(runs[0][0]["seq_len"]) <= set(range(4, 9))
    # a list pair is the same range as a tuple
    model = make_model(task, "learned", max_len=8, seed=3)
    assert train(model, task, seq_len=[4, 8], steps=15, batch_size=16, seed=5).equals(runs[0][0])


def test_make_model_seeds_init_and_leaves_the_global_rng_alone():
    task = make_task("order")
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a, b = make_model(task, "learned", seed=1), make_model(task, "learned", seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(make_model(task, "learned", seed=2).embed.weight, a.embed.weight)


def test_learned_model_beyond_its_table_error_or_untrained_rows():
    task = make_task("order")
    model = make_model(task, "learned", max_len=8)
    with pytest.raises(ValueError, match="sequence length 12 .* max_len 8"):
        evaluate(model, task, seq_len=12)
    result = evaluate(model, task, seq_len=12, extend_learned=True)
    assert 0.0 <= result["accuracy"] <= 1.0
    # the extra rows come from evaluate's seed, not the global RNG: the same call gives the same result,
    # and the model itself keeps its 8 rows
    torch.manual_seed(99)
    assert evaluate(model, task, seq_len=12, extend_learned=True) == result and model.position.max_len == 8
    longer = model.with_longer_table(12, seed=0)
    assert isinstance(longer.position, LearnedPositionalEmbedding) and longer.position.max_len == 12
    assert torch.equal(longer.position.weight[:8], model.position.weight) and model.position.max_len == 8
    # sinusoidal positions exist at every length
    sin = make_model(task, "sinusoidal", max_len=8)
    assert 0.0 <= evaluate(sin, task, seq_len=40)["accuracy"] <= 1.0


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: ToyTransformer(10, 2, scheme="Alibi"), ValueError, "scheme must be one of 'none', 'sinusoidal'"),
        (lambda: ToyTransformer(10, 2, causal=1), TypeError, "causal must be True or False"),
        (lambda: ToyTransformer(10, 2, scheme="t5", num_buckets=1), ValueError, "num_buckets"),
        (lambda: ToyTransformer(10, 2, scheme="t5", max_len=2), ValueError, "max_distance"),
        (lambda: attention(*(torch.zeros(1, 2, 3, 4),) * 3, bias=torch.zeros(3, 3, 3)), ValueError, "broadcast"),
        (lambda: attention(*(torch.zeros(1, 2, 3, 4),) * 3, causal="yes"), TypeError, "causal"),
        (lambda: LagTask(lag=0), ValueError, "lag"),
        (lambda: LagTask(lag=3).sample(4, 3, torch.Generator()), ValueError, "seq_len"),
        (lambda: ToyTransformer(10, 2, d_model=31), ValueError, "d_model"),
        (lambda: ToyTransformer(10, 2, d_model=32, n_heads=3), ValueError, "n_heads"),
        (lambda: ToyTransformer(10, 1), ValueError, "n_classes"),
        (lambda: ToyTransformer(10, 2, pooled=1), TypeError, "pooled"),
        (lambda: ToyTransformer(10, 2)(torch.zeros(2, 3)), TypeError, "tokens must hold integer"),
        (
            lambda: ToyTransformer(10, 2)(torch.zeros(3, dtype=torch.long)),
            ValueError,
            r"tokens must have shape \[batch, seq\]",
        ),
        (lambda: ToyTransformer(10, 2)(torch.full((1, 3), 10)), ValueError, "0 … 9"),
        (lambda: ToyTransformer(10, 2)(torch.full((1, 3), -1)), ValueError, "vocab_size=10"),
        (lambda: make_task("copy"), ValueError, "task must be one of 'order', 'previous'"),
        (lambda: OrderTask().sample(5, 6, torch.Generator()), ValueError, "batch_size must be even"),
        (lambda: OrderTask().sample(4, 1, torch.Generator()), ValueError, "seq_len"),
        (lambda: make_model("order", "none"), TypeError, "task must be"),
        (lambda: train(make_model(OrderTask(), "none"), PreviousTokenTask(), seq_len=4), ValueError, "does not fit"),
        (lambda: train(make_model(OrderTask(), "none"), OrderTask(), seq_len=(8, 4)), ValueError, r"seq_len\[1\]"),
        (lambda: train(make_model(OrderTask(), "none"), OrderTask(), seq_len=4, lr=2.0), ValueError, "lr"),
        (
            lambda: train(make_model(OrderTask(), "none"), OrderTask(), seq_len=4, lr="3e-3"),
            TypeError,
            "lr must be a real number",
        ),
        (
            lambda: train(make_model(OrderTask(), "none"), OrderTask(), seq_len=(4, 5, 6)),
            ValueError,
            r"\(lo, hi\) pair",
        ),
        (lambda: evaluate(make_model(OrderTask(), "none"), OrderTask(), seq_len=4, n=5), ValueError, "n must be even"),
        (
            lambda: evaluate(make_model(OrderTask(), "none"), OrderTask(), seq_len=4, extend_learned=1),
            TypeError,
            "extend_learned",
        ),
        (lambda: make_model(OrderTask(), "none").with_longer_table(20), ValueError, "scheme='learned'"),
        (
            lambda: attention(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4), torch.zeros(2, 3, 4)),
            ValueError,
            "q must have shape",
        ),
        (
            lambda: attention(torch.zeros(1, 2, 3, 4), torch.zeros(1, 2, 5, 4), torch.zeros(1, 2, 5, 4)),
            ValueError,
            "do not fit",
        ),
    ],
)
def test_bad_input_raises_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


# --------------------------------------------------------------------------- relative biases, causal mask, lag task


def test_attention_bias_hook_and_causal_mask_match_torch():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 4, generator=g, dtype=torch.float64) for _ in range(3))
    bias = torch.randn(3, 6, 6, generator=g, dtype=torch.float64)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.testing.assert_close(attention(q, k, v, bias=bias), sdpa(q, k, v, attn_mask=bias))
    torch.testing.assert_close(attention(q, k, v, causal=True), sdpa(q, k, v, is_causal=True))
    future = torch.ones(6, 6, dtype=torch.bool).triu(1)
    torch.testing.assert_close(
        attention(q, k, v, bias=bias, causal=True), sdpa(q, k, v, attn_mask=bias.masked_fill(future, float("-inf")))
    )
    # the first query sees only the first key
    assert torch.equal(attention(q, k, v, causal=True)[:, :, 0], v[:, :, 0])


@pytest.mark.parametrize("scheme", available_schemes())
@pytest.mark.parametrize("causal", [False, True])
def test_every_scheme_runs_causal_or_not(scheme, causal):
    model = ToyTransformer(8, 8, scheme=scheme, causal=causal, max_len=16, n_heads=4)
    tokens = torch.randint(0, 8, (3, 12))
    assert model(tokens).shape == (3, 12, 8)
    assert model.causal is causal and f"causal={causal}" in repr(model)
    if causal:  # a token's output never depends on later tokens
        changed = tokens.clone()
        changed[:, 7:] = (changed[:, 7:] + 1) % 8
        with torch.no_grad():
            assert torch.allclose(model(tokens)[:, :7], model(changed)[:, :7], atol=1e-6)


def test_relative_schemes_hold_their_bias_modules():
    alibi = ToyTransformer(8, 8, scheme="alibi", n_heads=4, causal=True)
    assert isinstance(alibi.relative, ALiBiBias) and alibi.relative.n_heads == 4
    none = ToyTransformer(8, 8, scheme="none", n_heads=4, causal=True)
    assert sum(p.numel() for p in alibi.parameters()) == sum(p.numel() for p in none.parameters())
    t5 = ToyTransformer(8, 8, scheme="t5", n_heads=4, causal=True, max_len=16, num_buckets=8)
    assert isinstance(t5.relative, RelativePositionBias)
    assert (t5.relative.num_buckets, t5.relative.max_distance, t5.relative.bidirectional) == (8, 16, False)
    assert all(block.attn.bias is t5.relative for block in t5.blocks)  # one table shared by all layers, as in T5
    extra = sum(p.numel() for p in t5.parameters()) - sum(p.numel() for p in none.parameters())
    assert extra == 8 * 4
    assert ToyTransformer(8, 8, scheme="t5", n_heads=4).relative.bidirectional


def test_alibi_model_adds_the_alibi_bias_to_its_scores():
    model = ToyTransformer(8, 8, scheme="alibi", n_heads=4, causal=True, n_layers=1).double()
    tokens = torch.randint(0, 8, (2, 10), generator=torch.Generator().manual_seed(0))
    weights = model.attention_weights(tokens)[0]
    attn = model.blocks[0].attn
    x = model.blocks[0].norm1(model.embed(tokens))
    q, k, _ = attn.qkv(x).view(2, 10, 3, 4, 8).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-1, -2) / 8**0.5 + alibi_bias(4, 10, dtype=torch.float64)
    want = torch.softmax(scores.masked_fill(torch.ones(10, 10, dtype=torch.bool).triu(1), float("-inf")), -1)
    torch.testing.assert_close(weights, want.detach())


@pytest.mark.parametrize("scheme", available_schemes())
def test_attention_weights_are_what_forward_uses(scheme):
    model = ToyTransformer(8, 8, scheme=scheme, causal=True, max_len=16).double()
    tokens = torch.randint(0, 8, (2, 9), generator=torch.Generator().manual_seed(3))
    weights = model.attention_weights(tokens)
    assert weights.shape == (2, 2, 2, 9, 9)  # [layers, batch, heads, seq, seq]
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 2, 9, dtype=torch.float64))
    assert (weights.triu(1) == 0).all()  # causal: no weight on later keys
    # layer 0's weights times the values reproduce its attention output
    block = model.blocks[0]
    x = block.norm1(model._embed(tokens))
    _, _, v = block.attn.qkv(x).view(2, 9, 3, 2, 16).permute(2, 0, 3, 1, 4)
    y = block.attn.out((weights[0] @ v).transpose(1, 2).reshape(2, 9, 32))
    torch.testing.assert_close(y, block.attn(x, torch.arange(9)))


def test_causal_mask_breaks_permutation_equivariance_without_positions():
    torch.manual_seed(0)
    tokens = torch.randint(0, 10, (3, 9))
    perm = torch.randperm(9)
    nope = ToyTransformer(10, 4, scheme="none", causal=True).double()
    with torch.no_grad():
        assert (nope(tokens[:, perm]) - nope(tokens)[:, perm]).abs().max() > 1e-3


def test_lag_task_batches():
    task = make_task("lag", n_symbols=6, lag=3)
    tokens, labels = task.sample(5, 9, torch.Generator().manual_seed(0))
    assert (labels[:, :3] == -100).all() and torch.equal(labels[:, 3:], tokens[:, :-3])
    assert isinstance(task, LagTask) and task.vocab_size == task.n_classes == 6 and not task.pooled
    tokens1, labels1 = LagTask(n_symbols=6, lag=1).sample(5, 9, torch.Generator().manual_seed(0))
    tokens_p, labels_p = PreviousTokenTask(n_symbols=6).sample(5, 9, torch.Generator().manual_seed(0))
    assert torch.equal(tokens1, tokens_p) and torch.equal(labels1, labels_p)  # lag 1 is the previous-token task


def test_a_causal_model_without_positions_learns_the_previous_token_task():
    task = LagTask(n_symbols=8, lag=1)
    model = make_model(task, "none", causal=True, max_len=16, seed=0)
    train(model, task, seq_len=16, steps=150, seed=0, lr=5e-3)
    accuracy = evaluate(model, task, seq_len=16, n=128)["accuracy"]
    assert accuracy > 0.6
    # without the mask, the best a position-free model can do is guess from the bag of tokens (about 0.27 here)
    unmasked = make_model(task, "none", max_len=16, seed=0)
    train(unmasked, task, seq_len=16, steps=150, seed=0, lr=5e-3)
    assert evaluate(unmasked, task, seq_len=16, n=128)["accuracy"] < 0.35


@pytest.mark.parametrize("scheme", available_schemes())
def test_every_scheme_pickles_and_saves(scheme):
    model = make_model(LagTask(), scheme, causal=True, max_len=16, seed=0)
    tokens = torch.randint(0, 8, (2, 12), generator=torch.Generator().manual_seed(0))
    again = pickle.loads(pickle.dumps(model))
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    with torch.no_grad():
        for other in (again, loaded):
            assert torch.equal(other(tokens), model(tokens))


def test_train_restores_the_mode_when_it_raises():
    task = LagTask()
    model = make_model(task, "none", causal=True)
    model.eval()

    def boom(module, args):
        assert module.training  # train() switched to train mode for the step
        raise RuntimeError("boom")

    handle = model.register_forward_pre_hook(boom)
    with pytest.raises(RuntimeError, match="boom"):
        train(model, task, seq_len=6, steps=3)
    assert not model.training
    handle.remove()


def test_train_and_evaluate_feed_batches_on_the_model_device():
    task = LagTask()
    model = make_model(task, "rotary", causal=True).to("meta")
    seen = []

    class Stop(Exception):
        pass

    def spy(module, args):
        seen.append(args[0].device)
        raise Stop

    model.register_forward_pre_hook(spy)
    for call in (lambda: train(model, task, seq_len=6, steps=1), lambda: evaluate(model, task, seq_len=6, n=4)):
        with pytest.raises(Stop):
            call()
    assert [d.type for d in seen] == ["meta", "meta"]
    # the whole forward pass runs on meta (shapes only)
    fresh = make_model(task, "t5", causal=True).to("meta")
    assert fresh(torch.zeros(2, 5, dtype=torch.long, device="meta")).shape == (2, 5, 8)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"vocab_size": 10**10}, "vocab_size"),
        ({"n_classes": 10**10}, "n_classes"),
        ({"d_model": 10**6}, "d_model"),
        ({"n_layers": 10**6}, "n_layers"),
        ({"scheme": "learned", "max_len": 10**10}, "max_len"),
    ],
)
def test_absurd_sizes_are_refused_before_allocating(kwargs, name):
    args = {"vocab_size": 10, "n_classes": 2, **kwargs}
    with pytest.raises(ValueError, match=f"^{name}: "):
        ToyTransformer(args.pop("vocab_size"), args.pop("n_classes"), **args)


def test_huge_batches_are_refused():
    set_memory_limit(2**20)
    try:
        with pytest.raises(ValueError, match="batch_size"):
            LagTask().sample(10**6, 100, torch.Generator())
        with pytest.raises(ValueError, match="^n: one layer's attention scores"):
            evaluate(make_model(LagTask(), "none"), LagTask(), seq_len=512, n=1024)
    finally:
        set_memory_limit(None)


# --------------------------------------------------------------------------- batched seeds, probes, ablations


def test_train_seeds_gives_each_seed_what_train_gives_it():
    from pe_lessons.toy import train_seeds

    task = LagTask(n_symbols=8, lag=2)
    kwargs = dict(causal=True, d_model=16, n_heads=2, n_layers=1, max_len=12)
    for scheme, extra in [("rotary", {"rope_base": 1e5}), ("t5", {}), ("alibi", {})]:
        models, history = train_seeds(task, scheme, [4, 1], seq_len=12, steps=15, lr=5e-3, **kwargs, **extra)
        assert list(history.columns) == ["seed", "step", "seq_len", "loss", "accuracy"] and len(history) == 30
        for seed, batched in zip([4, 1], models):
            alone = make_model(task, scheme, seed=seed, **kwargs, **extra)
            ref = train(alone, task, seq_len=12, steps=15, lr=5e-3, seed=seed)
            torch.testing.assert_close(
                torch.tensor(history.loc[history.seed == seed, "loss"].to_numpy()),
                torch.tensor(ref["loss"].to_numpy()),
                rtol=1e-5,
                atol=1e-5,
            )
            tokens = task.sample(4, 30, torch.Generator().manual_seed(0))[0]
            with torch.no_grad():
                torch.testing.assert_close(batched(tokens), alone(tokens), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="seeds must be distinct"):
        train_seeds(task, "none", [1, 1], seq_len=12, steps=1)
    with pytest.raises(ValueError, match="lr"):
        train_seeds(task, "none", [1], seq_len=12, steps=1, lr=2)


def test_hidden_states_and_without_heads():
    model = ToyTransformer(8, 8, scheme="alibi", d_model=16, n_heads=2, n_layers=2, causal=True)
    tokens = torch.randint(0, 8, (3, 9), generator=torch.Generator().manual_seed(0))
    states = model.hidden_states(tokens)
    assert states.shape == (3, 3, 9, 16)
    with torch.no_grad():
        torch.testing.assert_close(model.head(model.norm(states[-1])), model(tokens))
        torch.testing.assert_close(states[0], model.embed(tokens))
    ablated = model.without_heads([(1, 0)])
    assert ablated is not model and not ablated.blocks[1].attn.out.weight[:, :8].any()
    torch.testing.assert_close(ablated.blocks[1].attn.out.weight[:, 8:], model.blocks[1].attn.out.weight[:, 8:])
    assert model.blocks[1].attn.out.weight[:, :8].any()  # the original is untouched
    with torch.no_grad():
        assert (ablated(tokens) - model(tokens)).abs().max() > 0
        torch.testing.assert_close(model.without_heads([])(tokens), model(tokens))
    for bad, match in [([(2, 0)], "layer"), ([(0, 2)], "head"), ([3], "pairs"), ([(0, -1)], "head")]:
        with pytest.raises(ValueError, match=match):
            model.without_heads(bad)


def test_attention_scale():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 5, 4, generator=g) for _ in range(3))
    torch.testing.assert_close(attention(q, k, v, scale=0.5), attention(q, k, v))  # 1/√4
    torch.testing.assert_close(attention(q, k, v, scale=1.0), attention(2 * q, k, v))
    for bad in (0, -1.0, float("inf"), True, "1"):
        with pytest.raises((TypeError, ValueError), match="scale"):
            attention(q, k, v, scale=bad)


# --------------------------------------------------------------------------- RoPE options (notebook 10)


def test_rotary_model_takes_a_base_and_a_context_extension_rule():
    from pe_lessons.rotary import apply_rope

    task = make_task("order")
    rule = {"rope_type": "linear", "factor": 4.0}
    model = make_model(task, "rotary", seed=3, rope_base=500.0, rope_scaling=rule)
    assert (model.rope.base, model.rope.scaling) == (500.0, rule)
    assert "rope_base=500" in repr(model)
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 2, 2, 7, 16, generator=g).unbind(0)
    pos = torch.arange(7)
    rq, rk = model.blocks[1].attn.rotate(q, k, pos)
    torch.testing.assert_close(rq, apply_rope(q, pos, base=500.0, scaling=rule), rtol=0, atol=0)
    torch.testing.assert_close(rk, apply_rope(k, pos, base=500.0, scaling=rule), rtol=0, atol=0)
    # PI with factor 4 at base 500 is plain RoPE at base 500 on positions / 4
    torch.testing.assert_close(rq, apply_rope(q, pos / 4, base=500.0), rtol=1e-6, atol=1e-6)
    # the default model is plain RoPE, base 10 000
    plain = make_model(task, "rotary", seed=3)
    assert (plain.rope.base, plain.rope.scaling) == (10000.0, None) and "rope_base" not in repr(plain)
    assert make_model(task, "none").rope is None


def test_with_rope_reads_the_same_weights_with_another_rule():
    task = make_task("order")
    model = make_model(task, "rotary", seed=0)
    tokens, _ = task.sample(4, 12, torch.Generator().manual_seed(0))
    same = model.with_rope()
    with torch.no_grad():
        torch.testing.assert_close(same(tokens), model(tokens), rtol=0, atol=0)
    pi = model.with_rope(scaling={"rope_type": "linear", "factor": 2.0})
    assert pi is not model and pi.rope.scaling["factor"] == 2.0 and model.rope.scaling is None
    assert all(torch.equal(a, b) for a, b in zip(pi.state_dict().values(), model.state_dict().values()))
    with torch.no_grad():
        assert (pi(tokens) - model(tokens)).abs().max() > 1e-4
    ntk = model.with_rope(base=40000.0)
    assert ntk.rope.base == 40000.0 and all(b.attn.rotate is ntk.rope for b in ntk.blocks)
    assert pickle.loads(pickle.dumps(pi)).rope == pi.rope  # a hook object, not a closure: the model pickles
    train(pi, task, seq_len=8, steps=2, batch_size=8)  # and trains with its rule


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rope_base": 1.0}, ValueError, "rope_base"),
        ({"rope_base": "big"}, TypeError, "rope_base"),
        ({"rope_scaling": 3}, TypeError, "rope_scaling"),
        ({"rope_scaling": {"rope_type": "linear"}}, ValueError, "rope_scaling.*'factor'"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, ValueError, "original_max_position_embeddings"),
    ],
)
def test_rope_options_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        make_model(make_task("order"), "rotary", **kwargs)


def test_rope_options_need_the_rotary_scheme():
    task = make_task("order")
    with pytest.raises(ValueError, match="rope_base and rope_scaling need scheme='rotary'"):
        make_model(task, "alibi", rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="with_rope needs scheme='rotary'"):
        make_model(task, "learned").with_rope(base=100.0)
    with pytest.raises(ValueError, match="rope_base"):
        make_model(task, "rotary").with_rope(base=0.5)


def test_with_nope_layers_removes_rope_from_chosen_layers_only():
    from pe_lessons.toy import with_nope_layers

    task = make_task("lag", n_symbols=8, lag=1)
    model = make_model(task, "rotary", seed=0, causal=True, n_layers=3)
    twin = with_nope_layers(model, [1])
    assert [b.attn.rotate is None for b in twin.blocks] == [False, True, False]
    assert all(b.attn.rotate is not None for b in model.blocks)  # the original is untouched
    for a, b in zip(model.state_dict().values(), twin.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    tokens = task.sample(4, 10, torch.Generator().manual_seed(0))[0]
    # the rotation has no parameters, but it changes what the model computes
    assert not torch.allclose(with_nope_layers(model, [0, 1, 2])(tokens), model(tokens))
    with pytest.raises(ValueError, match="below the model's 3 layers"):
        with_nope_layers(model, [3])
    with pytest.raises(ValueError, match="scheme='rotary'"):
        with_nope_layers(make_model(task, "none", seed=0, causal=True), [0])
    with pytest.raises(TypeError, match="list of layer indices"):
        with_nope_layers(model, 1)


def test_schemes_share_every_other_weight_of_a_seed():
    """The learned table is drawn after every other weight: at one seed, models of any parameter-free scheme and
    the learned one start from the same embedding, blocks and head (a comparison of schemes changes one thing)."""
    task = make_task("order")
    models = {s: make_model(task, s, max_len=12, seed=3) for s in ("none", "sinusoidal", "learned", "rotary")}
    reference = dict(models["none"].named_parameters())
    for scheme, model in models.items():
        for name, value in model.named_parameters():
            if name != "position.weight":
                assert torch.equal(value, reference[name]), (scheme, name)
