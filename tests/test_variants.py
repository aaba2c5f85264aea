"""pe_lessons.variants: each builder's defining property, diagnose(), and the cheap tests that catch each bug."""

import math

import pytest
import torch

from pe_lessons import sinusoidal_table
from pe_lessons.variants import (
    CHEAP_TESTS,
    EXPLANATIONS,
    SOURCES,
    VARIANTS,
    concat_halves,
    diagnose,
    frequencies_match,
    matches_formula,
    paper,
    tensor2tensor,
)

NAMES = list(VARIANTS)
BUGS = ["sin_only", "doubled_exponent", "column_exponent", "shifted_cos_exponent"]
DTYPES = [torch.float32, torch.float64]


def formula(max_len, d_model, base=10000.0, *, sin_freq, cos_freq, sin_cols, cos_cols, cos_fn=torch.cos):
    """Independent reference: write the sin and cos columns one frequency at a time."""
    pos = torch.arange(max_len, dtype=torch.float64)
    out = torch.full((max_len, d_model), float("nan"), dtype=torch.float64)
    for k in range(d_model // 2):
        out[:, sin_cols(k)] = torch.sin(pos * sin_freq(k))
        out[:, cos_cols(k)] = cos_fn(pos * cos_freq(k))
    return out


def reference(name, max_len, d_model, base=10000.0):
    d, h = d_model, d_model // 2
    inter = dict(sin_cols=lambda k: 2 * k, cos_cols=lambda k: 2 * k + 1)
    halves = dict(sin_cols=lambda k: k, cos_cols=lambda k: h + k)
    paper_f = lambda k: base ** (-2 * k / d)  # noqa: E731
    spec = {
        "paper": dict(sin_freq=paper_f, cos_freq=paper_f, **inter),
        "concat_halves": dict(sin_freq=paper_f, cos_freq=paper_f, **halves),
        "tensor2tensor": dict(
            sin_freq=lambda k: math.exp(-k * math.log(base) / max(h - 1, 1)),
            cos_freq=lambda k: math.exp(-k * math.log(base) / max(h - 1, 1)),
            **halves,
        ),
        "sin_only": dict(sin_freq=paper_f, cos_freq=paper_f, cos_fn=torch.sin, **inter),
        "doubled_exponent": dict(
            sin_freq=lambda k: base ** (-4 * k / d), cos_freq=lambda k: base ** (-4 * k / d), **inter
        ),
        "column_exponent": dict(
            sin_freq=lambda k: base ** (-2 * (2 * k) / d), cos_freq=lambda k: base ** (-2 * (2 * k + 1) / d), **inter
        ),
        "shifted_cos_exponent": dict(sin_freq=paper_f, cos_freq=lambda k: base ** (-(2 * k + 1) / d), **inter),
    }[name]
    return formula(max_len, d_model, base, **spec)


# ---------------------------------------------------------------- builders
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("d_model, base", [(4, 10000.0), (6, 10000.0), (16, 10000.0), (64, 500.0)])
def test_builders_match_independent_reference(name, d_model, base):
    t32 = VARIANTS[name](60, d_model, base)
    t64 = VARIANTS[name](60, d_model, base, dtype=torch.float64)
    assert t32.dtype == torch.float32 and t64.dtype == torch.float64 and t32.shape == (60, d_model)
    ref = reference(name, 60, d_model, base)
    torch.testing.assert_close(t64, ref, rtol=0, atol=1e-12)
    assert (t32.double() - ref).abs().max() <= 5e-7


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_paper_is_sinusoidal_table(dtype):
    for n, d in [(0, 4), (8, 4), (100, 16), (3000, 64)]:
        assert torch.equal(paper(n, d, dtype=dtype), sinusoidal_table(n, d, dtype=dtype))
    assert torch.equal(paper(50, 8, 500.0), sinusoidal_table(50, 8, base=500.0))


def test_concat_halves_is_a_column_permutation_of_paper():
    for d in (4, 6, 64):
        perm = list(range(0, d, 2)) + list(range(1, d, 2))
        assert torch.equal(concat_halves(200, d, dtype=torch.float64), paper(200, d, dtype=torch.float64)[:, perm])


def test_tensor2tensor_frequencies_end_at_one_over_base_and_differ_from_paper():
    t = tensor2tensor(2, 512, dtype=torch.float64)
    freq = torch.asin(t[1, :256])  # sin(ω) with ω <= 1
    assert freq[0].item() == pytest.approx(1.0) and freq[-1].item() == pytest.approx(1e-4, rel=1e-9)
    paper_freq = torch.tensor([10000 ** (-2 * i / 512) for i in range(256)], dtype=torch.float64)
    off = ((freq - paper_freq).abs() / paper_freq).max().item()
    assert 0.034 < off < 0.036  # "up to 3.5 % off the paper's at d=512"


def test_sin_only_wastes_half_the_width_and_starts_at_zero():
    t = VARIANTS["sin_only"](100, 16)
    assert torch.equal(t[:, 0::2], t[:, 1::2])
    assert torch.equal(t[0], torch.zeros(16))
    norms = t.norm(dim=1)
    assert norms.max() - norms.min() > 1.0


def test_doubled_exponent_looks_healthy_but_runs_too_slow():
    t = VARIANTS["doubled_exponent"](100, 16, dtype=torch.float64)
    assert torch.equal(t[0], torch.tensor([0.0, 1.0] * 8, dtype=torch.float64))
    torch.testing.assert_close(t.norm(dim=1), torch.full((100,), math.sqrt(8), dtype=torch.float64))
    # it is the paper's table for base**2
    torch.testing.assert_close(t, paper(100, 16, 1e8, dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["column_exponent", "shifted_cos_exponent"])
def test_cos_column_turns_at_another_frequency(name):
    t = VARIANTS[name](100, 16, dtype=torch.float64)
    radius = t[:, 0::2] ** 2 + t[:, 1::2] ** 2
    assert (radius - 1).abs().max() > 0.1
    assert torch.equal(t[0], torch.tensor([0.0, 1.0] * 8, dtype=torch.float64))


# ---------------------------------------------------------------- diagnose
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d_model", [4, 6, 8, 16, 64, 512])
@pytest.mark.parametrize("max_len", [8, 50, 1000])
def test_diagnose_names_every_variant(max_len, d_model, dtype):
    for name, build in VARIANTS.items():
        found = diagnose(build(max_len, d_model, dtype=dtype))
        assert found.variant == name and found.nearest == name and found.also_matches == ()
        assert found.max_error < 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_diagnose_other_bases_and_textbook_float32_code(name):
    assert diagnose(VARIANTS[name](40, 10, 100.0), base=100.0).variant == name
    # float32 angles (the usual torch code) up to long tables are still recognised
    pos = torch.arange(20000, dtype=torch.float32)
    assert diagnose(textbook_float32(pos, 32)).variant == "paper"


def textbook_float32(pos, d_model, base=10000.0):
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
    out = torch.zeros(pos.numel(), d_model)
    out[:, 0::2] = torch.sin(pos[:, None] * div)
    out[:, 1::2] = torch.cos(pos[:, None] * div)
    return out


def _noisy(t, scale, seed=0):
    g = torch.Generator().manual_seed(seed)
    return t + scale * torch.randn(t.shape, generator=g, dtype=t.dtype)


UNKNOWN = {
    "random": lambda n, d, dt: torch.rand(n, d, generator=torch.Generator().manual_seed(1), dtype=dt) * 2 - 1,
    "zeros": lambda n, d, dt: torch.zeros(n, d, dtype=dt),
    "ones": lambda n, d, dt: torch.ones(n, d, dtype=dt),
    "base 500": lambda n, d, dt: paper(n, d, 500.0, dtype=dt),
    "base 100000": lambda n, d, dt: paper(n, d, 100000.0, dtype=dt),
    "noise 1e-4": lambda n, d, dt: _noisy(paper(n, d, dtype=dt), 1e-4),
    "noise 1e-3 on sin_only": lambda n, d, dt: _noisy(VARIANTS["sin_only"](n, d, dtype=dt), 1e-3),
    "constant 1e-3 offset": lambda n, d, dt: paper(n, d, dtype=dt) + 1e-3,
    "sin_only, rows shifted by five": lambda n, d, dt: VARIANTS["sin_only"](n + 5, d, dtype=dt)[5:],
    "rows shifted by three, noise 1e-4": lambda n, d, dt: _noisy(paper(n + 3, d, dtype=dt)[3:], 1e-4),
    "cos first, halves out of order": lambda n, d, dt: paper(n, d, dtype=dt)[:, torch.arange(d).roll(1)],
    "one wrong entry": lambda n, d, dt: paper(n, d, dtype=dt).index_put_(
        (torch.tensor([n - 1]), torch.tensor([0])), torch.tensor(0.5, dtype=dt)
    ),
    "a NaN": lambda n, d, dt: paper(n, d, dtype=dt).index_put_(
        (torch.tensor([3]),), torch.tensor(float("nan"), dtype=dt)
    ),
    "half the rows zeroed": lambda n, d, dt: paper(n, d, dtype=dt).index_fill_(0, torch.arange(0, n, 2), 0.0),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(8, 4), (50, 16), (300, 64)])
@pytest.mark.parametrize("kind", list(UNKNOWN))
def test_diagnose_says_unknown_for_everything_else(kind, shape, dtype):
    found = diagnose(UNKNOWN[kind](*shape, dtype))
    assert found.variant == "unknown" and found.also_matches == ()
    assert found.nearest in VARIANTS and "none of the 7 known variants" in found.explanation
    assert (found.start, found.zeroed_rows, found.cos_first, found.differences) == (0, (), False, ())


def test_unknown_explanation_points_at_the_near_miss():
    near = diagnose(_noisy(paper(50, 16), 1e-3))
    assert near.nearest == "paper" and "close to paper" in near.explanation and 1e-3 < near.max_error < 0.01
    far = diagnose(torch.zeros(50, 16))
    assert "not close to any" in far.explanation and "PE(0)" in far.explanation


def test_diagnose_low_precision_tables():
    for dtype in (torch.float16, torch.bfloat16):
        for name, build in VARIANTS.items():
            assert diagnose(build(200, 16, dtype=dtype)).variant == name
    # angles computed in bf16: positions above 256 are not even representable, so the table is off
    pos = torch.arange(1000, dtype=torch.bfloat16)[:, None]
    inv = torch.tensor([10000 ** (-2 * i / 16) for i in range(8)], dtype=torch.bfloat16)
    bad = torch.stack((torch.sin(pos * inv), torch.cos(pos * inv)), -1).flatten(1)
    assert diagnose(bad).variant == "unknown"


def test_coinciding_variants_prefer_the_first_in_order():
    # with a base very close to 1 every frequency is ~1: the four interleaved tables coincide,
    # and so do the two concatenated ones. The first in VARIANTS order is reported.
    base = 1.0 + 1e-9
    interleaved = ["paper", "doubled_exponent", "column_exponent", "shifted_cos_exponent"]
    for name in interleaved:
        found = diagnose(VARIANTS[name](20, 8, base), base=base)
        assert found.variant == "paper" and found.also_matches == tuple(interleaved[1:])
        assert "also matches" in found.explanation
    found = diagnose(tensor2tensor(20, 8, base), base=base)
    assert found.variant == "concat_halves" and found.also_matches == ("tensor2tensor",)
    assert diagnose(VARIANTS["sin_only"](20, 8, base), base=base).variant == "sin_only"
    # at the usual base no two variants coincide anywhere in the supported range
    for d in (4, 6, 8, 10, 16, 64, 512):
        tables = {name: build(8, d, dtype=torch.float64) for name, build in VARIANTS.items()}
        for a in NAMES:
            for b in NAMES[NAMES.index(a) + 1 :]:
                assert (tables[a] - tables[b]).abs().max() > 1e-3, (d, a, b)  # 100× the tolerance


def test_base_squared_turns_paper_into_doubled_exponent():
    assert diagnose(paper(50, 16, 1e8)).variant == "doubled_exponent"


def test_every_variant_has_an_explanation_with_source_and_fix():
    assert list(EXPLANATIONS) == NAMES == list(SOURCES)
    for name in BUGS:
        text = diagnose(VARIANTS[name](30, 8)).explanation
        assert SOURCES[name] in text and len(text.split(". ")) >= 3
    for name in BUGS:
        assert "https://github.com/" in SOURCES[name]


# ---------------------------------------------------------------- cheap tests that would have caught each bug
# True = the table passes the test. Our table passes all five; each bug fails at least one.
EXPECTED = {
    "paper": [True, True, True, True, True],
    "concat_halves": [False, True, False, False, False],
    "tensor2tensor": [False, True, False, False, False],
    "sin_only": [False, False, False, True, False],
    "doubled_exponent": [True, True, True, False, False],
    "column_exponent": [True, False, False, False, False],
    "shifted_cos_exponent": [True, False, False, True, False],
}
CASES = [(test, name, EXPECTED[name][k]) for k, test in enumerate(CHEAP_TESTS) for name in NAMES]


@pytest.mark.parametrize("test, name, passes", CASES, ids=[f"{t}-{n}-{'pass' if p else 'FAIL'}" for t, n, p in CASES])
@pytest.mark.parametrize("d_model", [4, 16, 512])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cheap_test_catches_the_right_bugs(test, name, passes, d_model, dtype):
    assert CHEAP_TESTS[test](VARIANTS[name](100, d_model, dtype=dtype)) is passes


@pytest.mark.parametrize("test", list(CHEAP_TESTS))
def test_our_sinusoidal_table_passes_every_cheap_test(test):
    for max_len, d_model in [(2, 2), (8, 4), (1000, 64), (70000, 16)]:
        for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
            assert CHEAP_TESTS[test](sinusoidal_table(max_len, d_model, dtype=dtype))


def test_every_bug_is_caught_by_some_cheap_test():
    for name in BUGS:
        assert not all(EXPECTED[name])


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("build", list(VARIANTS.values()), ids=NAMES)
@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        ((10, 7), {}, ValueError, "d_model"),
        ((10, 0), {}, ValueError, "d_model"),
        ((10, 8.0), {}, TypeError, "d_model"),
        ((-1, 8), {}, ValueError, "max_len"),
        ((2.5, 8), {}, TypeError, "max_len"),
        ((10, 8, 1.0), {}, ValueError, "base"),
        ((10, 8, "10000"), {}, TypeError, "base"),
        ((10, 8), {"dtype": torch.int32}, TypeError, "dtype"),
    ],
)
def test_builders_reject_bad_input(build, args, kwargs, error, words):
    with pytest.raises(error, match=words):
        build(*args, **kwargs)


