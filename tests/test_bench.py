"""Smoke tests of pe_lessons.bench at tiny sizes: shape of the results, not speed (no timed assertions)."""

import math

import pytest
import torch

from pe_lessons import bench, timing
from pe_lessons.sinusoidal import sinusoidal_table

FAST = dict(min_run_time=1e-3, rounds=1)


def measured(row):
    return not math.isnan(row["median_ms"])


def test_reference_implementations_agree_with_the_exact_table():
    exact = sinusoidal_table(50, 8, dtype=torch.float64)
    for table in (bench.loop_table(50, 8), bench.textbook_table(50, 8), bench.float64_angles_table(50, 8)):
        assert table.dtype == torch.float32 and table.shape == (50, 8)
        assert (table.double() - exact).abs().max() < 1e-5


def test_hf_formula_matches_the_float64_rotation_in_half_layout():
    x = torch.randn(2, 3, 17, 8, generator=torch.Generator().manual_seed(1))
    cos, sin = bench.hf_cos_sin(17, 8)
    assert cos.shape == sin.shape == (17, 8)
    torch.testing.assert_close(bench.hf_rope(x, cos, sin).double(), bench.rope_reference(x, "half"), rtol=0, atol=1e-5)
    assert torch.equal(bench.rotate_half(torch.tensor([1.0, 2.0, 3.0, 4.0])), torch.tensor([-3.0, -4.0, 1.0, 2.0]))


def test_interleaved_and_half_reference_are_a_permutation_of_each_other():
    x = torch.randn(5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    perm = torch.tensor([0, 2, 4, 6, 1, 3, 5, 7])
    torch.testing.assert_close(
        bench.rope_reference(x[..., perm], "half"), bench.rope_reference(x, "interleaved")[..., perm]
    )


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
    rows = bench.bench_rope([(1, 1, 4, 8)], compile=False, **FAST)
    variants = [r["variant"] for r in rows]
    assert len(rows) == 7 and variants[0].startswith("HF eager") and variants[-1] == "clone"
    assert all(tuple(r) == bench.COLUMNS for r in rows)
    for row in rows:
        if measured(row):
            assert row["ratio"] > 0 and row["speedup_vs_hf"] > 0 and row["note"] == ""
        else:
            assert row["note"].startswith("skipped: ")
    compiled = [r for r in rows if r["variant"].startswith("compiled")]
    assert len(compiled) == 3 and not any(measured(r) for r in compiled)
    assert rows[0]["max_abs_error"] < 1e-5 and rows[-1]["ratio"] == 1.0


def test_compile_failure_is_a_skipped_row_not_an_error(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here\nsecond line")

    monkeypatch.setattr(torch, "compile", broken)
    fn, reason = bench.try_compile(bench.hf_rope, torch.ones(1, 4), torch.ones(1, 4), torch.ones(1, 4))
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
    assert all(t["met"] in (True, False, None) for t in targets)
    assert all(t["met"] is None for t in bench.check_targets(rows, size_sin="1x2", size_rope="1x1x1x2"))
    text = bench.format_table(rows)
    assert "pe_lessons sinusoidal_table" in text and "HF eager" in text and "ratio = time / clone" in text


def test_main_quick_runs_and_prints(capsys):
    assert bench.main(["--quick", "--device", "cpu", "--compile", "off", "--keep-memory", "--stat", "min"]) == 0
    out = capsys.readouterr().out
    assert "sinusoidal on cpu" in out and "rope on cpu" in out and "total" in out and "allocator:" in out
    assert isinstance(bench.keep_freed_memory(), bool)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: bench.measure({"f": lambda: None}, rounds=0), ValueError),
        (lambda: bench.measure({"f": lambda: None}, min_run_time=0), ValueError),
        (lambda: bench.measure({"f": lambda: None}, threads=0), ValueError),
        (lambda: bench.bench_rope([(1, 4, 8)], **FAST), ValueError),
        (lambda: bench.bench_rope([(1, 1, 4, 7)], **FAST), ValueError),
        (lambda: bench.bench_rope([(1, 1, 4, 8)], compile="yes", **FAST), TypeError),
        (lambda: bench.bench_sinusoidal([(0, 4)], **FAST), ValueError),
        (lambda: bench.bench_sinusoidal([(4, 3)], **FAST), ValueError),
        (lambda: bench.rope_reference(torch.ones(2, 4), "rotated"), ValueError),
        (lambda: bench.rope_reference(torch.ones(2, 4, dtype=torch.int64)), TypeError),
        (lambda: bench.measure({"f": lambda: None}, device=3), TypeError),
        (lambda: bench.measure({"f": lambda: None}, stat="mean"), ValueError),
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
        lambda: bench.textbook_table(4, 8, device="cuda"),
        lambda: bench.float64_angles_table(4, 8, device="cuda"),
        lambda: bench.hf_cos_sin(4, 8, device="cuda"),
        lambda: bench.measure({"f": lambda: None}, device="cuda"),
    ):
        with pytest.raises(ValueError, match="device='cuda' asks for a GPU"):
            call()


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: bench.loop_table(10**9, 64), "max_len × d_model.*Python lists"),
        (lambda: bench.textbook_table(10**9, 512), "max_len × d_model"),
        (lambda: bench.float64_angles_table(10**9, 512), "max_len × d_model"),
        (lambda: bench.hf_cos_sin(10**9, 512), "seq_len × head_dim"),
        (lambda: bench.bench_sinusoidal([(10**9, 512)], **FAST), "sizes"),
        (lambda: bench.bench_rope([(1000, 1000, 1000, 64)], compile=False, **FAST), "shapes"),
    ],
)
def test_oversized_requests_are_refused_before_allocating(call, words):
    with pytest.raises(ValueError, match=words):
        call()


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0, 0])
def test_measure_refuses_a_budget_that_is_not_finite_and_positive(bad):
    with pytest.raises(ValueError, match="min_run_time"):
        bench.measure({"f": lambda: None}, min_run_time=bad)


