"""Checkers for the exercises of notebook 08 (performance: bytes moved and predicted time)."""

from __future__ import annotations

import math
import numbers

from ._feedback import Feedback, SetupError, as_number, checker, failed, is_placeholder, not_done, passed

__all__ = [
    "BIAS_SHAPE",
    "ROPE_SHAPE",
    "GPU_BANDWIDTH",
    "check_bytes_moved",
    "check_conversion_traffic",
    "check_predicted_time",
]

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


def _rounded_from(value: float, want: float) -> bool:
    """Whether ``value`` is ``want`` rounded to 3 or more significant digits (25.2e6 for 25 168 896)."""
    if value == want:
        return True
    for digits in range(3, 9):
        scale = 10 ** (math.floor(math.log10(abs(want))) - digits + 1)
        if value == round(want / scale) * scale or math.isclose(value, round(want / scale) * scale, rel_tol=1e-12):
            return True
    return False


@checker
def check_bytes_moved(answer: float | None) -> Feedback:
    """Bytes that ``y = x + bias`` must move: read ``x``, read ``bias`` once, write ``y`` (float32).

    The exact count passes, and so does the count rounded to 3 or more significant digits
    (``25.2e6``); a count that leaves out the bias's bytes fails, as does any other slip.
    """
    if is_placeholder(answer):
        return not_done()
    value, problem = as_number(answer, "a number of bytes")
    if problem is not None:
        return problem
    assert value is not None  # set whenever problem is None
    n = math.prod(BIAS_SHAPE)
    d = BIAS_SHAPE[-1]
    want = 4 * (2 * n + d)
    if value == 8 * n:
        return failed(
            "Almost: you counted x read and y written, but the bias must be read too (once: broadcasting "
            "reuses its values, it does not copy them)."
        )
    if _rounded_from(value, want):
        exact = "" if value == want else f" (exactly {want:,})"
        return passed(
            f"{value:,.0f} bytes{exact} ≈ {want / 1e6:.1f} MB: read x ({4 * n:,}), read the bias once ({4 * d:,}), "
            f"write y ({4 * n:,})."
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
    if _near(value, want, 0.01):
        return failed(
            f"{value:,.0f} is close but not the count: give the exact number of bytes, or round it to a few "
            "significant digits (e.g. in MB × 1e6)."
        )
    return failed(
        f"{value:,.0f} bytes is off. Count what the op must read once and write once, in bytes (float32 = 4 bytes)."
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
    hints = [
        (
            ((low + 4) + 8 + (4 + low)) / (2 * low),
            "That would be right for a float32 working copy (4 bytes per "
            f"element); here the working dtype takes {work} bytes.",
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
            "You left out the two conversion passes' traffic at the low-precision end, or counted "
            "the rotation only: every pass reads its whole input and writes its whole output.",
        ),
        (
            (low + work + work + low) / (2 * low),
            "You left out the rotation pass: it reads and writes the working dtype too.",
        ),
        (
            (work + 2 * work + work) / (2 * low),
            "Each conversion moves both sizes: convert up reads the low-precision "
            "input and writes the working copy (and convert down the reverse).",
        ),
    ]
    for wrong, hint in hints:
        if abs(value - wrong) <= 0.01 * abs(wrong):
            return failed(hint)
    return failed(
        f"{value:g} is not it. List the three passes; for each, the bytes per element it reads and writes "
        f"({_DTYPE_BYTES[low]}: {low} bytes, {_DTYPE_BYTES[work]}: {work} bytes); divide the sum by what one "
        "fused kernel must move."
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
    assert value is not None  # set whenever problem is None
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
