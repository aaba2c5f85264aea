"""Checkers for the exercises of notebook 08 (performance: bytes moved, conversions, graphs for the compiler)."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterator

import torch

from ..optrace import trace_ops
from ._feedback import Feedback, SetupError, as_number, attempt, checker, failed, is_placeholder, not_done, passed

__all__ = [
    "ONE_PASS_BUDGET",
    "MAX_POSITION",
    "check_one_pass_rope",
    "check_conversion_traffic",
    "check_one_graph_rope",
]

#: Exercise 1: the most bytes ``my_rope`` may move, as a multiple of the compulsory bytes
#: (read ``x``, ``cos`` and ``sin`` once, write the result once).
ONE_PASS_BUDGET = 1.25
#: Exercise 3: positions are below this.
MAX_POSITION = 8192

#: ``[batch, heads, seq, head_dim]`` shapes the one-pass checker tries (batch·heads ≥ 16, so the small
#: cos/sin tables weigh little next to ``x``).
ONE_PASS_SHAPES = ((2, 8, 5, 8), (1, 16, 12, 64), (4, 4, 3, 2), (1, 32, 7, 128))


def _interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Pairs ``(x[..., 2i], x[..., 2i+1])`` turned by the angle of ``(cos[:, i], sin[:, i])``, in float64."""
    x = x.double()
    c, s = cos.double(), sin.double()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def _half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The same rotation with pairs ``(x[..., i], x[..., i + head_dim/2])``."""
    x = x.double()
    c, s = cos.double(), sin.double()
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)


def _close(out: torch.Tensor, want: torch.Tensor, tol: float) -> bool:
    return bool((out - want).abs().max() <= tol)


def _tensor_result(result: object, label: str, shape: tuple[int, ...]) -> torch.Tensor | Feedback:
    """The student's output as a float64 CPU tensor, or feedback on why it is not a float32 tensor of ``shape``."""
    if result is None or result is Ellipsis:
        return failed(f"{label} returned {result!r}: return the rotated tensor.")
    if not isinstance(result, torch.Tensor):
        return failed(f"{label} returned a {type(result).__name__}; return a tensor of x's shape.")
    if tuple(result.shape) != shape:
        return failed(f"{label} returned shape {list(result.shape)}; it must keep x's shape {list(shape)}.")
    if result.dtype != torch.float32 or result.device.type == "meta":
        return failed(f"{label} returned {result.dtype} on {result.device}; x is float32 and so is the result.")
    out = result.detach().double()
    if not bool(torch.isfinite(out).all()):
        return failed(f"{label} returned NaN or inf; a rotation of finite values is finite.")
    return out


