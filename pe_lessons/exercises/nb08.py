"""Checkers for the exercises of notebook 08 (performance: bytes moved and predicted time)."""

from __future__ import annotations

import math
import numbers

from ._feedback import Feedback, SetupError, as_number, checker, failed, is_placeholder, not_done, passed

__all__ = ["BIAS_SHAPE", "ROPE_SHAPE", "GPU_BANDWIDTH", "check_bytes_moved", "check_predicted_time"]

#: Exercise 1: ``y = x + bias`` with ``x`` float32 of this shape and ``bias`` float32 of shape ``[768]``.
BIAS_SHAPE = (8, 512, 768)
#: Exercises 2–3: rotary embedding of a bfloat16 ``q`` of this shape ``[batch, heads, seq, head_dim]``.
ROPE_SHAPE = (1, 32, 4096, 128)
#: The memory bandwidth of the GPU in exercises 2–3, bytes per second (2 TB/s).
GPU_BANDWIDTH = 2.0e12


def _number(answer: object) -> float | None:
    if answer is None or answer is Ellipsis:
        return None
    if isinstance(answer, bool) or not isinstance(answer, numbers.Real):  # numbers.Real: NumPy scalars too
        raise TypeError
    return float(answer)


def _near(a: float, b: float, rel: float = 0.02) -> bool:
    return abs(a - b) <= rel * abs(b)


@checker
def check_bytes_moved(answer: float | None) -> Feedback:
    """Bytes that ``y = x + bias`` must move: read ``x``, read ``bias`` once, write ``y`` (float32)."""
    if is_placeholder(answer):
        return not_done()
    value, problem = as_number(answer, "a number of bytes")
    if problem is not None:
        return problem
    n = math.prod(BIAS_SHAPE)
    d = BIAS_SHAPE[-1]
    want = 4 * (2 * n + d)
    if _near(value, want, 0.001):
        return passed(
            f"{want:,} bytes ≈ {want / 1e6:.1f} MB: read x ({4 * n:,}), read bias ({4 * d:,}), write y ({4 * n:,})."
        )
    if _near(value, 2 * n + d, 0.001) or _near(value, 2 * n, 0.001):
        return failed("That counts elements. A float32 element is 4 bytes: multiply by 4.")
    if _near(value, 8 * want, 0.001):
        return failed("That is in bits: divide by 8 (a float32 is 4 bytes = 32 bits).")
    if _near(value, 4 * n, 0.001) or _near(value, 4 * (n + d), 0.001):
        return failed(
            "You counted one direction only: the op reads x (and the bias) and writes y, a tensor of x's size."
        )
    if _near(value, 12 * n, 0.001) or _near(value, 12 * n + 4 * d, 0.001):
        return failed(
            "The bias is broadcast, not copied: it is read as its own 768 values, not as a full tensor of x's size."
        )
    return failed(
        f"{value:,.0f} bytes is off. Count what the op must read once and write once, in bytes (float32 = 4 bytes)."
    )


@checker
def check_predicted_time(answer_us: float | None, kernel: str = "fused") -> Feedback:
    """Predicted time in microseconds of RoPE on a bfloat16 ``ROPE_SHAPE`` tensor at ``GPU_BANDWIDTH``.

    ``kernel="fused"``: one kernel reading ``q`` and writing the result (``2N`` elements).
    ``kernel="eager"``: the five eager kernels of ``q*cos + rotate_half(q)*sin`` (``10N`` elements).
    The small cos/sin tables are ignored.
    """
    if not isinstance(kernel, str) or kernel not in ("fused", "eager"):
        raise SetupError(f'kernel must be "fused" or "eager", got {kernel!r}')
    if is_placeholder(answer_us):
        return not_done()
    value, problem = as_number(answer_us, "a number of microseconds")
    if problem is not None:
        return problem
    n = math.prod(ROPE_SHAPE)
    passes = 2 if kernel == "fused" else 10
    want = passes * n * 2 / GPU_BANDWIDTH * 1e6
    if _near(value, want, 0.05):
        return passed(f"≈ {want:.1f} µs: {passes}N elements × 2 bytes = {passes * n * 2 / 1e6:.1f} MB at 2 TB/s.")
    for factor, why in (
        (2.0, "float32's 4 bytes per element: bfloat16 has 2."),
        (1e3, "a unit slip: 1 s = 1e6 µs (that answer is in nanoseconds?)"),
        (1e-3, "a unit slip: the answer should be in µs (that looks like ms)."),
        (1e-6, "a unit slip: the answer should be in µs, not seconds."),
        (8.0, "bits, not bytes (a bfloat16 is 2 bytes)."),
    ):
        if _near(value, want * factor, 0.05):
            return failed(f"Off by a factor {factor:g}: {why}")
    other = (10 if kernel == "fused" else 2) * n * 2 / GPU_BANDWIDTH * 1e6
    if _near(value, other, 0.05):
        if kernel == "fused":
            return failed(
                "That is the eager formula's traffic (10N). One fused kernel reads q once and writes once: 2N elements."
            )
        return failed(
            "That is one fused kernel (2N). The eager formula runs five kernels that move 10N elements in all."
        )
    if _near(value, want / 2, 0.05):
        return failed("Only half the traffic: count the reads and the writes.")
    return failed(
        f"{value:.4g} µs is off. time = bytes moved / bandwidth, with {passes}N elements of 2 bytes and N = {n:,}."
    )
