"""Property tests of the classes of bad input, across modules.

- huge and boundary positions against an exact reference (mpmath, 200 bits);
- a small memory limit against the largest single allocation a call really makes;
- numbers in every ordinary type (Python int/float, NumPy scalar, 0-d tensor);
- low precision (float16 ALiBi), unclear errors (seed, devices, byte counts), unchecked inputs.

(Student functions that loop, raise, return the wrong type or drop everything are covered for
every public checker in tests/exercises/test_feedback.py.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from pe_lessons import memory_limit, set_memory_limit
from pe_lessons.offsets import offset_matrix, offset_similarity, relative_similarity
from pe_lessons.relative import ALiBiBias, RelativePositionBias, alibi_bias, t5_bucket_edges, t5_relative_bucket
from pe_lessons.rotary import MAX_POSITION, RotaryEmbedding, apply_rope, rope_formula
from pe_lessons.sinusoidal import exact_angles, pe_formula, position_angles, sinusoidal_table

mpmath = pytest.importorskip("mpmath")

# ---------------------------------------------------------------- huge and boundary positions


def _exact_row(pos: int, d_model: int, base: float = 10000.0) -> list[float]:
    mpmath.mp.prec = 200
    row = []
    for i in range(d_model // 2):
        angle = pos * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / d_model)
        row += [float(mpmath.sin(angle)), float(mpmath.cos(angle))]
    return row


boundary = st.sampled_from(
    [0, 1, 2**24, 2**24 + 1, 2**32, 2**53 - 1, 2**53, 2**53 + 1, 2**62 + 7, 2**63 - 1, 10**30, 2**100 + 3]
)
positions = boundary | st.integers(0, 2**63 - 1) | st.integers(0, 10**40)


@given(pos=positions, d_model=st.sampled_from([2, 8, 32]), base=st.sampled_from([10000.0, 500000.0, 1.5]))
def test_pe_formula_is_exact_at_every_integer_position(pos, d_model, base):
    """Before: pe_formula(2**53 + 1) returned the row of 2**53 (off by up to 1.5)."""
    got, want = pe_formula(pos, d_model, base), _exact_row(pos, d_model, base)
    assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-15 + (2e-9 if pos <= 2**24 else 1e-14)


@given(
    pos=st.integers(-(2**63) + 1, 2**63 - 1) | boundary.filter(lambda p: p < 2**63), d_model=st.sampled_from([4, 16])
)
def test_exact_angles_match_the_exact_reference(pos, d_model):
    angles = exact_angles(torch.tensor([pos, -pos]), d_model)
    assert float(angles.abs().max()) <= math.pi + 1e-12  # reduced to [-π, π]
    row = torch.stack((angles[0].sin(), angles[0].cos()), -1).flatten().tolist()
    assert max(abs(a - b) for a, b in zip(row, _exact_row(pos, d_model), strict=True)) < 1e-13
    torch.testing.assert_close(angles[1], -angles[0], rtol=0, atol=0)  # negative positions turn back
    if abs(pos) <= 2**24:  # the fast path agrees with the exact one there
        fast = position_angles(torch.tensor([pos]), d_model)[0]  # not reduced: compare sin and cos
        torch.testing.assert_close(fast.sin(), angles[0].sin(), rtol=0, atol=4e-9)
        torch.testing.assert_close(fast.cos(), angles[0].cos(), rtol=0, atol=4e-9)


def test_explorer_chart_draws_the_rows_of_huge_positions():
    """Before: explorer_chart(positions=(2**53, 2**53 + 2)) drew the row of 2**53 twice."""
    from pe_lessons.widgets import explorer_chart

    data = next(iter(explorer_chart(8, positions=(2**53, 2**53 + 2)).to_dict()["datasets"].values()))
    for pos in (2**53, 2**53 + 1):
        drawn = [r["value"] for r in data if r["pos"] == pos]
        assert max(abs(a - b) for a, b in zip(drawn, _exact_row(pos, 8), strict=True)) < 1e-4
    with pytest.raises(ValueError, match="2\\*\\*63"):
        explorer_chart(8, positions=(2**63, 2**63 + 1))


def test_int64_extremes_are_refused_or_handled_not_wrapped():
    """Before: −2**63 passed the |k| checks (its abs() is −2**63) and gave wrong buckets and sums."""
    with pytest.raises(ValueError, match="2\\*\\*63"):
        exact_angles(torch.tensor([-(2**63)]), 8)
    with pytest.raises(ValueError, match="2\\*\\*63"):
        offset_similarity(torch.tensor([-(2**63)]), 8)
    edge = t5_relative_bucket(torch.tensor([-(2**63), -(2**63) + 1, 2**63 - 1]))
    far = t5_relative_bucket(torch.tensor([-(10**6), -(10**6), 10**6]))
    assert edge.tolist() == far.tolist()  # the farthest buckets, like any far offset
    with pytest.raises(ValueError, match="max_distance"):
        t5_relative_bucket(torch.tensor([1]), max_distance=2**63)


rope_positions = st.sampled_from([MAX_POSITION, -MAX_POSITION, MAX_POSITION - 1, 2**31 + 5]) | st.integers(
    -MAX_POSITION, MAX_POSITION
)


@settings(max_examples=15)
@given(m=rope_positions)
def test_rope_is_right_up_to_its_limit_and_refuses_beyond(m):
    """Before: apply_rope(x, [2**53 + 1]) rotated by the angle of 2**53 (off by up to 3.6 at 2**62)."""
    x = torch.randn(1, 8, dtype=torch.float64)
    want = torch.tensor(_rotate_exact(x[0].tolist(), m), dtype=torch.float64)
    bound = 4 * abs(m) * 2**-52 + 1e-12  # |m|·2⁻⁵² rad per angle, times |x| ≤ a few
    for rope in (apply_rope, rope_formula, RotaryEmbedding(8)):
        torch.testing.assert_close(rope(x, [m])[0], want, rtol=0, atol=bound * float(x.abs().max()) * 2)
    for far in (m + MAX_POSITION + 1, -(2**63), 2**53 + 1) if m >= 0 else (m - MAX_POSITION - 1,):
        for rope in (apply_rope, rope_formula, RotaryEmbedding(8)):
            with pytest.raises(ValueError, match="2\\*\\*32"):
                rope(x, [far])
            with pytest.raises(ValueError, match="2\\*\\*32"):
                rope(x, torch.tensor([far]))


def _rotate_exact(x: list[float], m: int, base: float = 10000.0) -> list[float]:
    mpmath.mp.prec = 200
    out = []
    for i in range(len(x) // 2):
        angle = m * mpmath.power(mpmath.mpf(base), mpmath.mpf(-2 * i) / len(x))
        c, s = mpmath.cos(angle), mpmath.sin(angle)
        a, b = x[2 * i], x[2 * i + 1]
        out += [float(a * c - b * s), float(a * s + b * c)]
    return out


# ---------------------------------------------------------------- a small memory limit against the largest allocation


class _Largest(TorchDispatchMode):
    """Records the bytes of the largest tensor any op creates."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                self.largest = max(self.largest, t.untyped_storage().nbytes())
        return out