@checker
def check_one_pass_rope(my_rope: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], object] | None) -> Feedback:
    """Check ``my_rope(x, cos, sin)``: interleaved RoPE of a float32 ``x`` ``[batch, heads, seq, head_dim]`` with the
    given ``cos``/``sin`` ``[seq, head_dim/2]``, in eager PyTorch, moving at most :data:`ONE_PASS_BUDGET` × the
    compulsory bytes as :func:`pe_lessons.optrace.trace_ops` counts them.

    Tried on several shapes (head_dim 2 to 128) with tables of random angles, so a function that builds its own
    table, or handles one head size only, fails. ``x`` must be left unchanged.
    """
    if is_placeholder(my_rope):
        return not_done()
    if not callable(my_rope):
        return failed(f"my_rope must be a function; got {type(my_rope).__name__}.")
    gen = torch.Generator().manual_seed(8)
    worst = 0.0
    for shape in ONE_PASS_SHAPES:
        seq, head_dim = shape[-2], shape[-1]
        x = torch.randn(shape, generator=gen)
        angles = torch.rand(seq, head_dim // 2, generator=gen, dtype=torch.float64) * 2 * math.pi
        cos, sin = angles.cos().float(), angles.sin().float()
        x_before = x.clone()
        label = f"my_rope(x, cos, sin) with x of shape {list(shape)}"
        results: list[object] = []

        def run(x: torch.Tensor = x, cos: torch.Tensor = cos, sin: torch.Tensor = sin, into: list = results) -> None:
            into.append(my_rope(x, cos, sin))

        ops, problem = attempt(label, trace_ops, run)
        if problem is not None:
            return problem
        assert ops is not None and results  # set whenever problem is None
        out = _tensor_result(results[0], label, shape)
        if isinstance(out, Feedback):
            return out
        if not torch.equal(x, x_before):
            return failed(f"{label} changed x in place: leave the input as it is and return a new tensor.")
        want = _interleaved(x, cos, sin)
        if not _close(out, want, 1e-4):
            if _close(out, _interleaved(x, cos, -sin), 1e-4):
                return failed(f"{label}: every pair turned the wrong way (by −angle): check the signs of the sines.")
            if head_dim > 2 and _close(out, _half(x, cos, sin), 1e-4):
                return failed(
                    f"{label}: that pairs feature i with i + head_dim/2 (the half layout); here the pairs are "
                    "neighbours, (x[..., 2i], x[..., 2i+1])."
                )
            if _close(out, x.double(), 1e-6):
                return failed(f"{label} returned x unrotated.")
            return failed(
                f"{label}: wrong values (largest error {(out - want).abs().max().item():.2g}). Compare with "
                "rope_stack(x, cos, sin) on a small input."
            )
        kernels = [op for op in ops if op["kernel"]]
        made_from_data = sorted({op["op"] for op in ops} & {"tensor", "as_tensor", "from_numpy", "frombuffer"})
        if made_from_data or sum(op["read_bytes"] for op in kernels) < x.nbytes:
            how = f" (it builds its result with torch.{made_from_data[0]})" if made_from_data else ""
            return failed(
                f"{label}: right values, but the torch operations seen do not read x{how}: the work was done "
                "outside torch (Python or NumPy), where the tracer cannot count it. The task is eager PyTorch "
                "operations on x."
            )
        if not kernels:
            return failed(
                f"{label}: right values, but no torch operation was seen while it ran. The task is eager PyTorch "
                "(no torch.compile, no NumPy): the tracer must see the operations that do the work."
            )
        moved = sum(op["read_bytes"] + op["write_bytes"] for op in kernels)
        compulsory = 2 * x.nbytes + cos.nbytes + sin.nbytes
        ratio = moved / compulsory
        worst = max(worst, ratio)
        if ratio > ONE_PASS_BUDGET:
            names = ", ".join(op["op"] for op in kernels)
            return failed(
                f"{label}: right values, but its {len(kernels)} kernel(s) ({names}) move {ratio:.2f}× the compulsory "
                f"bytes (the budget is {ONE_PASS_BUDGET}×). Each eager operation reads its inputs and writes a whole "
                "output: a chain of elementwise steps pays that at every step. Look for one operation that turns "
                "each pair (x[..., 2i], x[..., 2i+1]) in a single pass (notebook 07 wrote the turn of a pair as one "
                "multiplication)."
            )
    return passed(
        f"Right on every shape tried ({len(ONE_PASS_SHAPES)}, head_dim 2 to 128), in at most {worst:.2f}× the "
        "compulsory bytes: one pass over x, as section 4 counted for apply_rope's interleaved layout."
    )


_DTYPE_BYTES = {1: "an 8-bit type", 2: "bfloat16/float16", 4: "float32", 8: "float64"}


@checker
def check_conversion_traffic(answer: object, *, low_bytes: int = 2, work_bytes: int = 8) -> Feedback:
    """Bytes moved / compulsory bytes of a three-pass kernel: convert ``x`` (``low_bytes`` per element) to a
    working dtype (``work_bytes``), rotate in one pass, convert back. Compulsory: read and write ``low_bytes``.

    Passes: ``(low + work) + (work + work) + (work + low)`` bytes per element, over ``2·low``.
    """
    if low_bytes not in _DTYPE_BYTES or work_bytes not in _DTYPE_BYTES or work_bytes <= low_bytes:
        raise SetupError(
            f"low_bytes and work_bytes must be element sizes with low < work, got {low_bytes}, {work_bytes}"
        )
    if is_placeholder(answer):
        return not_done()
    value, problem = as_number(answer, "a number (bytes moved divided by the compulsory bytes)")
    if problem is not None:
        return problem
    assert value is not None  # set whenever problem is None
    low, work = low_bytes, work_bytes
    moved = (low + work) + 2 * work + (work + low)
    want = moved / (2 * low)
    if abs(value - want) <= 0.01 * want:
        return passed(
            f"{want:g}×: per element, convert up reads {low} and writes {work} bytes, the rotation reads and writes "
            f"{work} each, convert down reads {work} and writes {low}: {moved} bytes against the compulsory {2 * low}. "
            "A fused kernel converts in registers and moves only the compulsory bytes."
        )
    # The usual slips, most plausible first; where two give the same number for these sizes, both are named.
    hints = [
        (
            ((low + 4) + 8 + (4 + low)) / (2 * low),
            "That is what section 4 traced for a float32 working copy (4 bytes per element); here the working "
            f"dtype takes {work} bytes.",
        ),
        (
            (low + work + work + low) / (2 * low),
            "Did you leave out the rotation pass? It reads and writes the working dtype too.",
        ),
        (3, "That counts kernels (passes), not bytes: add up what each pass reads and writes."),
        (moved, f"That is bytes per element ({moved}); divide by the compulsory bytes per element."),
        (
            moved / (2 * work),
            f"You divided by the compulsory bytes of {_DTYPE_BYTES[work]}; the compulsory traffic is "
            f"reading and writing {_DTYPE_BYTES[low]}: {2 * low} bytes per element.",
        ),
        (
            4 * work / (2 * low),
            "You counted every pass at the working dtype's size: each conversion moves both sizes (convert up "
            "reads the low-precision input and writes the working copy, convert down the reverse).",
        ),
        (2 * work / (2 * low), "That is the rotation pass alone: the two conversions are passes of their own."),
        (moved / 2 / (2 * low), "That counts one direction only: every pass reads its input and writes its output."),
    ]
    matching = [hint for wrong, hint in hints if abs(value - wrong) <= 0.01 * abs(wrong)]
    if matching:
        first, *others = dict.fromkeys(matching)
        return failed(" ".join([first, *("Or: " + other[0].lower() + other[1:] for other in others)]))
    return failed(
        f"{value:g} is not it. List the three passes; for each, the bytes per element it reads and writes "
        f"({_DTYPE_BYTES[low]}: {low} bytes, {_DTYPE_BYTES[work]}: {work} bytes); divide the sum by what one "
        "fused kernel must move."
    )


#: (``[batch, heads, seq, head_dim]``, positions) the one-graph checker tries; positions below :data:`MAX_POSITION`.
GRAPH_CASES = (
    ((1, 16, 5, 64), (3, 900, 4000, 17, 0)),
    ((2, 4, 3, 8), (8191, 1, 2)),
    ((1, 2, 6, 128), (100, 101, 102, 103, 104, 105)),
)


def _half_rope_at(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Half-layout RoPE of ``x`` at ``positions``, in float64."""
    head_dim = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.double()[:, None] * inv_freq
    return _half(x, angles.cos(), angles.sin())


@contextlib.contextmanager
def _quiet_compiler() -> Iterator[None]:
    """Keep the compiler's own warnings (a graph break's explanation) out of the checker's output."""
    loggers = [logging.getLogger(name) for name in ("torch._dynamo", "torch._inductor", "torch.fx")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


@checker
def check_one_graph_rope(my_rope_at: Callable[[torch.Tensor, torch.Tensor], object] | None) -> Feedback:
    """Check ``my_rope_at(x, positions)``: half-layout RoPE (base 10 000) of a float32 ``x`` ``[batch, heads, seq,
    head_dim]`` at the 1-D integer ``positions`` (each below :data:`MAX_POSITION`), that ``torch.compile`` captures
    as **one graph with no break** (``torch._dynamo.explain``).

    Values are checked on several shapes and position sets to float32-angle accuracy (4e-3); the graph on two of
    them. The compiler's warnings are kept quiet; a break's reason is named in the feedback.
    """
    if is_placeholder(my_rope_at):
        return not_done()
    if not callable(my_rope_at):
        return failed(f"my_rope_at must be a function; got {type(my_rope_at).__name__}.")
    gen = torch.Generator().manual_seed(3)
    cases = []
    for shape, pos in GRAPH_CASES:
        x, positions = torch.randn(shape, generator=gen), torch.tensor(pos)
        label = f"my_rope_at(x, positions) with x of shape {list(shape)} and positions {list(pos)}"
        result, problem = attempt(label, my_rope_at, x.clone(), positions.clone())
        if problem is not None:
            return problem
        out = _tensor_result(result, label, shape)
        if isinstance(out, Feedback):
            return out
        want = _half_rope_at(x, positions)
        if not _close(out, want, 4e-3):
            if _close(out, _half_rope_at(x, torch.arange(len(pos))), 4e-3):
                return failed(f"{label}: that rotates row j by position j; use the positions you are given.")
            return failed(
                f"{label}: wrong values (largest error {(out - want).abs().max().item():.2g}). The buggy function "
                "gives the right values: keep its result, change how it gets there."
            )
        cases.append((label, x, positions))
    for label, x, positions in cases[:2]:
        with _quiet_compiler():
            torch._dynamo.reset()
            try:
                report, problem = attempt(label, lambda x=x, p=positions: torch._dynamo.explain(my_rope_at)(x, p))
            finally:
                torch._dynamo.reset()
        if problem is not None:
            return problem
        assert report is not None  # set whenever problem is None
        if report.graph_count == 1 and report.graph_break_count == 0:
            continue
        reasons = [" ".join(str(r.reason).split("\n")[0].split()) for r in report.break_reasons]
        said = f' The first break: "{reasons[0][:160]}".' if reasons else ""
        return failed(
            f"{label}: right values, but torch.compile sees {report.graph_count} graph(s) with "
            f"{report.graph_break_count} break(s).{said} Reading a tensor's value into Python (int(), .item(), "
            ".tolist(), an `if` on a tensor) stops the trace: the compiler does not know the value while it traces. "
            "Get what you need with tensor operations, or from what is known in advance (shapes, MAX_POSITION)."
        )
    # One graph can still be specialised on the positions' values (a Python list made from them): then every new
    # set of positions compiles again. Count the graphs compiled for two position sets of the same shape.
    label, x, positions = cases[0]
    compiled: list[int] = []

    def counting_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., object]:
        compiled.append(1)
        return gm.forward

    with _quiet_compiler():
        torch._dynamo.reset()
        try:
            fn = torch.compile(my_rope_at, backend=counting_backend)
            for shift in (0, 1):
                _, problem = attempt(label, fn, x.clone(), positions + shift)
                if problem is not None:
                    return problem
        finally:
            torch._dynamo.reset()
    if len(compiled) > 1:
        return failed(
            f"{label}: one graph, but torch.compile compiled it again when only the positions' values changed (same "
            "shapes): your function turns the values into Python numbers somewhere (.tolist(), int(), a loop over "
            "the tensor), so the graph holds them as constants. Keep the positions a tensor all the way."
        )
    return passed(
        f"Right values on {len(GRAPH_CASES)} shapes, and one graph with no break: nothing in it reads a tensor's "
        "value back into Python, so the compiler sees the whole rotation and can fuse it into one kernel."
    )
