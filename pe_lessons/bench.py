r"""Benchmarks of the sinusoidal table and of rotary embedding, measured honestly.

Run ``python -m pe_lessons.bench`` (``--help`` for options). Every measurement
uses :class:`torch.utils.benchmark.Timer` with an explicit thread count, a
warm-up before timing, and CUDA synchronisation around each timed block on a
GPU. A case is timed in ``rounds`` interleaved rounds (all cases once, then all
again, …) and reported as the median of the per-round medians, so a burst of
other work on a shared machine hits every case alike (``--stat min`` keeps the
best round instead: steadier when the machine is busy).

Each row gives the median time, a **ratio** to the suite's baseline
(``torch.sin`` over a float32 tensor of the table's size for the sinusoidal
suite, ``x.clone()`` for the rotary suite) and an effective bandwidth

.. math::

    \text{GB/s} = \frac{\text{compulsory bytes}}{\text{median time}}

where the compulsory bytes are the bytes an ideal kernel must touch once:
a table of ``N`` float32 values is written (``4N`` bytes); ``torch.sin`` and
``clone`` read and write ``N`` values (``8N``); rotary embedding reads ``x`` and
writes a tensor of the same size (``8N``; its small cos/sin tables are not
counted). A kernel that moves more than the minimum (intermediates, several
passes) shows a lower GB/s than ``clone``, the memory-bandwidth ceiling.

The rotary suite runs in float32, bfloat16 and float16 (a ``clone`` of the same tensor in each),
counts the **kernels** each variant launches and its **traffic** — bytes moved over the
compulsory bytes, as :func:`pe_lessons.optrace.trace_ops` counts them for eager code (the cos/sin
tables included) — and times one decoding step (a single position per call) against Hugging
Face's. :data:`TARGETS` names each target; :func:`check_targets` judges them. ``--clock cpu``
(with ``--threads 1``) times this process's CPU time: on a machine busy with other work, the
time spent waiting for a core is not counted.

The measuring functions return lists of plain dicts (one per row, the keys of
:data:`COLUMNS`); only :func:`main` prints.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from ._checks import check_bool, check_d_model, check_fits, check_int
from .baselines import (
    float64_angles_table,
    hf_cos_sin,
    hf_inv_freq,
    hf_rope,
    hf_rope_step,
    loop_table,
    rope_reference,
    textbook_table,
)
from .optrace import trace_ops
from .rotary import apply_rope
from .sinusoidal import sinusoidal_table
from .timing import check_timing_device, measure, thread_count, try_compile

__all__ = [
    "COLUMNS",
    "SIN_SIZES",
    "SIN_SIZES_QUICK",
    "ROPE_SHAPES",
    "ROPE_SHAPES_QUICK",
    "SIN_SIZES_CUDA",
    "ROPE_SHAPES_CUDA",
    "default_sizes",
    "ROPE_DTYPES",
    "DECODE_POSITION",
    "TARGETS",
    "bench_sinusoidal",
    "bench_rope",
    "check_targets",
    "decode_summary",
    "cpu_name",
    "keep_freed_memory",
    "format_table",
    "main",
]

#: Keys of every result row.
COLUMNS = (
    "suite",
    "device",
    "threads",
    "dtype",
    "size",
    "variant",
    "median_ms",
    "baseline",
    "ratio",
    "gbps",
    "speedup_vs_hf",
    "kernels",
    "traffic",
    "max_abs_error",
    "note",
)
#: Sinusoidal tables ``(max_len, d_model)``: a small size and a large one (16 MiB as float32).
SIN_SIZES = ((256, 64), (65536, 64))
SIN_SIZES_QUICK = ((64, 16), (1024, 64))
#: Rotary inputs ``[batch, heads, seq, head_dim]``: a small shape and a large one (8 MiB as float32).
ROPE_SHAPES = ((1, 8, 128, 64), (4, 8, 1024, 64))
ROPE_SHAPES_QUICK = ((1, 2, 16, 8), (2, 4, 128, 64))
#: On a GPU the large sizes must not fit in its L2 cache (50 MiB on an H100, 40 MiB on an A100),
#: or ``clone`` measures the cache, not memory: a 256 MiB table and a 512 MiB rotary input
#: (notebook 08's ``[8, 32, 4096, 128]``), next to the small sizes.
SIN_SIZES_CUDA = ((256, 64), (1 << 20, 64))
ROPE_SHAPES_CUDA = ((1, 8, 128, 64), (8, 32, 4096, 128))
#: The Python loop is timed only up to this many table cells; larger sizes are extrapolated.
LOOP_MAX_CELLS = 256 * 64

#: The dtypes the rotary suite measures, each against a ``clone`` of a tensor in that dtype.
ROPE_DTYPES = ("float32", "bfloat16", "float16")
#: The position of the decoding step the rotary suite times (one position per call).
DECODE_POSITION = 1000


def _rope_targets() -> tuple:
    targets = [
        ("rope", "float32", "apply_rope interleaved", "ratio", "<=", 1.5, "eager interleaved ≤ 1.5× clone"),
        ("rope", "float32", "apply_rope half", "ratio", "<=", 2.5, "eager half ≤ 2.5× clone"),
        ("rope", "float32", "apply_rope interleaved", "speedup_vs_hf", ">=", 1.5, "eager interleaved ≥ 1.5× HF eager"),
        ("rope", "float32", "apply_rope half", "speedup_vs_hf", ">=", 1.5, "eager half ≥ 1.5× HF eager"),
    ]
    for dtype, limit in (("float32", 1.5), ("bfloat16", 2.5), ("float16", 2.5)):
        for layout in ("interleaved", "half"):
            variant = f"compiled apply_rope {layout}"
            targets.append(("rope", dtype, variant, "ratio", "<=", limit, f"compiled {layout} ≤ {limit:g}× clone"))
            targets.append(("rope", dtype, variant, "kernels", "<=", 1, f"compiled {layout}: one fused kernel"))
    for dtype in ("bfloat16", "float16"):
        for layout in ("interleaved", "half"):
            variant = f"apply_rope {layout}"
            targets.append(("rope", dtype, variant, "speedup_vs_hf", ">=", 1.0, f"eager {layout} not slower than HF"))
            targets.append(("rope", dtype, variant, "traffic_vs_hf", "<=", 1.0, f"eager {layout} traffic ≤ HF eager's"))
    return tuple(targets)


#: Performance targets on a CPU (large sizes), checked by :func:`check_targets`:
#: ``(suite, dtype, variant, measure, "<=" or ">=", limit, description)``.
TARGETS = (
    ("sinusoidal", "float32", "pe_lessons sinusoidal_table", "ratio", "<=", 2.0, "sinusoidal_table ≤ 2× torch.sin"),
    (
        "sinusoidal",
        "float32",
        "pe_lessons sinusoidal_table",
        "max_abs_error",
        "<=",
        5e-7,
        "sinusoidal_table error ≤ 5e-7",
    ),
) + _rope_targets()

_NAN = float("nan")


def default_sizes(device: torch.device | str = "cpu", *, quick: bool = False) -> tuple[tuple, tuple]:
    """``(sinusoidal sizes, rotary shapes)`` for ``device``: :data:`SIN_SIZES`/:data:`ROPE_SHAPES` on a CPU,
    :data:`SIN_SIZES_CUDA`/:data:`ROPE_SHAPES_CUDA` on a GPU (sizes far above its L2 cache), the tiny
    ``*_QUICK`` sizes with ``quick=True``. Only the device's type matters: nothing runs there."""
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"device must name a device such as 'cpu' or 'cuda', got {device!r}") from err
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device or a string, got {type(device).__name__}")
    check_bool("quick", quick)
    if quick:
        return SIN_SIZES_QUICK, ROPE_SHAPES_QUICK
    if device.type == "cpu":
        return SIN_SIZES, ROPE_SHAPES
    return SIN_SIZES_CUDA, ROPE_SHAPES_CUDA