@pytest.mark.parametrize(
    "table, base, error, words",
    [
        ([[0.0, 1.0]] * 8, 10000.0, TypeError, "table must be a torch.Tensor"),
        (torch.zeros(8, 4, dtype=torch.long), 10000.0, TypeError, "floating"),
        (torch.zeros(64), 10000.0, ValueError, "2-D"),
        (torch.zeros(8, 4, 1), 10000.0, ValueError, "2-D"),
        (torch.zeros(8, 5), 10000.0, ValueError, "even number of columns"),
        (torch.zeros(8, 2), 10000.0, ValueError, "at least 4 columns"),
        (torch.zeros(7, 4), 10000.0, ValueError, "at least 8 rows"),
        (torch.zeros(8, 4), 0.5, ValueError, "base"),
        (torch.zeros(8, 4), None, TypeError, "base"),
    ],
)
def test_diagnose_rejects_bad_input(table, base, error, words):
    with pytest.raises(error, match=words):
        diagnose(table, base)


def test_cheap_tests_reject_bad_input():
    for test in CHEAP_TESTS.values():
        with pytest.raises(ValueError, match="2-D"):
            test(torch.zeros(8))
    for test in (frequencies_match, matches_formula):  # the two whose answer depends on the base
        with pytest.raises(ValueError, match="base"):
            test(torch.zeros(8, 4), 1.0)
    with pytest.raises(ValueError, match="at least 2 rows"):
        CHEAP_TESTS["frequencies = base^(-2i/d)"](torch.zeros(1, 4))


