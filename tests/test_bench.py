"""Smoke tests of pe_lessons.bench at tiny sizes: shape of the results, not speed (no timed assertions)."""

import math
import platform

import pytest
import torch

from pe_lessons import bench
from pe_lessons.baselines import hf_rope
from pe_lessons.timing import try_compile

FAST = dict(min_run_time=1e-3, rounds=1)


def measured(row):
    return not math.isnan(row["median_ms"])


def test_bench_sinusoidal_rows_columns_and_ratios():
    rows = bench.bench_sinusoidal([(8, 4), (32, 8)], loop_max_cells=32, **FAST)
    assert len(rows) == 12
    assert all(tuple(r) == bench.COLUMNS for r in rows)
    assert all(r["ratio"] > 0 and r["gbps"] > 0 and r["median_ms"] > 0 for r in rows if measured(r))
    sizes = [r["size"] for r in rows]
    assert sizes == ["8x4"] * 6 + ["32x8"] * 6
    base = [r for r in rows if r["variant"] == "torch.sin (baseline)"]
    assert all(r["ratio"] == 1.0 and r["baseline"] == "torch.sin (baseline)" for r in base)
    loops = [r for r in rows if r["variant"] == "python loop"]
    assert loops[0]["note"] == "" and loops[1]["note"] == "extrapolated from 8x4" and measured(loops[1])
    ours = [r for r in rows if r["variant"] == "pe_lessons sinusoidal_table"]
    assert all(r["max_abs_error"] <= 5e-7 for r in ours)


def test_bench_rope_rows_and_compile_off_skips_with_a_reason():
    rows = bench.bench_rope([(1, 1, 4, 8)], compile=False, dtypes=["float32"], decode=False, **FAST)
    variants = [r["variant"] for r in rows]
    assert len(rows) == 7 and variants[0].startswith("HF eager") and variants[-1] == "clone"
    assert all(tuple(r) == bench.COLUMNS and r["dtype"] == "float32" for r in rows)
    for row in rows:
        if measured(row):
            assert row["ratio"] > 0 and row["speedup_vs_hf"] > 0 and row["note"] == ""
        else:
            assert row["note"].startswith("skipped: ")
    compiled = [r for r in rows if r["variant"].startswith("compiled")]
    assert len(compiled) == 3 and not any(measured(r) for r in compiled)
    assert rows[0]["max_abs_error"] < 1e-5 and rows[-1]["ratio"] == 1.0


def test_bench_rope_has_a_block_per_dtype_and_a_decode_step():
    rows = bench.bench_rope([(1, 1, 4, 8), (1, 2, 8, 8)], compile=False, **FAST)
    assert [r["dtype"] for r in rows[::7][:6]] == ["float32", "bfloat16", "float16"] * 2
    decode = [r for r in rows if r["variant"].startswith("decode")]
    assert len(rows) == 2 * 3 * 7 + 3 * 4 and len(decode) == 3 * 4
    assert {r["size"] for r in decode} == {f"1x2x1x8 at {bench.DECODE_POSITION}"}  # the largest shape, one position
    for row in decode:
        assert measured(row) and row["speedup_vs_hf"] > 0 and row["baseline"] == "decode clone"
        if row["variant"] != "decode clone":
            limit = 1e-6 if row["dtype"] == "float32" else 2e-2
            assert row["max_abs_error"] < limit, row
    text = bench.format_table(rows)
    assert "bfloat16; ratio = time / clone or decode clone" in text
    assert any("apply_rope half" in line and "µs per call" in line for line in bench.decode_summary(rows))
    with pytest.raises(ValueError, match="dtype"):
        bench.bench_rope([(1, 1, 4, 8)], compile=False, dtypes=["float64"], **FAST)