def _row(suite: str, device: torch.device, threads: int, size: str, variant: str, **values: object) -> dict:
    row: dict[str, object] = dict.fromkeys(COLUMNS, _NAN)
    row.update(suite=suite, device=str(device), threads=threads, size=size, variant=variant, baseline="", note="")
    row["dtype"] = "float32"
    row.update(values)
    return row


def _finish(rows: list[dict], baseline: str, times: dict[str, float], nbytes: dict[str, int]) -> None:
    """Fill ``median_ms``, ``ratio`` and ``gbps`` of measured rows from ``times`` (seconds)."""
    base_time = times[baseline]
    for row in rows:
        t = times.get(row["variant"], _NAN)
        row["baseline"] = baseline
        if math.isnan(t):
            continue
        row["median_ms"] = t * 1e3
        row["ratio"] = t / base_time
        row["gbps"] = nbytes[row["variant"]] / t / 1e9


def bench_sinusoidal(
    sizes: Iterable[tuple[int, int]] | None = None,
    *,
    device: torch.device | str = "cpu",
    threads: int | None = None,
    min_run_time: float = 0.1,
    rounds: int = 3,
    stat: str = "median",
    loop_max_cells: int = LOOP_MAX_CELLS,
    clock: str = "wall",
) -> list[dict]:
    """Time the ways of building a float32 sinusoidal table, with their accuracy.

    ``sizes`` defaults to :func:`default_sizes` of ``device`` (on a GPU, a large table of 256 MiB,
    far above the L2 cache, so the GB/s column measures memory, not the cache).

    Variants per ``(max_len, d_model)``: the Python loop (timed on the CPU for tables of
    at most ``loop_max_cells`` cells, otherwise extrapolated linearly in the number of
    cells from the largest timed size — the ``note`` says so), the textbook float32-angle
    code, float64 angles, ``pe_lessons.sinusoidal_table``, and the baselines
    ``torch.sin`` and ``clone`` over a float32 tensor of the same size. ``ratio`` is
    time / time of ``torch.sin``; ``max_abs_error`` is against the float64 table.
    """
    device = check_timing_device(device)
    threads = thread_count(threads)
    if sizes is None:
        sizes = default_sizes(device)[0]
    sizes = [(check_int("max_len", n, minimum=1), check_d_model(d)) for n, d in sizes]
    for n, d in sizes:  # the float64 reference table is the largest tensor a size needs
        check_fits("sizes", (n, d), torch.float64, what=f"the float64 reference of the {n}x{d} table")
    gen = torch.Generator().manual_seed(0)
    rows: list[dict] = []
    loop_per_cell: tuple[float, str] | None = None
    for max_len, d_model in sorted(sizes, key=lambda s: s[0] * s[1]):
        size = f"{max_len}x{d_model}"
        cells = max_len * d_model
        x = torch.rand(max_len, d_model, generator=gen).to(device)
        builders: dict[str, Callable[[], torch.Tensor]] = {
            "textbook (float32 angles)": functools.partial(textbook_table, max_len, d_model, device=device),
            "float64 angles": functools.partial(float64_angles_table, max_len, d_model, device=device),
            "pe_lessons sinusoidal_table": functools.partial(sinusoidal_table, max_len, d_model, device=device),
        }
        fns: dict[str, Callable[[], object]] = {}
        loop_row = _row("sinusoidal", device, threads, size, "python loop")
        if device.type == "cpu" and cells <= loop_max_cells:
            fns["python loop"] = functools.partial(loop_table, max_len, d_model)
        fns.update(builders)
        fns["torch.sin (baseline)"] = functools.partial(torch.sin, x)
        fns["clone"] = x.clone
        times = measure(
            fns, device=device, threads=threads, min_run_time=min_run_time, rounds=rounds, stat=stat, clock=clock
        )
        exact = sinusoidal_table(max_len, d_model, dtype=torch.float64)
        if "python loop" in times:
            loop_per_cell = (times["python loop"] / cells, size)
            loop_row["max_abs_error"] = (loop_table(max_len, d_model).double() - exact).abs().max().item()
        elif device.type != "cpu":
            loop_row["note"] = "skipped: a Python loop runs on the CPU"
        elif loop_per_cell is not None:
            times["python loop"] = loop_per_cell[0] * cells
            loop_row["note"] = f"extrapolated from {loop_per_cell[1]}"
        else:
            loop_row["note"] = f"skipped: over {loop_max_cells} cells and no smaller size timed"
        block = [loop_row]
        for name, build in builders.items():
            error = (build().cpu().double() - exact).abs().max().item()
            block.append(_row("sinusoidal", device, threads, size, name, max_abs_error=error))
        block += [_row("sinusoidal", device, threads, size, name) for name in ("torch.sin (baseline)", "clone")]
        nbytes = {r["variant"]: 4 * cells for r in block}  # a table: N float32 values written
        nbytes["torch.sin (baseline)"] = nbytes["clone"] = 8 * cells  # read N, write N
        _finish(block, "torch.sin (baseline)", times, nbytes)
        rows += block
    return rows


