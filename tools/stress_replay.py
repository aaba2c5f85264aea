#!/usr/bin/env python3
"""Replay notebooks strictly, several times, at several thread counts, on a deliberately busy machine.

    python3 tools/stress_replay.py notebooks/08_performance.ipynb --runs 5 --threads 1 2

For each thread count, a busy-loop process (``python3 -c "while True: pass"``) keeps one
core busy while ``course.py test`` replays the given notebooks ``--runs`` times in a row with
``OMP_NUM_THREADS`` set; the busy process is stopped afterwards (by its own pid). Timing
checks in the notebooks must pass every run: one failure is a flaky check. Prints one line
per run and a summary; the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def replay(notebooks: list[str], threads: int) -> tuple[bool, float, str]:
    """One strict replay of ``notebooks`` with OMP_NUM_THREADS=threads: (passed, seconds, last lines)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "course.py"), "test", *notebooks, "-q"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    return done.returncode == 0, time.perf_counter() - start, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+", help="notebooks to replay")
    parser.add_argument("--runs", type=int, default=5, help="replays per thread count (default 5)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="OMP_NUM_THREADS values (default 1 2)")
    parser.add_argument("--no-busy", action="store_true", help="do not start the busy-loop process")
    args = parser.parse_args(argv)
    if args.runs < 1 or any(t < 1 for t in args.threads):
        parser.error("--runs and --threads must be positive")
    results = []
    for threads in args.threads:
        busy = None if args.no_busy else subprocess.Popen([sys.executable, "-c", "while True: pass"])
        try:
            for run in range(1, args.runs + 1):
                ok, seconds, tail = replay(args.notebooks, threads)
                results.append((threads, run, ok))
                print(
                    f"threads={threads} run {run}/{args.runs}: {'passed' if ok else 'FAILED'} in {seconds:.0f} s"
                    f"{'' if busy is None else ' (one core kept busy)'}",
                    flush=True,
                )
                if not ok:
                    print(tail, flush=True)
        finally:
            if busy is not None:
                busy.terminate()
                busy.wait()
    failed = [(t, r) for t, r, ok in results if not ok]
    print(
        f"{len(results) - len(failed)} of {len(results)} replays passed"
        + (f"; failed: {', '.join(f'threads={t} run {r}' for t, r in failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