def test_traffic_and_kernels_of_each_eager_variant_are_counted():
    """Deterministic counts (trace_ops): kernels per call and bytes moved over clone's, cos/sin tables included."""
    rows = bench.bench_rope([(2, 4, 64, 16)], compile=False, decode=False, **FAST)
    got = {(r["dtype"], r["variant"]): (r["kernels"], r["traffic"]) for r in rows if not math.isnan(r["kernels"])}
    n = 2 * 4 * 64 * 16
    tables = 64 * 8 * 4 * 2  # cos and sin, [seq, head_dim/2] float32 each (or cos + i·sin, complex64)
    hf = "HF eager x*cos + rotate_half(x)*sin"
    for dtype, size in (("float32", 4), ("bfloat16", 2), ("float16", 2)):
        compulsory = 2 * n * size
        assert got[(dtype, "clone")] == (1, 1.0)
        hf_tables = 2 * 64 * 16 * size  # HF's cos and sin, [seq, head_dim] in x's dtype
        assert got[(dtype, hf)] == (5, pytest.approx((10 * n * size + hf_tables) / compulsory))
        inter = got[(dtype, "apply_rope interleaved")]
        half = got[(dtype, "apply_rope half")]
        if dtype == "float32":  # one complex multiply; one multiply, then a multiply-add into each half
            assert inter == (1, pytest.approx((8 * n + tables) / compulsory))
            assert half == (3, pytest.approx((20 * n + 2 * tables) / compulsory))  # [cos | cos], -sin, sin
        else:  # a converting copy up, the float32 kernel(s), a converting copy down
            assert inter == (3, pytest.approx((20 * n + tables) / compulsory))
            assert inter[1] <= got[(dtype, hf)][1]  # no more traffic than Hugging Face's eager formula
            assert half == (5, pytest.approx((32 * n + 2 * tables) / compulsory))