def _dtype(value: object) -> torch.dtype:
    names = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if isinstance(value, torch.dtype) and value in names.values():
        return value
    if isinstance(value, str) and value in names:
        return names[value]
    raise ValueError(f"a rope dtype must be one of {', '.join(names)}, got {value!r}")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _traced(fn: Callable[..., object], args: tuple, compulsory: int) -> tuple[int, float]:
    """``(kernels, traffic)`` of one eager call: kernel launches and bytes moved / compulsory bytes (:func:`trace_ops`)."""
    ops = [op for op in trace_ops(fn, *args) if op["kernel"]]
    return len(ops), sum(op["read_bytes"] + op["write_bytes"] for op in ops) / compulsory


def _compiled_kernels(fn: Callable[..., torch.Tensor], args: tuple) -> tuple[Callable | None, str, float]:
    """:func:`try_compile`, and the number of kernels Inductor generated for it (NaN where unknown)."""
    try:
        from torch._inductor import metrics
    except ImportError:  # pragma: no cover - torch without Inductor
        metrics = None  # type: ignore[assignment]
    if metrics is not None:
        metrics.reset()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not support code generation for complex")
        compiled, reason = try_compile(fn, *args)
    kernels = float(metrics.generated_kernel_count) if metrics is not None and compiled is not None else _NAN
    return compiled, reason, kernels