@pytest.mark.parametrize("bad", [True, "0.1", None])
def test_measure_refuses_a_budget_that_is_not_a_number(bad):
    with pytest.raises(TypeError, match="min_run_time"):
        bench.measure({"f": lambda: None}, min_run_time=bad)


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
    assert {r["size"] for r in rows} == {"16x4", "1x1x4x8"}


def test_trace_ops_counts_the_five_kernels_and_ten_n_elements_of_the_eager_formula():
    x = torch.randn(2, 3, 16, 8)
    cos, sin = bench.hf_cos_sin(16, 8)
    ops = bench.trace_ops(bench.hf_rope, x, cos, sin)
    assert [o["op"] for o in ops if o["kernel"]] == ["mul", "neg", "cat", "mul", "add"]
    assert [o["op"] for o in ops if not o["kernel"]] == ["chunk"]
    n, t = x.numel(), cos.numel()
    assert sum(o["read_bytes"] + o["write_bytes"] for o in ops) == 4 * (10 * n + 2 * t)


def test_trace_ops_sees_out_in_place_setitem_and_allocations():
    x, y = torch.ones(4, 6), torch.ones(4, 6)
    out = torch.empty(4, 6)

    def fn(a, b):
        buf = torch.empty_like(a)
        torch.mul(a, b, out=out)
        out.add_(a)
        buf[:, :3] = a[:, :3]
        return a.view(-1)

    ops = {o["op"]: o for o in bench.trace_ops(fn, x, y)}
    assert not ops["empty_like"]["kernel"] and not ops["view"]["kernel"]
    assert ops["mul"]["kernel"] and ops["mul"]["read_bytes"] == 2 * 96 and ops["mul"]["write_bytes"] == 96
    assert ops["add_"]["kernel"] and ops["add_"]["read_bytes"] == 2 * 96 and ops["add_"]["write_bytes"] == 96
    assert ops["setitem"]["kernel"] and ops["setitem"]["write_bytes"] == 48
    with pytest.raises(TypeError):
        bench.trace_ops(3)