def test_compile_failure_is_a_skipped_row_not_an_error(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here\nsecond line")

    monkeypatch.setattr(torch, "compile", broken)
    fn, reason = try_compile(hf_rope, torch.ones(1, 4), torch.ones(1, 4), torch.ones(1, 4))
    assert fn is None and reason == "torch.compile failed: RuntimeError: no compiler here"
    rows = bench.bench_rope([(1, 1, 4, 8)], compile=True, **FAST)
    hf = next(r for r in rows if r["variant"] == "compiled HF eager x*cos + rotate_half(x)*sin")
    assert not measured(hf) and hf["note"] == "skipped: torch.compile failed: RuntimeError: no compiler here"


def test_check_targets_and_format_table():
    rows = bench.bench_sinusoidal([(16, 4)], **FAST) + bench.bench_rope([(1, 1, 4, 8)], compile=False, **FAST)
    targets = bench.check_targets(rows, size_sin="16x4", size_rope="1x1x4x8")
    assert len(targets) == len(bench.TARGETS)
    error = next(t for t in targets if "error" in t["target"])
    assert error["met"] is True  # accuracy is deterministic; speed verdicts are not asserted
    for t, (*_, op, limit, text) in zip(targets, bench.TARGETS, strict=True):  # each verdict: measured vs limit
        assert (t["target"], t["limit"]) == (text, limit)
        judged = t["measured"] >= limit if op == ">=" else t["measured"] <= limit
        assert t["met"] is (None if math.isnan(t["measured"]) else judged), t
    assert all(t["met"] is None for t in bench.check_targets(rows, size_sin="1x2", size_rope="1x1x1x2"))
    text = bench.format_table(rows)
    assert "pe_lessons sinusoidal_table" in text and "HF eager" in text and "ratio = time / clone" in text


def test_main_quick_runs_and_prints(capsys):
    assert bench.main(["--quick", "--device", "cpu", "--compile", "off", "--keep-memory", "--stat", "min"]) == 0
    out = capsys.readouterr().out
    assert "sinusoidal on cpu" in out and "rope on cpu" in out and "total" in out and "allocator:" in out
    assert bench.keep_freed_memory() is (platform.libc_ver()[0] == "glibc")  # mallopt exists in glibc only


def test_main_cpu_clock_needs_one_thread(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--quick", "--device", "cpu", "--clock", "cpu"])
    assert exit_info.value.code == 2 and "--threads 1" in capsys.readouterr().err
    args = ["--quick", "--device", "cpu", "--clock", "cpu", "--threads", "1", "--dtype", "bfloat16"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "bfloat16;" in out and " float16;" not in out and "float32;" in out and "µs per call" in out


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: bench.bench_rope([(1, 4, 8)], **FAST), ValueError),
        (lambda: bench.bench_rope([(1, 1, 4, 7)], **FAST), ValueError),
        (lambda: bench.bench_rope([(1, 1, 4, 8)], compile="yes", **FAST), TypeError),
        (lambda: bench.bench_sinusoidal([(0, 4)], **FAST), ValueError),
        (lambda: bench.bench_sinusoidal([(4, 3)], **FAST), ValueError),
        (lambda: bench.bench_rope([(1, 1, 4, 8)], compile=False, stat="mean", **FAST), ValueError),
        (lambda: bench.bench_sinusoidal([(4, 4)], stat="mean", **FAST), ValueError),
    ],
)
def test_bad_arguments_are_named(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no GPU is present")
def test_cuda_without_a_gpu_is_a_clear_error():
    for call in (
        lambda: bench.bench_sinusoidal([(4, 4)], device="cuda", **FAST),
        lambda: bench.bench_rope([(1, 1, 4, 8)], device="cuda", compile=False, **FAST),
    ):
        with pytest.raises(ValueError, match="device='cuda' asks for a GPU"):
            call()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: bench.bench_sinusoidal([(10**9, 512)], **FAST), "sizes"),
        (lambda: bench.bench_rope([(1000, 1000, 1000, 64)], compile=False, **FAST), "shapes"),
    ],
)
def test_oversized_requests_are_refused_before_allocating(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_sizes_on_a_gpu_are_far_above_its_l2_cache_and_the_cpu_keeps_its_sizes():
    l2 = 50 * 2**20  # H100 (A100: 40 MiB)
    for device in ("cuda", "cuda:1", torch.device("cuda")):  # only the type is read: no GPU needed
        sin, rope = bench.default_sizes(device)
        n, d = max(sin, key=lambda s: s[0] * s[1])
        assert 4 * n * d >= 4 * l2 and n <= 2**20  # the table stays in its accurate range
        biggest = max(rope, key=lambda s: math.prod(s))
        assert 4 * math.prod(biggest) >= 8 * l2 and biggest == (8, 32, 4096, 128)
    assert bench.default_sizes("cpu") == (bench.SIN_SIZES, bench.ROPE_SHAPES)
    assert bench.default_sizes("cpu", quick=True) == bench.default_sizes("cuda", quick=True)
    assert bench.check_targets([])[0]["size"] == "65536x64"  # the CPU targets keep their sizes
    with pytest.raises(ValueError, match="device"):
        bench.default_sizes("gpu")
    with pytest.raises(TypeError, match="quick"):
        bench.default_sizes("cpu", quick=1)


def test_default_sizes_follow_the_device(monkeypatch):
    seen = {}
    tiny = (((16, 4),), ((1, 1, 4, 8),))
    monkeypatch.setattr(bench, "default_sizes", lambda device, quick=False: seen.setdefault(str(device), tiny))
    rows = bench.bench_sinusoidal(**FAST) + bench.bench_rope(compile=False, **FAST)
    assert seen == {"cpu": tiny}
    assert {r["size"] for r in rows} == {"16x4", "1x1x4x8", f"1x1x1x8 at {bench.DECODE_POSITION}"}


def _target_rows(good: bool) -> list[dict]:
    """Rows that meet (or miss) every target: each measure on the right (or wrong) side of its limit."""
    rows = {}
    for suite, dtype, variant, key, op, limit, _ in bench.TARGETS:
        size = "65536x64" if suite == "sinusoidal" else "4x8x1024x64"
        row = rows.setdefault(
            (dtype, variant), bench._row(suite, torch.device("cpu"), 1, size, variant, dtype=dtype, traffic=1.0)
        )
        if key == "traffic_vs_hf":
            row["traffic"] = 4.0 if good else 6.0
            continue
        row[key] = limit * (0.9 if good == (op == "<=") else 1.1)
    for dtype in ("bfloat16", "float16"):
        hf = "HF eager x*cos + rotate_half(x)*sin"
        rows[(dtype, hf)] = bench._row("rope", torch.device("cpu"), 1, "4x8x1024x64", hf, dtype=dtype, traffic=5.0)
    return list(rows.values())


def test_check_targets_judges_each_limit_in_the_right_direction():
    met = bench.check_targets(_target_rows(True))
    assert [t["met"] for t in met] == [True] * len(bench.TARGETS)
    missed = bench.check_targets(_target_rows(False))
    assert [t["met"] for t in missed] == [False] * len(bench.TARGETS)
    traffic = [t for t in missed if "traffic" in t["target"]]
    assert traffic and all(t["measured"] == pytest.approx(6.0 / 5.0) for t in traffic)
    # every dtype of the compiled path is judged, and float32 eager has its own limits
    texts = {(t["dtype"], t["target"]) for t in met}
    for dtype in ("float32", "bfloat16", "float16"):
        assert (dtype, "compiled half: one fused kernel") in texts
    assert ("float32", "eager interleaved ≤ 1.5× clone") in texts and ("float32", "eager half ≤ 2.5× clone") in texts


def test_gbps_is_the_compulsory_bytes_over_the_median_time():
    rope = bench.bench_rope([(1, 2, 8, 8)], compile=False, dtypes=["float32"], decode=False, **FAST)
    rows = bench.bench_sinusoidal([(32, 8)], **FAST) + rope
    for row in filter(measured, rows):
        if row["suite"] == "rope":
            nbytes = 2 * 4 * (1 * 2 * 8 * 8)  # read x, write the result
        elif row["variant"] in ("torch.sin (baseline)", "clone"):
            nbytes = 8 * 32 * 8
        else:
            nbytes = 4 * 32 * 8  # a table is only written
        assert row["gbps"] == pytest.approx(nbytes / (row["median_ms"] * 1e-3) / 1e9, rel=1e-9), row["variant"]
    loop = next(r for r in rows if r["variant"] == "python loop")
    assert loop["ratio"] == pytest.approx(
        loop["median_ms"] / next(r["median_ms"] for r in rows if r["variant"] == "torch.sin (baseline)"), rel=1e-9
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no GPU is present")
def test_main_device_cuda_without_a_gpu_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--device", "cuda"])
    assert exit_info.value.code == 2 and "no CUDA GPU" in capsys.readouterr().err


def test_chunked_eager_rope_moves_the_same_bytes_in_more_launches(monkeypatch):
    """apply_rope's eager runs of positions (at the timing's thread count): each run launches the same kernels,
    over its own part of x and its own rows of the tables, so the bytes per call are those of one pass."""
    from pe_lessons import _rope_fast

    monkeypatch.setattr(_rope_fast, "CHUNK_ELEMENTS_PER_THREAD", 2048)  # x of 8192 elements: 4 runs of 16 positions
    rows = bench.bench_rope([(2, 4, 64, 16)], threads=1, compile=False, decode=False, **FAST)
    got = {(r["dtype"], r["variant"]): (r["kernels"], r["traffic"]) for r in rows if not math.isnan(r["kernels"])}
    n, tables = 2 * 4 * 64 * 16, 64 * 8 * 4 * 2
    for dtype, size in (("float32", 4), ("bfloat16", 2), ("float16", 2)):
        compulsory = 2 * n * size
        half = got[(dtype, "apply_rope half")]
        inter = got[(dtype, "apply_rope interleaved")]
        if dtype == "float32":
            assert inter == (1, pytest.approx((8 * n + tables) / compulsory))  # one complex multiply, not chunked
            assert half == (4 * 3, pytest.approx((20 * n + 2 * tables) / compulsory))
        else:
            assert inter == (4 * 3, pytest.approx((20 * n + tables) / compulsory))
            assert half == (4 * 5, pytest.approx((32 * n + 2 * tables) / compulsory))