def test_tables_that_require_grad_are_accepted():
    t = paper(20, 8).requires_grad_()
    assert diagnose(t).variant == "paper" and all(test(t) for test in CHEAP_TESTS.values())


def _ratio(table, name, base=10000.0):
    """Independent: largest |table − variant| / tolerance over the whole table."""
    from pe_lessons.variants import tolerance

    ref = VARIANTS[name](table.shape[0], table.shape[1], base, dtype=torch.float64)
    pos = torch.arange(table.shape[0])
    return ((table.double() - ref).abs() / tolerance(pos, table.dtype)[:, None]).max().item()


def _spliced(n, d, head, tail, noise=3e-5):
    """``head``'s first 64 rows (slightly off), then ``tail``'s rows: the 64-row screen alone misleads."""
    t = VARIANTS[tail](n, d, dtype=torch.float64)
    t[:64] = VARIANTS[head](64, d, dtype=torch.float64) + noise
    return t


@pytest.mark.parametrize(
    "table",
    [
        _spliced(100, 4, "paper", "sin_only", noise=0.0),  # a 64-row screen alone would say doubled_exponent
        _spliced(300, 4, "concat_halves", "paper", noise=0.0),  # ... and tensor2tensor here
        _spliced(400, 16, "paper", "column_exponent"),
        _spliced(400, 16, "doubled_exponent", "sin_only"),
        _spliced(2000, 64, "shifted_cos_exponent", "paper", noise=5e-5),
        torch.rand(300, 32, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1,
    ],
)
def test_nearest_is_the_smallest_error_over_the_whole_table(table):
    found = diagnose(table)
    assert found.variant == "unknown"
    ratios = {name: _ratio(table, name) for name in NAMES}
    assert found.nearest == min(ratios, key=ratios.get)
    ref = VARIANTS[found.nearest](table.shape[0], table.shape[1], dtype=torch.float64)
    assert found.max_error == pytest.approx((table - ref).abs().max().item(), rel=1e-9)


def test_tolerance_checks_its_arguments():
    from pe_lessons.variants import tolerance

    assert tolerance(torch.arange(3), torch.float32).tolist() == pytest.approx([1e-5, 1e-5 + 2.5e-7, 1e-5 + 5e-7])
    with pytest.raises(TypeError, match="dtype"):
        tolerance(torch.arange(3), torch.int64)
    with pytest.raises(TypeError, match="positions"):
        tolerance([0, 1, 2], torch.float32)


# ---------------------------------------------------------------- correct tables as real code stores them
# Each builder below follows the library's own code (in torch, float32 where the library uses it).
def fairseq_embedding(num_embeddings, embedding_dim, padding_idx=None):
    """fairseq SinusoidalPositionalEmbedding.get_embedding (also M2M100, FSMT, Speech2Text)."""
    half_dim = embedding_dim // 2
    emb = math.log(10000) / (half_dim - 1)
    emb = torch.exp(torch.arange(half_dim, dtype=torch.float) * -emb)
    emb = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * emb.unsqueeze(0)
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1).view(num_embeddings, -1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb


def fairseq_positions(tokens, padding_idx):
    """fairseq utils.make_positions: non-padding tokens are numbered from padding_idx + 1."""
    mask = tokens.ne(padding_idx).int()
    return (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + padding_idx


def torchtune_cache(max_seq_len, dim, base=10000):
    """torchtune RotaryPositionalEmbeddings.build_rope_cache, the cache flattened to [seq, dim]."""
    theta = 1.0 / (base ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    seq_idx = torch.arange(max_seq_len, dtype=theta.dtype)
    idx_theta = torch.einsum("i, j -> ij", seq_idx, theta).float()
    return torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1).flatten(1)


def meta_freqs_cis(dim, end, theta=10000.0):
    """Meta Llama precompute_freqs_cis, viewed as reals: [end, dim] with (cos, sin) pairs."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.view_as_real(torch.polar(torch.ones_like(freqs), freqs)).flatten(1)


def test_fairseq_table_with_its_padding_row_and_the_rows_a_model_adds():
    weights = fairseq_embedding(1026, 512, padding_idx=1)
    full = diagnose(weights)
    assert (full.variant, full.start, full.zeroed_rows, full.cos_first) == ("tensor2tensor", 0, (1,), False)
    assert full.differences == ("row 1 is all zeros",) and "padding row" in full.explanation
    tokens = torch.tensor([[5, 8, 13, 21] * 10, [1, 1, 1] + [7] * 37])  # the second sentence is left-padded
    rows = weights.index_select(0, fairseq_positions(tokens, 1).flatten()).view(2, 40, 512)
    used = diagnose(rows[0])
    assert (used.variant, used.start, used.zeroed_rows) == ("tensor2tensor", 2, ())
    assert used.differences == ("row 0 is position 2, not 0",)
    padded = diagnose(rows[1])
    assert (padded.variant, padded.start, padded.zeroed_rows) == ("tensor2tensor", -1, (0, 1, 2))
    assert padded.differences[0] == "row 3 (the first non-zero row) is position 2"


def test_transformers_m2m100_table_is_named():
    m2m = pytest.importorskip("transformers.models.m2m_100.modeling_m2m_100")
    weights = m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(130, 64, padding_idx=1)
    found = diagnose(weights)
    assert (found.variant, found.zeroed_rows) == ("tensor2tensor", (1,))
    assert diagnose(weights[2:]).start == 2  # the rows it adds: positions from padding_idx + 1 = 2


@pytest.mark.parametrize("build", [torchtune_cache, lambda n, d: meta_freqs_cis(d, n)], ids=["torchtune", "meta"])
def test_cos_first_rope_caches_are_the_paper_frequencies(build):
    found = diagnose(build(4096, 128))
    assert (found.variant, found.start, found.zeroed_rows, found.cos_first) == ("paper", 0, (), True)
    assert found.differences == ("each pair is stored cos first, then sin",) and "torchtune" in found.explanation
    decode = diagnose(build(3064, 64)[3000:])  # a cached decode: rows 3000 … 3063
    assert (decode.variant, decode.start, decode.cos_first) == ("paper", 3000, True)


@pytest.mark.parametrize("name", ["paper", "concat_halves", "tensor2tensor"])
@pytest.mark.parametrize("start", [0, 1, 17, 999, 70_000])
@pytest.mark.parametrize("cos_first", [False, True])
@pytest.mark.parametrize("d_model, dtype", [(16, torch.float32), (64, torch.float64), (8, torch.bfloat16)])
def test_a_correct_table_is_never_a_bug_or_unknown(name, start, cos_first, d_model, dtype):
    n = 40
    table = VARIANTS[name](start + n, d_model, dtype=torch.float64)[start:]
    if cos_first:
        h = d_model // 2
        if name == "paper":
            table = table.view(n, h, 2).flip(-1).flatten(1)
        else:
            table = torch.cat((table[:, h:], table[:, :h]), 1)
    table = table.to(dtype)
    zeroed = (5,) if start % 2 else ()
    table[list(zeroed)] = 0
    found = diagnose(table)
    if dtype == torch.bfloat16 and start >= 999:
        # bfloat16 keeps 8 bits: far out the narrow table is too coarse to pin a position down
        assert found.variant in (name, "unknown")
        return
    assert (found.variant, found.start, found.zeroed_rows, found.cos_first) == (name, start, zeroed, cos_first)
    assert len(found.differences) == (start != 0) + bool(zeroed) + cos_first


def test_start_search_stops_where_a_chance_fit_becomes_likely():
    from pe_lessons.variants import _max_start

    assert _max_start(2, torch.float32) == 2048 and _max_start(8, torch.float32) == 2**17
    # d_model = 4: position 84,823 ≈ 13,500·2π is position 0 within 2e-3, so a noisy table must stay unknown
    near_zero = paper(84_823 + 8, 4, dtype=torch.float64)[84_823:]
    assert (near_zero - paper(8, 4, dtype=torch.float64)).abs().max() < 2e-3
    assert diagnose(_noisy(paper(8, 4), 1e-4)).variant == "unknown"