def test_trace_ops_does_not_count_the_overwritten_target_of_copy_as_read():
    src, dst = torch.ones(4, 6, dtype=torch.bfloat16), torch.empty(4, 6)
    (copy,) = [o for o in bench.trace_ops(lambda: dst.copy_(src)) if o["kernel"]]
    assert copy["op"] == "copy_" and copy["read_bytes"] == 24 * 2 and copy["write_bytes"] == 24 * 4
    (fill,) = [o for o in bench.trace_ops(lambda: dst.fill_(1.0)) if o["kernel"]]
    assert fill["read_bytes"] == 0 and fill["write_bytes"] == 24 * 4


def _target_rows(sin_ratio, sin_error, inter_ratio, half_ratio, compiled_half_ratio, inter_speedup, half_speedup):
    def row(suite, size, variant, **values):
        return bench._row(suite, torch.device("cpu"), 1, size, variant, **values)

    return [
        row("sinusoidal", "65536x64", "pe_lessons sinusoidal_table", ratio=sin_ratio, max_abs_error=sin_error),
        row("rope", "4x8x1024x64", "apply_rope interleaved", ratio=inter_ratio, speedup_vs_hf=inter_speedup),
        row("rope", "4x8x1024x64", "apply_rope half", ratio=half_ratio, speedup_vs_hf=half_speedup),
        row("rope", "4x8x1024x64", "compiled apply_rope half", ratio=compiled_half_ratio),
    ]


def test_check_targets_judges_each_limit_in_the_right_direction():
    met = bench.check_targets(_target_rows(1.9, 4e-7, 1.9, 2.9, 2.9, 1.6, 1.6))
    assert [t["met"] for t in met] == [True] * len(bench.TARGETS)
    missed = bench.check_targets(_target_rows(2.1, 6e-7, 2.1, 3.1, 3.2, 1.4, 1.4))
    assert [t["met"] for t in missed] == [False] * len(bench.TARGETS)
    assert [t["measured"] for t in missed] == [2.1, 6e-7, 2.1, 3.1, 3.2, 1.4, 1.4]
    # eager and compiled half layout are judged separately
    mixed = {t["target"]: t["met"] for t in bench.check_targets(_target_rows(1.9, 4e-7, 1.9, 3.2, 1.9, 1.6, 1.6))}
    assert (
        mixed["apply_rope half ≤ 3× clone (eager)"] is False
        and mixed["apply_rope half ≤ 3× clone (torch.compile)"] is True
    )


def test_gbps_is_the_compulsory_bytes_over_the_median_time():
    rows = bench.bench_sinusoidal([(32, 8)], **FAST) + bench.bench_rope([(1, 2, 8, 8)], compile=False, **FAST)
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


def test_trace_ops_sees_augmented_assignment_and_unary_invert_as_kernels():
    x, y = torch.ones(3, 4), torch.ones(3, 4)
    flags = torch.ones(3, 4, dtype=torch.bool)

    def fn(a, b, m):
        a += b
        return ~m

    ops = bench.trace_ops(fn, x, y, flags)
    assert [o["op"] for o in ops] == ["add_", "invert"]  # x += y reaches torch as add_
    assert all(o["kernel"] for o in ops)
    assert ops[1]["read_bytes"] == ops[1]["write_bytes"] == 12


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no GPU is present")
def test_main_device_cuda_without_a_gpu_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--device", "cuda"])
    assert exit_info.value.code == 2 and "no CUDA GPU" in capsys.readouterr().err


def test_measure_min_is_the_best_round_and_never_above_the_median(monkeypatch):
    per_call = iter([3e-3, 1e-3, 2e-3] * 2)  # the three rounds of one function, seen twice

    class FakeTimer:
        def __init__(self, *args, **kwargs):
            pass

        def blocked_autorange(self, min_run_time):
            return type("M", (), {"median": next(per_call)})()

    monkeypatch.setattr(timing, "Timer", FakeTimer)
    assert bench.measure({"f": lambda: None}, rounds=3, stat="median") == {"f": 2e-3}
    assert bench.measure({"f": lambda: None}, rounds=3, stat="min") == {"f": 1e-3}