LIMIT = 2**16  # 64 KiB


def _calls(n: int, m: int, h: int):
    """Calls whose intermediates grow with the sizes drawn (each name: the argument that sizes it)."""
    return {
        "alibi_bias": lambda: alibi_bias(h, n, m),
        "alibi_bias float16": lambda: alibi_bias(h, n, m, dtype=torch.float16),
        "ALiBiBias": lambda: ALiBiBias(h)(n, m),
        "ALiBiBias.double": lambda: ALiBiBias(h).double()(n, m),
        "RelativePositionBias.buckets": lambda: RelativePositionBias(h).buckets(n, m),
        "RelativePositionBias": lambda: RelativePositionBias(h)(n, m),
        "t5_bucket_edges": lambda: t5_bucket_edges(max_distance=n * m + 8),
        "sinusoidal_table": lambda: sinusoidal_table(n, 2 * h),
        "sinusoidal_table float64": lambda: sinusoidal_table(n, 2 * h, dtype=torch.float64),
        "relative_similarity": lambda: relative_similarity(n, 2 * h),
        "offset_similarity": lambda: offset_similarity(n * m, 2 * h),
        "offset_matrix": lambda: offset_matrix(n, 2 * h),
    }


@settings(max_examples=25)
@given(
    n=st.integers(1, 300) | st.sampled_from([32768, 2**20]),
    m=st.integers(1, 300) | st.sampled_from([32768]),
    h=st.integers(1, 16),
)
def test_a_call_either_refuses_or_stays_within_the_memory_limit(n, m, h):
    """Before: ALiBiBias(1)(32768) and RelativePositionBias(1).buckets(32768) passed a guard on
    the float32 result and allocated int64 distances twice its size; t5_bucket_edges(2**40) 8.8 TB."""
    set_memory_limit(LIMIT)
    try:
        for name, call in _calls(n, m, h).items():
            with _Largest() as seen:
                try:
                    call()
                except ValueError as err:
                    assert "limit" in str(err) or "float16" in str(err), (name, err)
                    continue
            assert seen.largest <= LIMIT, f"{name}(n={n}, m={m}, h={h}) allocated {seen.largest} bytes > {LIMIT}"
    finally:
        set_memory_limit(None)


