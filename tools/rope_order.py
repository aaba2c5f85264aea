"""The two measurements behind the eager half-layout RoPE's design, rerun on this machine.

1. **Kernel order** (``pe_lessons._rope_fast._turn_halves``): the three kernels of a run in the
   order the package uses (cos terms first: ``x·[cos | cos]`` over the whole run, then a
   multiply-add into each half) against the other order (sin terms into the halves, then one
   multiply-add), in float32, bfloat16 and float16, same process, rounds interleaved. Then the
   intervention: one run already in the cache, repeated, float32 (which order is cheaper when
   nothing comes from memory).
2. **Run size** (``pe_lessons._rope_fast.CHUNK_ELEMENTS_PER_THREAD``): float32 half, elements per
   thread per run from 32K to 256K.

Ratios are time / ``clone`` of the same tensor, each the best of ``--rounds`` blocks of 30 calls,
wall clock (not the bench's statistic: ``python -m pe_lessons.bench`` takes torch.utils.benchmark
medians). Only meaningful on an otherwise idle machine::

    python tools/rope_order.py --threads 2
    python tools/rope_order.py --threads 1 --sizes
"""

from __future__ import annotations

import argparse
import time

import torch

import pe_lessons._rope_fast as rf
from pe_lessons.rotary import rope_frequencies

SHAPE = (4, 8, 1024, 64)


def best_time(fn, n: int = 30, reps: int = 5) -> float:
    """Seconds per call: the best of ``reps`` blocks of ``n`` calls, after 3 warm-up calls."""
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


def sin_first(x, a, b, out, out_a, out_b, multiplier, neg_sin, sin) -> None:
    """The other order: the sin terms into the halves, then one multiply-add over the whole."""
    torch.mul(b, neg_sin, out=out_a)
    torch.mul(a, sin, out=out_b)
    out.addcmul_(x, multiplier)


def tables(seq: int, head_dim: int) -> tuple[torch.Tensor, ...]:
    cos, sin = rf.cos_sin(torch.arange(seq), rope_frequencies(head_dim), 1.0, torch.device("cpu"), torch.float32)
    return rf.layout_tables(cos, sin, "half")


def kernel_order(rounds: int) -> None:
    half = tables(SHAPE[-2], SHAPE[-1])
    orders = {"cos first (the package)": rf._turn_halves, "sin first": sin_first}
    kept = rf._turn_halves
    print(
        f"kernel order, x {'x'.join(map(str, SHAPE))}, {torch.get_num_threads()} thread(s), ratio to clone, "
        f"lowest-highest over {rounds} rounds"
    )
    try:
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0)).to(dtype)
            ratios: dict[str, list[float]] = {name: [] for name in orders}
            for _ in range(rounds):
                base = best_time(x.clone)
                for name, kernel in orders.items():
                    rf._turn_halves = kernel
                    ratios[name].append(best_time(lambda x=x: rf.rotate(x, half, "half", False)) / base)
            print(f"  {str(dtype)[6:]:<9} " + "   ".join(f"{n} {min(r):.2f}-{max(r):.2f}" for n, r in ratios.items()))
    finally:
        rf._turn_halves = kept
    # the intervention: one run's elements, already in the cache, the three kernels only, repeated
    positions = rf.CHUNK_ELEMENTS_PER_THREAD * torch.get_num_threads() // (SHAPE[0] * SHAPE[1] * SHAPE[-1])
    x = torch.randn(SHAPE[0], SHAPE[1], positions, SHAPE[-1], generator=torch.Generator().manual_seed(0))
    out = torch.empty_like(x)
    views = (*rf._kernel_views(x, "half"), *rf._kernel_views(out, "half"), *(t[:positions] for t in half))
    ratios = {name: [] for name in orders}
    for _ in range(rounds):
        base = best_time(x.clone, n=200)
        for name, kernel in orders.items():
            ratios[name].append(best_time(lambda kernel=kernel: kernel(*views), n=200) / base)
    print(
        f"  float32   one run in the cache ({x.numel()} elements; ratio to clone of the run, also in the cache) "
        + "   ".join(f"{n} {min(r):.2f}-{max(r):.2f}" for n, r in ratios.items())
    )


def run_sizes(rounds: int) -> None:
    half = tables(SHAPE[-2], SHAPE[-1])
    x = torch.randn(SHAPE, generator=torch.Generator().manual_seed(0))
    sizes = (1 << 15, 1 << 16, 96 * 1024, 1 << 17, 192 * 1024, 1 << 18)
    kept = rf.CHUNK_ELEMENTS_PER_THREAD
    ratios: dict[int, list[float]] = {k: [] for k in sizes}
    try:
        for _ in range(rounds):
            base = best_time(x.clone)
            for k in sizes:
                rf.CHUNK_ELEMENTS_PER_THREAD = k
                ratios[k].append(best_time(lambda: rf.rotate(x, half, "half", False)) / base)
    finally:
        rf.CHUNK_ELEMENTS_PER_THREAD = kept
    print(f"run size, float32 half, {torch.get_num_threads()} thread(s), ratio to clone, lowest-highest:")
    for k, r in ratios.items():
        print(f"  {k // 1024:>4}K elements per thread  {min(r):.2f}-{max(r):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", action="store_true", help="also the run-size sweep")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kernel_order(args.rounds)
    if args.sizes:
        run_sizes(args.rounds)


if __name__ == "__main__":
    main()
