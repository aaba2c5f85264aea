"""Checkers for the exercises of notebook 09 (relative biases: T5 buckets, ALiBi, NoPE, length)."""

from __future__ import annotations

import math
import numbers

from ..relative import alibi_slopes, t5_relative_bucket
from ._feedback import Feedback, _short, checker, failed, not_done, passed

__all__ = ["FALL_REASONS", "check_t5_bucket", "check_alibi_slopes", "check_first_to_fall"]

#: Why a scheme's accuracy falls past the trained length: the choices of exercise 3.
FALL_REASONS = {
    "a": "its positions past the trained length are vectors the model never saw (absolute positions)",
    "b": "its bias grows without limit with distance, so far tokens dominate attention",
    "c": "it has no rows past its table, so it cannot run at all",
    "d": "the causal mask hides the previous token at long lengths",
}
_FIRST_TO_FALL, _REASON = "sinusoidal", "a"
_SCHEMES = ("none", "sinusoidal", "rotary", "alibi", "t5")


def _as_int(answer: object) -> int | None:
    if isinstance(answer, bool):
        return None
    if isinstance(answer, numbers.Integral):
        return int(answer)
    if isinstance(answer, numbers.Real) and math.isfinite(float(answer)) and float(answer).is_integer():
        return int(float(answer))
    try:  # a one-element tensor
        value = answer.item()  # type: ignore[attr-defined]
    except Exception:
        return None
    return _as_int(value) if not isinstance(value, bool) else None


@checker
def check_t5_bucket(answer: object, offset: int = -40) -> Feedback:
    """Check the T5 bucket (bidirectional, 32 buckets, max_distance 128) of ``offset = key − query``."""
    if answer is None or answer is Ellipsis:
        return not_done()
    value = _as_int(answer)
    if value is None:
        return failed(f"Answer with one whole number (a bucket index), got {_short(answer)}.")
    want = int(t5_relative_bucket(offset))
    distance = abs(offset)
    if value == want:
        return passed(
            f"Bucket {want}: 16 buckets per side, 8 exact; {distance} ≥ 8, so "
            f"8 + ⌊ln({distance}/8)/ln(128/8) · 8⌋ = {want}"
            + (" (+16 because the offset is positive)." if offset > 0 else " (negative offset: lower half).")
        )
    if value == int(t5_relative_bucket(-offset)):
        return failed(
            "Sign: a positive offset (key after query) uses the upper 16 buckets; this offset is "
            f"{offset}, key − query, so it stays in the lower half."
        )
    if value == int(t5_relative_bucket(offset, bidirectional=False)):
        return failed(
            "That is the causal (unidirectional) bucket, with all 32 buckets on one side. T5's encoder is "
            "bidirectional: 16 buckets per side, of which 8 are exact."
        )
    exact_part = math.log(distance / 8) / math.log(16) * 8 if distance >= 8 else None
    if exact_part is not None and value == 8 + round(exact_part) and value != want:
        return failed(f"Close: T5 rounds down (⌊{exact_part:.2f}⌋), it does not round to the nearest integer.")
    if exact_part is not None and value == math.floor(exact_part):
        return failed("You forgot the 8 exact buckets in front: the logarithmic buckets start at 8.")
    if value == distance:
        return failed(f"Only distances below 8 have a bucket of their own; {distance} falls in a logarithmic bucket.")
    if not 0 <= value < 32:
        return failed(f"There are only 32 buckets (0 … 31); {value} is not one of them.")
    return failed(
        "Not the bucket. With 32 bidirectional buckets: 16 per side, distances 0–7 exact, then "
        "8 + ⌊ln(d/8) / ln(128/8) · 8⌋, at most 15; positive offsets add 16."
    )


