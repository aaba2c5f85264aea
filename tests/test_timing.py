"""pe_lessons.timing: measure's arguments and statistics (no timed assertions), try_compile's failures."""

import pytest
import torch

from pe_lessons import timing
from pe_lessons.baselines import hf_rope
from pe_lessons.timing import measure, try_compile


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: measure({"f": lambda: None}, rounds=0), ValueError),
        (lambda: measure({"f": lambda: None}, min_run_time=0), ValueError),
        (lambda: measure({"f": lambda: None}, threads=0), ValueError),
        (lambda: measure({"f": lambda: None}, device=3), TypeError),
        (lambda: measure({"f": lambda: None}, stat="mean"), ValueError),
    ],
)
def test_bad_arguments_are_named(call, error):
    with pytest.raises(error):
        call()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no GPU is present")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="device='cuda' asks for a GPU"):
        measure({"f": lambda: None}, device="cuda")


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), -1.0, 0])
def test_measure_refuses_a_budget_that_is_not_finite_and_positive(bad):
    with pytest.raises(ValueError, match="min_run_time"):
        measure({"f": lambda: None}, min_run_time=bad)


@pytest.mark.parametrize("bad", [True, "0.1", None])
def test_measure_refuses_a_budget_that_is_not_a_number(bad):
    with pytest.raises(TypeError, match="min_run_time"):
        measure({"f": lambda: None}, min_run_time=bad)


def test_measure_min_is_the_best_round_and_never_above_the_median(monkeypatch):
    per_call = iter([3e-3, 1e-3, 2e-3] * 2)  # the three rounds of one function, seen twice

    class FakeTimer:
        def __init__(self, *args, **kwargs):
            pass

        def blocked_autorange(self, min_run_time):
            return type("M", (), {"median": next(per_call)})()

    monkeypatch.setattr(timing, "Timer", FakeTimer)
    assert measure({"f": lambda: None}, rounds=3, stat="median") == {"f": 2e-3}
    assert measure({"f": lambda: None}, rounds=3, stat="min") == {"f": 1e-3}


def test_try_compile_says_why_it_could_not(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler here\nsecond line")

    monkeypatch.setattr(torch, "compile", broken)
    fn, reason = try_compile(hf_rope, torch.ones(1, 4), torch.ones(1, 4), torch.ones(1, 4))
    assert fn is None and reason == "torch.compile failed: RuntimeError: no compiler here"


def test_cpu_clock_counts_this_process_only_and_needs_one_thread():
    """clock="cpu": a sleeping function costs (almost) nothing, a busy one its work; refused with 2 threads."""
    import time

    def busy():
        end = time.perf_counter() + 2e-3
        while time.perf_counter() < end:
            pass

    times = measure({"sleep": lambda: time.sleep(2e-3), "busy": busy}, threads=1, clock="cpu", min_run_time=0.02)
    assert times["sleep"] < 0.5e-3 < 1e-3 < times["busy"]
    with pytest.raises(ValueError, match="threads=1"):
        measure({"f": lambda: None}, threads=2, clock="cpu")
    with pytest.raises(ValueError, match="clock"):
        measure({"f": lambda: None}, clock="gpu")


def test_a_coarse_process_clock_falls_back_to_the_wall_clock(monkeypatch):
    """Windows' process clock ticks every 15.6 ms: measure(clock="cpu") must not time a short block as zero."""
    import time

    from pe_lessons import timing

    def coarse():  # a process clock with 15.625 ms ticks
        return (time.perf_counter() // 0.015625) * 0.015625

    assert timing.clock_step(coarse, spin=0.1) >= 0.0156 and timing.clock_step(time.perf_counter) < 1e-4
    monkeypatch.setattr(timing.time, "process_time", coarse)
    monkeypatch.setattr(timing, "_process_clock_step", None)
    x = torch.randn(1 << 16)
    t = measure({"clone": x.clone}, threads=1, clock="cpu", min_run_time=0.01, rounds=2)["clone"]
    assert 1e-7 < t < 1e-2  # a real time per call, not 0 or 1e-10
    monkeypatch.setattr(timing, "_process_clock_step", None)  # measured again with the real clock next time