def test_evaluate_guards_every_activation_not_only_the_scores():
    """Before: evaluate(..., n=2**22) checked the attention scores only."""
    from pe_lessons.toy import LagTask, evaluate, make_model

    task = LagTask()
    model = make_model(task, "alibi", causal=True)
    set_memory_limit(2**20)
    try:
        for n, seq_len in ((2**22, 2), (4, 2**12), (2**12, 8)):
            with pytest.raises(ValueError, match="^n: "):
                evaluate(model, task, seq_len=seq_len, n=n)
        with _Largest() as seen:
            evaluate(model, task, seq_len=8, n=16)
        assert seen.largest <= 2**20
    finally:
        set_memory_limit(None)


def test_t5_bucket_edges_of_a_huge_max_distance_are_computed_without_the_huge_tensor():
    for kwargs in ({}, {"bidirectional": False}, {"num_buckets": 8, "max_distance": 20}, {"max_distance": 1000}):
        distance = torch.arange(kwargs.get("max_distance", 128) + 1)  # the brute-force answer
        buckets = t5_relative_bucket(-distance, **kwargs)
        starts = torch.cat((torch.tensor([True]), buckets[1:] != buckets[:-1]))
        assert t5_bucket_edges(**kwargs) == distance[starts].tolist()
    huge = t5_bucket_edges(max_distance=2**40)
    assert huge[:9] == list(range(9)) and huge == sorted(set(huge)) and huge[-1] < 2**40
    buckets = t5_relative_bucket(-torch.tensor(huge), max_distance=2**40)
    assert (buckets[1:] > buckets[:-1]).all() and (
        t5_relative_bucket(-torch.tensor(huge) + 1, max_distance=2**40)[1:] < buckets[1:]
    ).all()


# ---------------------------------------------------------------- low precision


def test_float16_alibi_refuses_biases_it_cannot_hold():
    """Before: alibi_bias(..., dtype=float16) returned −inf past 65 504 (a masked key, not a penalty)."""
    ok = alibi_bias(1, 4096, dtype=torch.float16)  # slope 2**-8: at most 16 — fine
    assert bool(torch.isfinite(ok).all())
    for call in (lambda: alibi_bias(8, 2**18, 1, dtype=torch.float16), lambda: ALiBiBias(8).half()(2**18, 1)):
        with pytest.raises(ValueError, match="float16.*65504|-inf"):
            call()
    bf = alibi_bias(8, 2**18, 1, dtype=torch.bfloat16)  # bfloat16's range is float32's
    assert bool(torch.isfinite(bf).all())


def test_alibi_module_recomputes_its_slopes_in_float64():
    """Before: ALiBiBias(12).double() widened float32 slopes (3.6e-5 off in the bias)."""
    module = ALiBiBias(12).double()
    assert module.slopes.dtype == torch.float64
    torch.testing.assert_close(module(50), alibi_bias(12, 50, dtype=torch.float64), rtol=0, atol=0)
    half = ALiBiBias(12).half()
    assert half(5).dtype == torch.float16
    torch.testing.assert_close(half(5), alibi_bias(12, 5, dtype=torch.float16), rtol=0, atol=0)