_HF = "HF eager x*cos + rotate_half(x)*sin"
_HF_DECODE = "decode HF eager (cos/sin from position_ids, then the formula)"


def bench_rope(
    shapes: Iterable[Sequence[int]] | None = None,
    *,
    device: torch.device | str = "cpu",
    threads: int | None = None,
    compile: bool = True,
    dtypes: Iterable[object] = ROPE_DTYPES,
    decode: bool = True,
    min_run_time: float = 0.1,
    rounds: int = 3,
    stat: str = "median",
    clock: str = "wall",
) -> list[dict]:
    """Time rotary embedding of ``x`` ``[batch, heads, seq, head_dim]`` at positions ``0 … seq-1``, per dtype.

    ``shapes`` defaults to :func:`default_sizes` of ``device`` (on a GPU, ``[8, 32, 4096, 128]``: 512 MiB);
    ``dtypes`` are among ``"float32"``, ``"bfloat16"``, ``"float16"`` (default all three). Each
    ``(shape, dtype)`` is one block timed together, its baseline ``x.clone()`` of the same tensor.

    Variants: Hugging Face's eager formula with precomputed cos/sin in ``x``'s dtype (as its
    models cast them), ``apply_rope`` in both layouts, their ``torch.compile``'d versions
    (``compile=False`` skips them: on a CPU the first compile with an empty cache takes about
    15 s, later ones a second or two), and the baseline. Skipped variants are rows whose ``note``
    gives the reason. ``ratio`` is time / time of ``clone``; ``speedup_vs_hf`` is HF eager time /
    time; ``max_abs_error`` is against :func:`rope_reference` in float64. ``kernels`` and
    ``traffic`` (bytes moved / the compulsory bytes, reading ``x`` and writing the result once)
    are counted by :func:`trace_ops` for eager variants (tables included; ``kernels`` counts every
    launch, so ``apply_rope``'s runs of positions — a few kernels per run, runs sized per thread —
    each add theirs, at the timing's thread count); for compiled ones
    ``kernels`` is what Inductor generated, and ``traffic`` is given for a single fused kernel
    (it reads ``x`` and the tables once and writes the result once).

    ``decode=True`` adds, per dtype, a decoding step of the largest shape: ``x`` of one position
    ``[batch, heads, 1, head_dim]`` at position :data:`DECODE_POSITION`, ``apply_rope`` with a
    positions tensor against Hugging Face's step (:func:`hf_rope_step`: its cos/sin computed from
    ``position_ids`` on every call, then the formula).
    """
    device = check_timing_device(device)
    threads = thread_count(threads)
    check_bool("compile", compile)
    check_bool("decode", decode)
    checked_dtypes = [_dtype(d) for d in dtypes]
    if shapes is None:
        shapes = default_sizes(device)[1]
    checked = []
    for shape in shapes:
        shape = tuple(check_int("shape", s, minimum=1) for s in shape)
        if len(shape) != 4:
            raise ValueError(f"a rope shape is [batch, heads, seq, head_dim], got {list(shape)}")
        check_d_model(shape[-1], "head_dim")
        check_fits("shapes", shape, torch.float64, what=f"the float64 reference of x {list(shape)}")
        checked.append(shape)
    timing: dict[str, Any] = dict(
        device=device, threads=threads, min_run_time=min_run_time, rounds=rounds, stat=stat, clock=clock
    )
    rows: list[dict] = []
    for shape in checked:
        for dtype in checked_dtypes:
            rows += _rope_block(shape, dtype, device, threads, compile, timing)
    if decode and checked:
        largest = max(checked, key=math.prod)
        for dtype in checked_dtypes:
            rows += _decode_block(largest, dtype, device, threads, timing)
    return rows