@checker
def check_alibi_slopes(answer: object, n_heads: int = 6) -> Feedback:
    """Check ALiBi's slopes (in head order) for ``n_heads`` heads."""
    if answer is None or answer is Ellipsis:
        return not_done()
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        return failed(f"n_heads must be a positive integer, got {_short(n_heads)}.")
    try:
        values = [float(v) for v in answer]  # type: ignore[attr-defined]
    except Exception:
        return failed(f"Answer with a list of {n_heads} numbers, one slope per head, got {type(answer).__name__}.")
    if not all(math.isfinite(v) for v in values):
        return failed("Every slope must be a finite number (no nan or inf).")
    want = alibi_slopes(n_heads).tolist()
    if len(values) != n_heads:
        return failed(f"{n_heads} heads need {n_heads} slopes, got {len(values)}.")

    def same(a: list[float], b: list[float]) -> bool:
        return all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12) for x, y in zip(a, b, strict=True))

    closest = 2 ** (n_heads.bit_length() - 1)
    if same(values, want):
        if closest == n_heads:
            return passed(f"{n_heads} is a power of two: 2^(-8h/{n_heads}) for h = 1 … {n_heads}.")
        return passed(
            f"{n_heads} is not a power of two: the {closest} slopes of {closest} heads, then the "
            f"odd-numbered slopes of {2 * closest} heads for the remaining {n_heads - closest}."
        )
    if same(sorted(values), sorted(want)):
        return failed(
            f"The right slopes in the wrong order: first the {closest} slopes of {closest} heads, then the rest."
        )
    naive = [2.0 ** (-8 * h / n_heads) for h in range(1, n_heads + 1)]
    if same(values, naive):
        return failed(
            f"That is 2^(-8h/{n_heads}), the power-of-two rule applied to {n_heads} heads. The paper's "
            f"code only uses it for powers of two; for {n_heads} it takes {closest} heads' slopes, "
            f"then some of {2 * closest} heads'."
        )
    doubled = [2.0 ** (-4 * h / closest) for h in range(1, 2 * closest + 1)]
    if same(values, doubled[:n_heads]):
        return failed(
            f"Those are the first slopes of {2 * closest} heads. Start from the largest power of two "
            f"≤ {n_heads} ({closest} heads), then add every other slope of {2 * closest} heads."
        )
    return failed(
        "Not ALiBi's slopes. For n a power of two: 2^(-8h/n), h = 1 … n. Otherwise take n' = the largest "
        "power of two ≤ n, its n' slopes, then slopes 1, 3, 5, … of 2n' heads."
    )


@checker
def check_first_to_fall(scheme: object, reason: object) -> Feedback:
    """Check which scheme's accuracy falls first past the trained length (learned excluded) and why."""
    if scheme is None or scheme is Ellipsis or reason is None or reason is Ellipsis:
        return not_done()
    if not isinstance(scheme, str) or scheme.strip().lower() not in (*_SCHEMES, "learned"):
        return failed(f"scheme must be one of {', '.join(map(repr, _SCHEMES))}, got {_short(scheme)}.")
    if not isinstance(reason, str) or reason.strip().lower() not in FALL_REASONS:
        return failed(f"reason must be one of the letters {', '.join(map(repr, FALL_REASONS))}, got {_short(reason)}.")
    scheme, reason = scheme.strip().lower(), reason.strip().lower()
    if scheme == "learned":
        return failed(
            "The learned table does not fall, it cannot run at all past its rows (reason c): the question "
            "leaves it out. Which of the others drops first?"
        )
    if scheme != _FIRST_TO_FALL:
        return failed(f"Look at the 2× column: {_short(scheme)} is not the one that drops first in every seed.")
    if reason != _REASON:
        return failed(
            f"Right scheme; wrong reason: ({reason}) {FALL_REASONS[reason]}. What does a sinusoidal model "
            "see at position 20 that it never saw in training?"
        )
    return passed(
        "Sinusoidal: its vectors at positions 16 and up were never seen in training, while the relative "
        "schemes only see offsets — and with a causal mask, positions below 16 are unaffected by length."
    )