# ---------------------------------------------------------------- numbers in every ordinary type


def _forms(value):
    forms = [value, np.array(value)[()], torch.tensor(value)]
    forms += [np.int64(value), np.int32(value)] if isinstance(value, int) else [np.float64(value), np.float32(value)]
    return forms


@pytest.mark.parametrize(
    "call, value",
    [
        (lambda v: pe_formula(v, 8), 5),
        (lambda v: pe_formula(5, v), 8),
        (lambda v: pe_formula(5, 8, v), 10000.0),
        (lambda v: sinusoidal_table(v, 8), 6),
        (lambda v: offset_matrix(v, 8), 3),
        (lambda v: alibi_bias(v, 5), 4),
        (lambda v: ALiBiBias(4)(v), 5),
        (lambda v: RotaryEmbedding(8, base=v)(torch.ones(3, 8)), 500.0),
        (lambda v: apply_rope(torch.ones(3, 8), base=v), 500.0),
    ],
)
def test_numbers_are_taken_in_every_ordinary_type(call, value):
    want = call(value)
    for form in _forms(value):
        got = call(form)
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        else:
            assert got == want


def test_messages_never_quote_a_valid_value_as_invalid():
    """Before: "must be a probability in [0, 1), got np.float32(0.1)"."""
    from pe_lessons import SinusoidalPositionalEncoding

    for p in (0.1, np.float32(0.1), torch.tensor(0.1)):
        assert SinusoidalPositionalEncoding(8, dropout=p).dropout.p == pytest.approx(0.1)
    with pytest.raises(ValueError, match="got 1.5"):
        SinusoidalPositionalEncoding(8, dropout=np.float64(1.5))


# ---------------------------------------------------------------- unclear errors and unchecked inputs


def test_unclear_errors_are_clear():
    from pe_lessons._checks import check_device, check_fits, format_bytes
    from pe_lessons.toy import LagTask, evaluate, make_model

    with pytest.raises(ValueError, match="seed must be an integer in 0 … 2\\*\\*64 - 1"):
        evaluate(make_model(LagTask(), "none"), LagTask(), seq_len=4, n=4, seed=2**64)
    for device in ("xpu", "xla", "hpu"):
        with pytest.raises(ValueError, match=f"device='{device}'.*not available"):
            check_device(device)
    assert format_bytes(2**2000).startswith("about 2**2000")  # before: OverflowError
    with pytest.raises(ValueError, match="more than the limit"):
        check_fits("n", [2**1000, 2**1000], torch.float32)
    with pytest.raises(ValueError, match="^batch_size × seq_len: "):  # before: blamed batch_size alone
        LagTask().sample(2, 2**40, torch.Generator())
    assert memory_limit() > LIMIT


def test_unchecked_inputs_are_checked():
    from pe_lessons import baselines
    from pe_lessons.exercises import alias_period
    from pe_lessons.plots import similarity_heatmap
    from pe_lessons.sampling import apparent_period
    from pe_lessons.toy import LagTask, make_model

    cases = [
        (lambda: baselines.rotate_half(torch.ones(2, 3)), ValueError, "even"),
        (lambda: baselines.rope_angles([0, 1], 7), ValueError, "head_dim"),
        (lambda: baselines.rope_angles([0, 1], 8, math.nan), ValueError, "base"),
        (lambda: baselines.loop_table(2, 4, base=math.nan), ValueError, "base"),
        (lambda: apparent_period([0.0, math.nan, 1.0]), ValueError, "finite"),
        (lambda: apparent_period(torch.tensor([0.0, math.inf])), ValueError, "finite"),
        (lambda: similarity_heatmap(torch.tensor([[1.0, math.inf], [0.0, 1.0]])), ValueError, "finite"),
        (lambda: alias_period(14, 32, -5, 100), ValueError, "n_positions"),
        (lambda: alias_period(14, 32, 100, 0), ValueError, "rows"),
        (
            lambda: make_model(LagTask(), "sinusoidal")(torch.zeros(2, 5, dtype=torch.long, device="meta")),
            ValueError,
            "meta",
        ),
    ]
    for call, kind, words in cases:
        with pytest.raises(kind, match=words):
            call()