def _rope_block(
    shape: tuple, dtype: torch.dtype, device: torch.device, threads: int, compile: bool, timing: dict
) -> list[dict]:
    gen = torch.Generator().manual_seed(0)
    size = "x".join(map(str, shape))
    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    cos, sin = (t.to(dtype) for t in hf_cos_sin(shape[-2], shape[-1], device=device))
    compulsory = 2 * x.numel() * x.element_size()
    pairs = shape[-2] * shape[-1] // 2  # the working-precision (float32) cos and sin tables
    table_bytes = 2 * pairs * 4
    eager: dict[str, tuple[Callable[..., torch.Tensor], tuple, str]] = {
        _HF: (hf_rope, (x, cos, sin), "half"),
        "apply_rope interleaved": (lambda t: apply_rope(t, layout="interleaved"), (x,), "interleaved"),
        "apply_rope half": (lambda t: apply_rope(t, layout="half"), (x,), "half"),
    }
    variants = dict(eager)
    notes: dict[str, str] = {}
    counts: dict[str, tuple[float, float]] = {"clone": (1, 1.0)}
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)  # (apply_rope's eager runs hold a number of elements per thread)
    try:
        for name, (fn, args, _) in eager.items():
            fn(*args)  # eager warm-up: apply_rope's cached tables grow here, not inside a compiled graph
            counts[name] = _traced(fn, args, compulsory)
    finally:
        torch.set_num_threads(previous)
    if compile and hasattr(torch, "compiler"):  # earlier blocks' graphs are done with: no recompile limit reached
        torch.compiler.reset()
    for name, (fn, args, layout) in eager.items():
        cname = f"compiled {name}"
        if not compile:
            notes[cname] = "skipped: compile off"
            continue
        compiled, reason, kernels = _compiled_kernels(fn, args)
        if compiled is None:
            notes[cname] = "skipped: " + reason
            continue
        variants[cname] = (compiled, args, layout)
        hf_tables = cos.numel() * cos.element_size() + sin.numel() * sin.element_size()
        tables = hf_tables if name == _HF else table_bytes
        counts[cname] = (kernels, (compulsory + tables) / compulsory if kernels == 1 else _NAN)
    fns: dict[str, Callable[[], object]] = {
        name: functools.partial(fn, *args) for name, (fn, args, _) in variants.items()
    }
    fns["clone"] = x.clone
    times = measure(fns, **timing)
    order = [_HF, "apply_rope interleaved", "apply_rope half"]
    order += [f"compiled {n}" for n in order] + ["clone"]
    references = {}  # float64, on the device: a GPU-sized x would take seconds per reference on the CPU
    block: list[dict] = []
    for name in order:
        kernels, traffic = counts.get(name, (_NAN, _NAN))
        row = _row("rope", device, threads, size, name, dtype=_dtype_name(dtype), note=notes.get(name, ""))
        row.update(kernels=kernels, traffic=traffic)
        if name in variants:
            fn, args, layout = variants[name]
            if layout not in references:
                references[layout] = rope_reference(x, layout)
            row["max_abs_error"] = (fn(*args).double() - references[layout]).abs().max().item()
        block.append(row)
    references.clear()
    _finish(block, "clone", times, dict.fromkeys(order, compulsory))
    for row in block:
        if row["variant"] in times:
            row["speedup_vs_hf"] = times[_HF] / times[row["variant"]]
    return block


