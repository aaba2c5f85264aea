"""pe_lessons.sampling: long-format frames, honest band reduction of large tables, and apparent periods."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pe_lessons import sinusoidal_table, wavelengths
from pe_lessons.sampling import (
    DECIMALS,
    apparent_period,
    band_count,
    band_edges,
    band_sizes,
    check_table,
    reduce_table,
    table_frame,
)


def test_table_frame_shape_columns_rounding():
    table = torch.rand(7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    frame = table_frame(table)
    assert list(frame.columns) == ["pos", "dimension", "value"] and frame.shape == (42, 3)
    assert frame.iloc[8].tolist() == [1, 2, round(table[1, 2].item(), 4)]
    assert (frame["value"] == frame["value"].round(DECIMALS)).all()
    frame = table_frame(table, positions=torch.arange(100, 107))
    assert frame["pos"].min() == 100 and frame["pos"].max() == 106
    with pytest.raises(ValueError, match="positions"):
        table_frame(table, positions=torch.arange(3))


def test_reduce_table_keeps_exact_band_min_max_and_means():
    gen = torch.Generator().manual_seed(1)
    table = torch.randn(1003, 37, dtype=torch.float64, generator=gen)
    frame = reduce_table(table, max_rows=10, max_cols=5, how="minmax", decimals=None)
    assert len(frame) == 10 * 5
    sizes = (frame.pos_end - frame.pos).unique()
    assert set(sizes) == {100, 101}  # balanced bands: no tiny last band standing for one position
    assert list(frame.columns) == ["pos", "pos_end", "dimension", "dimension_end", "min", "max"]
    for row in frame.itertuples():
        block = table[row.pos : row.pos_end, row.dimension : row.dimension_end]
        assert row.min == block.min().item() and row.max == block.max().item()  # exact, not approximate
    # bands tile the table: every position and every column in exactly one band
    assert sorted(set(zip(frame.pos, frame.pos_end)))[-1][1] == 1003
    mean = reduce_table(table, max_rows=10, max_cols=5, how="mean", decimals=None)
    for row in mean.itertuples():
        block = table[row.pos : row.pos_end, row.dimension : row.dimension_end]
        assert math.isclose(row.value, block.mean().item(), rel_tol=1e-12, abs_tol=1e-12)
    stride = reduce_table(table, max_rows=10, max_cols=5, how="stride", decimals=None)
    for row in stride.itertuples():
        assert row.value == table[row.pos, row.dimension].item()


@given(n=st.integers(1, 300), d=st.integers(1, 40), r=st.integers(1, 50), c=st.integers(1, 50))
def test_reduce_table_bands_partition_any_shape(n, d, r, c):
    table = torch.arange(n * d, dtype=torch.float64).reshape(n, d)
    frame = reduce_table(table, max_rows=r, max_cols=c, how="minmax", decimals=None)
    assert frame["pos"].nunique() <= r and frame["dimension"].nunique() <= c
    covered = ((frame.pos_end - frame.pos) * (frame.dimension_end - frame.dimension)).sum()
    assert covered == n * d
    # for this increasing table the block min is its top-left entry and the max its bottom-right one
    assert (frame["min"] == frame.pos * d + frame.dimension).all()
    assert (frame["max"] == (frame.pos_end - 1) * d + frame.dimension_end - 1).all()


def test_reduce_table_without_limits_is_the_table_and_rounds():
    table = torch.tensor([[0.123456, -0.5], [1.0, 0.987654]], dtype=torch.float64)
    frame = reduce_table(table, how="mean")
    assert frame["value"].tolist() == [0.1235, -0.5, 1.0, 0.9877]
    assert (frame["pos_end"] == frame["pos"] + 1).all()
    empty = reduce_table(torch.empty(0, 4), max_rows=3)
    assert len(empty) == 0 and "min" in empty


def test_naive_subsampling_aliases_and_minmax_does_not():
    """Column 0 (period 2π) sampled every 150 positions looks like a slow wave of period ≈ 1180."""
    n, bands = 45000, 300
    table = sinusoidal_table(n, 16)
    stride = reduce_table(table[:, :1], max_rows=bands, how="stride")
    k = n // bands
    assert k == 150
    seen = apparent_period(torch.tensor(stride["value"].to_numpy()), spacing=k)
    # theory: 150 rad per sample ≡ 150 - 24·2π rad, a period of 2π / |150 - 48π| samples
    alias = 2 * math.pi / abs(k - 48 * math.pi) * k
    assert abs(seen - alias) / alias < 0.01 and seen > 100 * 2 * math.pi
    honest = reduce_table(table[:, :1], max_rows=bands, how="minmax")
    assert (honest["min"] < -0.99).all() and (honest["max"] > 0.99).all()  # every band spans the full range
    # a slow column (period > 2 bands) keeps its true period under the band mean
    col = 10  # pair 5 at d_model = 16: period 2π·10000^(10/16) ≈ 1987 positions
    mean = reduce_table(table[:, col : col + 1], max_rows=bands, how="mean")
    true = wavelengths(16)[5].item()
    assert abs(apparent_period(torch.tensor(mean["value"].to_numpy()), spacing=k) - true) / true < 0.02


def test_apparent_period_reads_a_clean_sinusoid_and_refuses_flat_data():
    x = torch.arange(5000, dtype=torch.float64)
    assert abs(apparent_period(torch.sin(0.05 * x)) - 2 * math.pi / 0.05) < 0.05
    assert apparent_period([1.0, 2.0, 3.0]) == math.inf
    # touching the mean is not crossing it: one sign change here (between samples 3 and 4), not two
    assert apparent_period([-1.0, 0.0, -1.0, 0.0, 2.0, 0.0]) == math.inf
    # a sign change across a run of exact zeros counts once, at the run's middle
    assert apparent_period([1.0, 0.0, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0, 0.0, -1.0]) == 6.0
    assert apparent_period([1.0, -1.0, 1.0, -1.0], spacing=3) == 6.0
    with pytest.raises(ValueError):
        apparent_period(torch.zeros(3, 3))
    with pytest.raises(TypeError):
        apparent_period("sin")
    with pytest.raises(ValueError, match="spacing"):
        apparent_period([0.0, 1.0], spacing=0)


def test_bands_are_balanced_and_described_in_words():
    assert band_count(10, None) == 10 and band_count(10, 4) == 4 and band_count(3, 4) == 3
    edges = band_edges(10, 4)
    assert edges.tolist() == [0, 3, 5, 8, 10]  # sizes differ by at most one
    assert band_sizes(edges, "position") == "2–3 positions"
    assert band_sizes(band_edges(8, 8), "column") == "1 column" and band_sizes(band_edges(8, 4), "row") == "2 rows"


def test_check_table_gives_float64_on_the_cpu_and_refuses_what_cannot_be_drawn():
    got = check_table(torch.ones(2, 3, dtype=torch.float16))
    assert got.dtype == torch.float64 and got.device.type == "cpu"
    with pytest.raises(TypeError, match="table must be a torch.Tensor"):
        check_table([[1.0]])
    with pytest.raises(ValueError, match="2-D"):
        check_table(torch.zeros(3))
    with pytest.raises(TypeError, match="real values"):
        check_table(torch.zeros(2, 2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="meta"):
        check_table(torch.zeros(2, 2, device="meta"))


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: reduce_table(torch.zeros(4, 4), how="naive"), ValueError),
        (lambda: reduce_table(torch.zeros(4, 4), how=1), TypeError),
        (lambda: reduce_table(torch.zeros(4, 4, dtype=torch.complex64)), TypeError),
        (lambda: reduce_table(torch.zeros(4, 4), max_rows=0), ValueError),
        (lambda: reduce_table(torch.zeros(4, 4), max_cols=2.0), TypeError),
        (lambda: apparent_period([0.0, 1.0], spacing="1"), TypeError),
    ],
)
def test_bad_input_is_named(call, error):
    with pytest.raises(error):
        call()
