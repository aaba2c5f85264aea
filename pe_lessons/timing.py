"""Timing done honestly: warm-up, explicit threads, interleaved rounds, GPU synchronisation.

:func:`measure` times zero-argument functions with :class:`torch.utils.benchmark.Timer`;
:func:`try_compile` compiles a function once, outside any timing, or says why it could not.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.benchmark import Timer

from ._checks import check_choice, check_device, check_int, check_real

__all__ = ["measure", "try_compile", "check_timing_device", "thread_count"]


def check_timing_device(device: torch.device | str) -> torch.device:
    """A device with data to time: ``check_device``'s, but neither ``None`` (say which) nor ``meta``."""
    if device is None:
        raise TypeError("device must be a torch.device or a string such as 'cpu' or 'cuda', got None")
    device = check_device(device)
    if device.type == "meta":
        raise ValueError("device='meta' holds no data: nothing can be timed there; use 'cpu' or 'cuda'")
    return device


def thread_count(threads: int | None) -> int:
    """``threads`` checked (an integer >= 1), or torch's current thread count for ``None``."""
    return torch.get_num_threads() if threads is None else check_int("threads", threads, minimum=1)


#: The CPU-time clock is used only where it ticks at least this finely (seconds); Windows' process clock
#: ticks every 15.6 ms, too coarse for blocks of a few milliseconds.
FINE_CLOCK_STEP = 1e-4


def clock_step(clock: Callable[[], float] = time.process_time, spin: float = 0.05) -> float:
    """The smallest step the reading of ``clock`` was seen to take, spinning up to ``spin`` seconds of wall time
    (``inf`` if it never changed): the resolution a clock really has, whatever it reports."""
    step = float("inf")
    start = time.perf_counter()
    last = clock()
    changes = 0
    while time.perf_counter() - start < spin and changes < 5:
        now = clock()
        if now != last:
            step, last, changes = min(step, now - last), now, changes + 1
    return step


_process_clock_step: float | None = None


def process_clock_is_fine() -> bool:
    """Whether ``time.process_time`` ticks finely enough (:data:`FINE_CLOCK_STEP`) to time a block; checked once."""
    global _process_clock_step
    if _process_clock_step is None:
        _process_clock_step = clock_step(time.process_time)
    return _process_clock_step <= FINE_CLOCK_STEP


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timer(device: torch.device) -> Callable[[], float]:
    """Wall clock that first waits for the GPU, so a timed block includes its kernels."""
    if device.type != "cuda":
        return time.perf_counter

    def synced() -> float:
        torch.cuda.synchronize(device)
        return time.perf_counter()

    return synced


def measure(
    fns: dict[str, Callable[[], object]],
    *,
    device: torch.device | str = "cpu",
    threads: int | None = None,
    min_run_time: float = 0.1,
    rounds: int = 3,
    warmup: int = 2,
    stat: str = "median",
    clock: str = "wall",
) -> dict[str, float]:
    """Median seconds per call of each zero-argument function in ``fns``.

    Each function is called ``warmup`` times first (lazy allocation, caches, CUDA
    context), then timed by ``torch.utils.benchmark.Timer(num_threads=threads)``
    with ``blocked_autorange(min_run_time)`` in ``rounds`` interleaved rounds; the
    result is the median of the per-round medians (``stat="median"``), or their minimum
    (``stat="min"``: the least disturbed round — other work on a shared machine only ever
    adds time, so the best round is the steadier basis for comparing two operations).

    ``clock="cpu"`` times the CPU time of this process instead of the wall clock: on a machine
    shared with other work it does not count the time spent waiting for a core. It needs
    ``threads=1`` (with more threads it would add up their busy-waiting) and a CPU device. Where the
    process clock is coarse (Windows: 15.6 ms ticks, see :func:`process_clock_is_fine`) the wall clock
    is used instead, since a coarse clock would time a short block as zero.
    """
    device = check_timing_device(device)
    threads = thread_count(threads)
    clock = check_choice("clock", clock, ("wall", "cpu"))
    if clock == "cpu" and (threads != 1 or device.type != "cpu"):
        raise ValueError(
            f'clock="cpu" measures one CPU thread: it needs threads=1 and a CPU device, got threads={threads}'
        )
    rounds = check_int("rounds", rounds, minimum=1)
    warmup = check_int("warmup", warmup, minimum=0)
    stat = check_choice("stat", stat, ("median", "min"))
    min_run_time = check_real("min_run_time", min_run_time, above=0.0, hint="seconds")
    if not isinstance(fns, dict) or not all(callable(fn) for fn in fns.values()):
        raise TypeError("fns must be a dict {name: zero-argument function}")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for fn in fns.values():
            for _ in range(warmup):
                fn()
            _sync(device)
    finally:
        torch.set_num_threads(previous)
    per_round: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            tick = time.process_time if clock == "cpu" and process_clock_is_fine() else _timer(device)
            timer = Timer("fn()", globals={"fn": fn}, num_threads=threads, timer=tick, label=name)
            per_round[name].append(timer.blocked_autorange(min_run_time=min_run_time).median)
    reduce = statistics.median if stat == "median" else min
    return {name: reduce(times) for name, times in per_round.items()}


def try_compile(
    fn: Callable[..., torch.Tensor], *example_args: object
) -> tuple[Callable[..., torch.Tensor] | None, str]:
    """``torch.compile(fn)`` and one call on ``example_args``; ``(None, reason)`` if either fails.

    The first call is where compilation happens (seconds to tens of seconds on a CPU,
    where Inductor generates and builds C++), so it stays out of any timing.
    """
    if not hasattr(torch, "compile"):
        return None, f"torch {torch.__version__} has no torch.compile"
    try:
        compiled = torch.compile(fn, dynamic=False)
        compiled(*example_args)
    except Exception as err:  # no C++ compiler, no Triton, unsupported platform, …
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return None, f"torch.compile failed: {type(err).__name__}: {first[:120]}"
    return compiled, ""