def _decode_block(shape: tuple, dtype: torch.dtype, device: torch.device, threads: int, timing: dict) -> list[dict]:
    batch, heads, _, head_dim = shape
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, heads, 1, head_dim, generator=gen).to(device=device, dtype=dtype)
    size = f"{batch}x{heads}x1x{head_dim} at {DECODE_POSITION}"
    positions = torch.tensor([DECODE_POSITION], device=device)
    position_ids = positions.expand(batch, 1)
    inv_freq = hf_inv_freq(head_dim, device=device)
    compulsory = 2 * x.numel() * x.element_size()
    variants: dict[str, tuple[Callable[..., torch.Tensor], tuple, str]] = {
        _HF_DECODE: (hf_rope_step, (x, position_ids, inv_freq), "half"),
        "decode apply_rope interleaved": (lambda t, p: apply_rope(t, p), (x, positions), "interleaved"),
        "decode apply_rope half": (lambda t, p: apply_rope(t, p, layout="half"), (x, positions), "half"),
    }
    fns: dict[str, Callable[[], object]] = {
        name: functools.partial(fn, *args) for name, (fn, args, _) in variants.items()
    }
    fns["decode clone"] = x.clone
    times = measure(fns, **timing)
    block = []
    for name in [*variants, "decode clone"]:
        row = _row("rope", device, threads, size, name, dtype=_dtype_name(dtype))
        if name in variants:
            fn, args, layout = variants[name]
            row["kernels"] = _traced(fn, args, compulsory)[0]  # (traffic: table lookups dominate one position)
            reference = rope_reference(x, layout, positions=[DECODE_POSITION])
            row["max_abs_error"] = (fn(*args).double() - reference).abs().max().item()
        else:
            row["kernels"] = 1
        block.append(row)
    _finish(block, "decode clone", times, {name: compulsory for name in fns})
    for row in block:
        row["speedup_vs_hf"] = times[_HF_DECODE] / times[row["variant"]]
    return block


# ---------------------------------------------------------------------------------------------
# Targets and printing
# ---------------------------------------------------------------------------------------------


def check_targets(rows: Sequence[dict], size_sin: str = "65536x64", size_rope: str = "4x8x1024x64") -> list[dict]:
    """The CPU performance targets (:data:`TARGETS`) against measured rows.

    One dict per target: ``target`` (its text), ``dtype``, ``size``, ``measured``, ``limit`` and
    ``met`` (``None`` when the row is missing or was skipped: nothing to judge). The measure
    ``traffic_vs_hf`` is a variant's traffic over Hugging Face eager's in the same block.
    """
    out = []
    for suite, dtype, variant, key, op, limit, text in TARGETS:
        size = size_sin if suite == "sinusoidal" else size_rope

        def find(name: str, dtype: str = dtype, size: str = size, suite: str = suite) -> dict | None:
            match = [r for r in rows if (r["suite"], r["variant"], r["size"], r["dtype"]) == (suite, name, size, dtype)]
            return match[0] if match else None

        row = find(variant)
        if key == "traffic_vs_hf":
            hf = find(_HF)
            value = row["traffic"] / hf["traffic"] if row is not None and hf is not None else _NAN
        else:
            value = row[key] if row is not None else _NAN
        if value is None or math.isnan(value):
            met = None
        else:
            met = value >= limit if op == ">=" else value <= limit
        out.append({"target": text, "dtype": dtype, "size": size, "measured": value, "limit": limit, "met": met})
    return out


def decode_summary(rows: Sequence[dict]) -> list[str]:
    """One line per dtype: per-call time of ``apply_rope`` in a decoding step against Hugging Face's."""
    lines = []
    for row in rows:
        if row["variant"].startswith("decode apply_rope") and not math.isnan(row["median_ms"]):
            hf = next(
                r for r in rows if r["variant"] == _HF_DECODE and (r["size"], r["dtype"]) == (row["size"], row["dtype"])
            )
            lines.append(
                f"{row['dtype']:<9} {row['variant'].removeprefix('decode '):<24} {row['median_ms'] * 1e3:7.1f} µs per call, "
                f"HF eager {hf['median_ms'] * 1e3:7.1f} µs: {row['speedup_vs_hf']:.2f}× ({row['device']}, {row['size']})"
            )
    return lines


def _fmt(value: object, kind: str) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "—"
    if kind == "ms":
        return f"{value:.4g}"
    if kind == "x":
        return f"{value:.2f}×"
    if kind == "gbps":
        return f"{value:.1f}"
    if kind == "err":
        return f"{value:.1e}"
    if kind == "int":
        return f"{value:.0f}"
    return str(value)


def format_table(rows: Sequence[dict]) -> str:
    """Rows as an aligned text table (one block per suite, device, threads and dtype)."""
    headers = ["size", "variant", "median ms", "ratio", "GB/s", "vs HF", "kernels", "traffic", "max abs err", "note"]
    kinds = ["s", "s", "ms", "x", "gbps", "x", "int", "x", "err", "s"]
    keys = [
        "size",
        "variant",
        "median_ms",
        "ratio",
        "gbps",
        "speedup_vs_hf",
        "kernels",
        "traffic",
        "max_abs_error",
        "note",
    ]
    lines: list[str] = []
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["suite"], row["device"], row["threads"], row["dtype"]), []).append(row)
    for (suite, device, threads, dtype), block in groups.items():
        bases = dict.fromkeys(r["baseline"] for r in block)
        cells = [[_fmt(r[k], kind) for k, kind in zip(keys, kinds)] for r in block]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        lines.append(f"\n{suite} on {device}, {threads} thread(s), {dtype}; ratio = time / {' or '.join(bases)}")
        lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(w) for c, w in zip(cell, widths)).rstrip() for cell in cells]
    return "\n".join(lines)


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def keep_freed_memory() -> bool:
    """Ask glibc's allocator to keep freed memory instead of returning it to the OS.

    By default glibc gives large freed blocks back to the kernel, so an eager formula
    that allocates several fresh intermediates per call (HF's RoPE: four of ``x``'s size)
    pays page faults on every call, on top of its memory traffic. A GPU's caching
    allocator never does this. Keeping freed memory (``mallopt``: trim threshold 1 GiB,
    mmap threshold 32 MiB) removes that cost for the rest of the process. Returns
    ``False`` where the C library is not glibc.
    """
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_trim_threshold, 1 << 30)) and bool(mallopt(m_mmap_threshold, 32 << 20))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pe_lessons.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda", "all"],
        default="all",
        help="where to run: cpu, cuda, or all (the CPU, then the GPU when one is present; default)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads for every timing (default: torch's current count)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one short round: a smoke run, not figures")
    parser.add_argument(
        "--compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="torch.compile'd RoPE variants: auto = on, except with --quick (default); on; off. "
        "On a CPU the first compile with an empty cache takes about 15 s",
    )
    parser.add_argument(
        "--dtype",
        choices=["all", *ROPE_DTYPES],
        default="all",
        help="the rotary suite's dtype(s): all (default: float32, bfloat16, float16) or one of them",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="interleaved timing rounds (default 3; 1 with --quick)"
    )
    parser.add_argument(
        "--stat",
        choices=["median", "min"],
        default="median",
        help="across rounds: median (default) or min, the least disturbed round (steadier on a busy machine)",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall (default) or cpu: this process's CPU time, with --threads 1 only (a busy machine's waits not counted)",
    )
    parser.add_argument(
        "--keep-memory",
        action="store_true",
        help="CPU: keep freed memory in the process (glibc mallopt), so eager formulas pay no page "
        "faults for fresh intermediates (as with a GPU's caching allocator)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA GPU is available here")
    devices = {"cpu": ["cpu"], "cuda": ["cuda"], "all": ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])}[
        args.device
    ]
    compile_flag = {"auto": not args.quick, "on": True, "off": False}[args.compile]
    timing: dict[str, Any] = dict(min_run_time=0.02, rounds=1) if args.quick else dict(min_run_time=0.1, rounds=3)
    if args.rounds is not None:
        if args.rounds < 1:
            parser.error("--rounds must be >= 1")
        timing["rounds"] = args.rounds
    timing["stat"] = args.stat
    if args.clock == "cpu":
        if args.threads != 1:
            parser.error("--clock cpu needs --threads 1")
        if args.device != "cpu":
            parser.error("--clock cpu needs --device cpu")
        timing["clock"] = "cpu"
    dtypes = ROPE_DTYPES if args.dtype == "all" else (args.dtype,)
    start = time.perf_counter()
    print(f"torch {torch.__version__}; CPU: {cpu_name()}, {torch.get_num_threads()} threads available")
    if args.keep_memory:
        kept = keep_freed_memory()
        print(
            "allocator: freed memory kept in the process (--keep-memory)"
            if kept
            else "allocator: --keep-memory needs glibc; not applied"
        )
    else:
        print("allocator: default (glibc returns large freed blocks to the OS; see --keep-memory)")
    load = _load()
    if load is not None and load > (os.cpu_count() or 1):
        print(
            f"warning: the machine is busy (load average {load:.1f} on {os.cpu_count()} cores): timings are unreliable"
        )
    if torch.cuda.is_available():
        print(f"GPU: {torch.cuda.get_device_name()}")
    elif args.device == "all":
        print("GPU: none (CUDA not available) — the GPU part is skipped")
    rows: list[dict] = []
    for device in devices:
        sin_sizes, rope_shapes = default_sizes(device, quick=args.quick)
        rows += bench_sinusoidal(sin_sizes, device=device, threads=args.threads, **timing)
        rows += bench_rope(
            rope_shapes, device=device, threads=args.threads, compile=compile_flag, dtypes=dtypes, **timing
        )
    print(format_table(rows))
    print("\nDecode (one position per call), per-call time against Hugging Face's eager step:")
    for line in decode_summary(rows):
        print("  " + line)
    if not args.quick and "cpu" in devices:
        threads = args.threads or torch.get_num_threads()
        print(f"\nTargets (CPU, {threads} thread(s), the large sizes; ratios to clone of the same tensor, same run):")
        for t in check_targets([r for r in rows if r["device"] == "cpu"]):
            verdict = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
            kind = "err" if "error" in t["target"] else "int" if "kernel" in t["target"] else "x"
            print(f"  {t['dtype']:<9} {t['target']:<42} measured {_fmt(t['measured'], kind):>8}  {verdict}")
    load_end = _load()
    print(
        f"\ntotal {time.perf_counter() - start:.1f} s"
        + (
            f"; load average {load:.1f} at start, {load_end:.1f} at end"
            if load is not None and load_end is not None
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
