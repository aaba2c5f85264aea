"""Checkers for the exercises of notebook 09 (relative biases: T5 buckets, ALiBi, rotary's reach, T5 scores).

Each takes the student's answer in any ordinary type (int, float, NumPy scalar, 0-d tensor, list)
and returns :class:`~pe_lessons.exercises._feedback.Feedback`; hints name the rule, never the answer.
"""

from __future__ import annotations

import math

import torch

from ..relative import alibi_slopes, t5_relative_bucket
from ._feedback import Feedback, _short, as_integer, as_number, attempt, checker, failed, not_done, passed

__all__ = [
    "check_t5_bucket",
    "check_alibi_slopes",
    "alibi_far_share",
    "check_alibi_far_share",
    "rotary_reach",
    "check_rotary_reach",
    "check_base_for_reach",
    "check_t5_scores",
]


def _unwrap(answer: object) -> object:
    """One number in a one-element list or tuple (``[14]``) is the number itself, in every checker here."""
    if isinstance(answer, (list, tuple)) and len(answer) == 1:
        return answer[0]
    return answer


@checker
def check_t5_bucket(answer: object, offset: int = 20, *, num_buckets: int = 16, max_distance: int = 64) -> Feedback:
    """Check the bidirectional T5 bucket of ``offset = key − query`` (``num_buckets``, ``max_distance``)."""
    if answer is None or answer is Ellipsis:
        return not_done()
    answer = _unwrap(answer)
    whole, problem = as_integer(answer, "one whole number (a bucket index)")
    if whole is None:
        number, _ = as_number(answer)
        if number is None or not float(number).is_integer():
            return problem if problem is not None else failed("Answer with one whole number (a bucket index).")
        whole = int(number)
    value: int = whole

    def bucket(r: int, bidirectional: bool = True) -> int:
        return int(
            t5_relative_bucket(r, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
        )

    want = bucket(offset)
    half = num_buckets // 2
    exact = half // 2
    distance = abs(offset)
    if value == want:
        return passed(
            f"Bucket {want}: {half} buckets per side, {exact} of them exact; {distance} ≥ {exact}, so "
            f"{exact} + ⌊ln({distance}/{exact}) / ln({max_distance}/{exact}) · {half - exact}⌋"
            + (f", plus {half} for a key after the query." if offset > 0 else " (a key before the query).")
        )
    if value == bucket(-offset):
        return failed("Check the side: the offset is key − query. Which half of the buckets do keys on this side use?")
    if value in (bucket(offset, bidirectional=False), bucket(-offset, bidirectional=False)):
        return failed(
            f"That is a causal (one-sided) bucket, with all {num_buckets} buckets on one side. This bias is "
            f"bidirectional: {half} buckets per side."
        )
    side = half if offset > 0 else 0
    if distance >= exact:
        log_part = math.log(distance / exact) / math.log(max_distance / exact) * (half - exact)
        # the slips that land near the answer; two of them can give the same number, so name every one that does
        rounded = {side + min(exact + f(log_part), half - 1) for f in (round, math.ceil)} - {want}
        # a slip of T5's defaults: the log part multiplied by the buckets per side instead of the logarithmic ones
        spread_over_side = math.log(distance / exact) / math.log(max_distance / exact) * half
        spread = side + min(exact + math.floor(spread_over_side), half - 1)
        # a slip in the numerator: ln(d) instead of ln(d/exact) (Ex 1: 4 + ⌊4.32⌋, capped at 7, + 8 = 15)
        numerator = side + min(
            exact + math.floor(math.log(distance) / math.log(max_distance / exact) * (half - exact)), half - 1
        )
        if value != want and (value in rounded) + (value == spread) + (value == numerator) >= 2:
            causes = [
                cause
                for cause, hit in [
                    ("rounded up", value in rounded),
                    ("spread over all the buckets of a side", value == spread),
                    (f"a slip in the logarithm (ln(d) instead of ln(d/{exact}))", value == numerator),
                ]
                if hit
            ]
            listed = (", ".join(causes[:-1]) + ("," if len(causes) > 2 else "")) + f" or {causes[-1]}"
            return failed(
                f"{listed[0].upper()}{listed[1:]}? Several slips give this bucket. The "
                f"logarithm is ln(d/{exact}) / ln(max_distance/{exact}): d/{exact} in the numerator, not d, and "
                f"max_distance/{exact} in the denominator. T5 rounds the logarithmic part down, and spreads it over "
                "the side's logarithmic buckets only: how many does each side have with these numbers?"
            )
        if value == numerator != want:
            return failed(
                f"Check the numerator: the logarithm is ln(d/{exact}) / ln(max_distance/{exact}), of the distance "
                f"over the {exact} exact ones, not ln(d)."
            )
        if value in rounded:
            return failed("Close: T5 rounds the logarithmic part down, not up or to the nearest integer.")
        if value == side + math.floor(log_part):
            return failed(f"The logarithmic buckets start after the {exact} exact ones.")
        if value == exact + math.floor(log_part) and side:
            return failed("Right distance bucket, wrong half: keys after the query use the upper half.")
        if value == spread != want:
            return failed(
                "The logarithmic part is spread over the side's logarithmic buckets only, not over all the "
                "buckets of the side: how many logarithmic buckets does each side have with these numbers?"
            )
        # T5's defaults (32 buckets, max_distance 128) kept: the whole formula, or only its max_distance
        default_formula = (
            {s + 8 + math.floor(math.log(distance / 8) / math.log(128 / 8) * 8) for s in {side, 16 * (offset > 0)}}
            if distance >= 8
            else set()
        )
        if value in default_formula - {want}:
            return failed(
                f"That is T5's default formula (32 buckets, 8 exact per side, max_distance 128). With these "
                f"numbers each side has {half} buckets, {exact} of them exact, and max_distance is {max_distance}."
            )
        if max_distance != 128:
            default_reach = math.log(distance / exact) / math.log(128 / exact) * (half - exact)
            if value == side + min(exact + math.floor(default_reach), half - 1) != want:
                return failed(
                    f"Check the denominator, ln(max_distance/{exact}): T5's default max_distance 128, or a "
                    f"missing /{exact}? With these numbers max_distance is {max_distance}."
                )
    if not 0 <= value < num_buckets:
        return failed(f"There are only {num_buckets} buckets (0 … {num_buckets - 1}); {value} is not one of them.")
    if value == side + distance:
        return failed(f"Only distances below {exact} have a bucket each; {distance} falls in a logarithmic bucket.")
    return failed(
        f"Not the bucket. Split the {num_buckets} buckets by side, then: distances below {exact} exact, the rest "
        "logarithmic up to max_distance (rounded down), capped at the side's last bucket."
    )


@checker
def check_alibi_slopes(answer: object, n_heads: int = 6) -> Feedback:
    """Check ALiBi's slopes (in head order) for ``n_heads`` heads."""
    if answer is None or answer is Ellipsis:
        return not_done()
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        return failed(f"n_heads must be a positive integer, got {_short(n_heads)}.")
    if isinstance(answer, (str, bytes)):
        return failed(f"Answer with a list of {n_heads} numbers, one slope per head, got text.")
    try:
        values = [as_number(v)[0] for v in answer]  # type: ignore[attr-defined]
    except Exception:
        return failed(f"Answer with a list of {n_heads} numbers, one slope per head, got {type(answer).__name__}.")
    if any(v is None for v in values):
        return failed("Every slope must be a finite number (no text, nan or inf).")
    want = alibi_slopes(n_heads).tolist()
    if len(values) != n_heads:
        return failed(f"{n_heads} heads need {n_heads} slopes, got {len(values)}.")

    def same(a: list, b: list) -> bool:
        # the precision a student types: 4 significant digits (0.0039 for 1/256) is enough
        return all(math.isclose(x, y, rel_tol=2e-3, abs_tol=1e-12) for x, y in zip(a, b, strict=True))

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
            f"That is the power-of-two rule applied to {n_heads} heads. The paper's code only uses it for "
            "powers of two; what does it do for other head counts?"
        )
    doubled = [2.0 ** (-4 * h / closest) for h in range(1, 2 * closest + 1)]
    if same(values, doubled[:n_heads]):
        return failed(
            f"Those are the first slopes of {2 * closest} heads. Start from the largest power of two ≤ {n_heads}."
        )
    return failed(
        "Not ALiBi's slopes. For n a power of two: 2^(-8h/n), h = 1 … n. Otherwise take n' = the largest "
        "power of two ≤ n, its n' slopes, then some of the slopes of 2n' heads (which ones?)."
    )


def alibi_far_share(slope: float, seq_len: int = 64, far: int = 16) -> float:
    """Attention weight a causal ALiBi head gives keys ``far`` or more tokens back, from its bias alone.

    The query is the last of ``seq_len`` tokens and every ``q·k`` is 0, so key ``d`` tokens back gets
    ``exp(-slope·d)`` normalised over ``d = 0 … seq_len − 1``.
    """
    weights = [math.exp(-slope * d) for d in range(seq_len)]
    return sum(weights[far:]) / sum(weights)


@checker
def check_alibi_far_share(
    answer: object, n_heads: int = 6, head: int = 6, seq_len: int = 64, far: int = 12
) -> Feedback:
    """Check the share of keys ``far`` or more back for ALiBi head ``head`` (1-based, head order) of ``n_heads``."""
    if answer is None or answer is Ellipsis:
        return not_done()
    answer = _unwrap(answer)  # [0.22]: one number in a list is fine
    value, problem = as_number(answer, "a share between 0 and 1")
    if problem is not None:
        return problem
    assert value is not None  # set whenever problem is None
    slopes = alibi_slopes(n_heads).tolist()
    slope = slopes[head - 1]
    want = alibi_far_share(slope, seq_len, far)
    if abs(value - want) <= 0.005:
        return passed(
            f"{want:.3f}: head {head} of {n_heads} has slope {slope:g}, one of the slopes the paper's code adds "
            f"between the {2 ** (n_heads.bit_length() - 1)} power-of-two ones. A uniform head would put "
            f"{(seq_len - far) / seq_len:.3f} there."
        )
    naive = 2.0 ** (-8 * head / n_heads)
    naive_hint = (
        f"That slope is 2^(-8·{head}/{n_heads}), the rule for a power of two; {n_heads} is not one. Which "
        f"slope does the paper's code give head {head}?"
    )
    if math.isclose(naive, min(slopes)):  # e.g. head 6 of 6: the naive rule and "the flattest head" coincide
        naive_hint = (
            f"That is the flattest slope: what 2^(-8·{head}/{n_heads}), the rule for a power of two, gives head "
            f"{head}, and the last one if the slopes are sorted. {n_heads} is not a power of two, and the slopes "
            f"go in head order as the paper's code assigns them: which slope is head {head}'s?"
        )
    hints = [
        ((seq_len - far) / seq_len, "That is the share of a head with no bias (uniform weights). The bias tilts it."),
        (alibi_far_share(naive, seq_len, far), naive_hint),
        (alibi_far_share(min(slopes), seq_len, far), f"That is the flattest head. Is it head {head}?"),
        (alibi_far_share(max(slopes), seq_len, far), f"That is the steepest head. Is it head {head}?"),
        (1 - want, f"That is the share of the near keys (fewer than {far} back)."),
        (
            alibi_far_share(slope, seq_len, far + 1),
            f"That counts the keys more than {far} back; the question asks for {far} or more, so the key "
            f"exactly {far} back belongs in the share too.",
        ),
    ]
    closest = 2 ** (n_heads.bit_length() - 1)
    if head > closest:  # an added head: the slip of taking the 2n'-head slopes the first n' heads already have
        repeated = 2.0 ** (-8 * (2 * (head - closest)) / (2 * closest))
        hints.append(
            (
                alibi_far_share(repeated, seq_len, far),
                f"That slope is one of the first {closest} heads' slopes already. Of the {2 * closest}-head "
                f"slopes, which ones does the paper's code add: those the {closest} heads already have, or the others?",
            )
        )
    if closest != n_heads:  # the next power of two instead of the largest one ≤ n_heads
        above = 2 * closest
        hints.append(
            (
                alibi_far_share(2.0 ** (-8 * head / above), seq_len, far),
                f"That slope is head {head}'s in a model of {above} heads, the power of two above {n_heads}. The "
                f"paper's code starts from the largest power of two at most {n_heads}: which slopes does it add?",
            )
        )
    # the right share rounded to one decimal (0.2), or a listed slip's share within 0.01 of one decimal (0.8 for
    # the naive head's 0.793; not 0.5 for 0.463). float32 (a NumPy scalar or a 0-d tensor) stores 0.2 as
    # 0.2000000029...: compare with a tolerance
    one_decimals = {round(want, 1)} | {round(w, 1) for w, _ in hints if abs(w - round(w, 1)) <= 0.01} - {0.0}
    if any(math.isclose(value, d, abs_tol=1e-6) for d in one_decimals) and abs(value - want) > 0.005:
        return failed(
            "Give two decimals: one decimal is too coarse to check. (If two decimals give this number too, check "
            f"whether the key exactly {far} back is in your share, and which slope is head {head}'s.)"
        )
    if 1 < value <= 100 and any(abs(value / 100 - share) <= 0.005 for share in [want, *(w for w, _ in hints)]):
        return failed("That looks like a percentage: give the share as a number between 0 and 1.")
    unnormalised = sum(math.exp(-slope * d) for d in range(far, seq_len))
    if abs(value - unnormalised) <= 0.005:  # the far keys' weights exp(-m·d), never divided by their sum
        return failed(
            f"A share is between 0 and 1: that adds up the far keys' weights exp(-m·d) without normalising. "
            f"Divide by the weights of all {seq_len} keys."
        )
    if value > 1 and any(abs(value / 10 - share) <= 0.005 for share in [want, *(w for w, _ in hints)]):
        return failed("A share is between 0 and 1: check the decimal point.")
    if value > 1:
        return failed(f"A share is between 0 and 1: did you normalise over all {seq_len} keys?")
    for wrong, hint in hints:
        if abs(value - wrong) <= 0.005:
            return failed(hint)
    return failed(
        f"Not the share. Find head {head}'s slope m (head order), give the key d tokens back the weight "
        f"exp(-m·d) for d = 0 … {seq_len - 1}, normalise, and add up the keys at least {far} back."
    )


def rotary_reach(base: float, head_dim: int) -> float:
    """The offset at which rotary's second pair (``θ_1 = base^(-2/head_dim)``) has turned by π: ``π / θ_1``."""
    return math.pi * base ** (2 / head_dim)


@checker
def check_rotary_reach(answer: object, base: float, head_dim: int) -> Feedback:
    """Check the offset ``π / θ_1`` at which rotary's pair 1 has turned half a circle (within 1 % or ±1)."""
    if answer is None or answer is Ellipsis:
        return not_done()
    value, problem = as_number(_unwrap(answer), "a number (an offset in tokens)")
    if value is None:
        return problem if problem is not None else failed("Answer with a number (an offset in tokens).")
    want = rotary_reach(base, head_dim)
    if abs(value - want) <= max(1.0, 0.01 * want):
        return passed(
            f"π / θ_1 = π · {base:g}^(2/{head_dim}) ≈ {want:.0f} tokens: past this offset pair 1 has turned by more "
            "than half a circle, so a far key starts to look like a nearer one. Now run it and compare."
        )
    for wrong, hint in [
        (math.pi * base ** (1 / head_dim), "Check the exponent: θ_i = base^(-2i/head_dim), and this is pair i = 1."),
        (2 * math.pi * base ** (2 / head_dim), "Half a turn is π radians, not 2π."),
        (
            math.pi * base ** (2 * 2 / head_dim),
            f"Two slips give that offset: pair 2's half turn (θ_2 = base^(-4/d)) instead of pair 1's, or "
            f"d = {head_dim // 2}. d here is head_dim ({head_dim}), not the number of pairs or of heads; and which "
            "pair is the fastest one that has not turned half a circle within the training length?",
        ),
        (base ** (2 / head_dim), "That is 1/θ_1: the offset where the angle reaches 1 radian. How far for π?"),
    ]:
        if abs(value - wrong) <= max(1.0, 0.01 * wrong):
            return failed(hint)
    return failed(
        "Not quite. Pair i turns by θ_i = base^(-2i/head_dim) radians per token of offset; find the offset at "
        "which pair 1 has turned by π."
    )


@checker
def check_base_for_reach(answer: object, offset: float, head_dim: int) -> Feedback:
    """Check the base at which rotary's pair 1 turns by π at ``offset``: ``(offset / π)^(head_dim / 2)`` (within 2 %;
    within 10 %: a "keep more digits" hint)."""
    if answer is None or answer is Ellipsis:
        return not_done()
    value, problem = as_number(_unwrap(answer), "a number (a RoPE base)")
    if value is None:
        return problem if problem is not None else failed("Answer with a number (a RoPE base).")
    want = (offset / math.pi) ** (head_dim / 2)
    if math.isclose(value, want, rel_tol=0.02):
        return passed(
            f"base = (offset/π)^(head_dim/2) = ({offset:g}/π)^{head_dim / 2:g} ≈ {want:.3g}: there π/θ_1 = {offset:g}. "
            "Now run it and compare."
        )
    for wrong, hint in [
        (
            (offset / math.pi) ** head_dim,
            "Check the exponent: θ_1 = base^(-2/head_dim), so π/θ_1 = π·base^(2/head_dim).",
        ),
        ((offset / (2 * math.pi)) ** (head_dim / 2), "Half a turn is π radians, not 2π."),
        (offset ** (head_dim / 2), "Solve π·base^(2/head_dim) = offset: divide by π first."),
        (
            (offset / math.pi) ** (head_dim / 4),
            f"Two slips give that base: pair 2's half turn (θ_2 = base^(-4/d)) put at this offset instead of pair "
            f"1's, or d = {head_dim // 2}. d here is head_dim ({head_dim}), not the number of pairs or of heads; "
            "and which pair is the fastest one that has not turned half a circle within the training length?",
        ),
    ]:
        if math.isclose(value, wrong, rel_tol=0.02):
            return failed(hint)
    if math.isclose(value, want, rel_tol=0.1):
        if value == float(f"{value:.1e}") != float(f"{value:.0e}"):  # two significant figures already
            return failed("Close, but not within 2 %: keep more digits in offset/π and in the power before you round.")
        return failed(
            "Close, but not within 2 %: the offset grows only as base^(2/head_dim), so the base must be given "
            "more precisely than the offset. Keep more digits in offset/π and in the power, then give two "
            "significant figures or more."
        )
    return failed("Not quite. Pair 1 has turned by π at offset π·base^(2/head_dim); solve that for the base.")


def _t5_bias(
    seq: int, table: torch.Tensor, max_distance: int, *, flipped: bool = False, bidirectional: bool = False
) -> torch.Tensor:
    """``[heads, seq, seq]``: the causal T5 bias of bucket(key − query), or of query − key when ``flipped``
    (the encoder's bidirectional buckets when ``bidirectional``: a slip to name)."""
    relative = torch.arange(seq)[None, :] - torch.arange(seq)[:, None]  # key − query
    if flipped:
        relative = -relative
    buckets = t5_relative_bucket(
        relative, bidirectional=bidirectional, num_buckets=table.shape[0], max_distance=max_distance
    )
    return table[buckets].permute(2, 0, 1)


@checker
def check_t5_scores(t5_scores: object) -> Feedback:
    """Check ``t5_scores(q, k, table, max_distance)`` (``q, k``: ``[heads, seq, head_dim]``; ``table``:
    ``[num_buckets, heads]``) against T5's causal attention scores ``q kᵀ + table[bucket(key − query)]``
    on the keys a causal model uses (key ≤ query), for several sizes."""
    if t5_scores is None or t5_scores is Ellipsis:
        return not_done()
    if not callable(t5_scores):
        return failed(f"t5_scores must be a function; got {_short(t5_scores)} ({type(t5_scores).__name__}).")
    g = torch.Generator().manual_seed(9)
    for heads, seq, head_dim, buckets, max_distance in [(2, 5, 4, 8, 16), (3, 21, 8, 8, 16), (1, 12, 6, 6, 10)]:
        q, k = (torch.randn(heads, seq, head_dim, generator=g, dtype=torch.float64) for _ in range(2))
        table = torch.randn(buckets, heads, generator=g, dtype=torch.float64)
        got, problem = attempt("t5_scores(q, k, table, max_distance)", t5_scores, q, k, table, max_distance)
        if problem is not None:
            return problem
        if not isinstance(got, torch.Tensor):
            return failed(f"t5_scores must return a tensor, got {_short(got)} ({type(got).__name__}).")
        if tuple(got.shape) != (heads, seq, seq):
            return failed(
                f"For {heads} heads and {seq} tokens the scores are [{heads}, {seq}, {seq}], got {list(got.shape)}."
            )
        past = torch.ones(seq, seq, dtype=torch.bool).tril()  # the keys a causal model uses

        def matches(candidate: torch.Tensor, got: torch.Tensor = got, past: torch.Tensor = past) -> bool:
            return bool(torch.allclose(got.to(torch.float64)[:, past], candidate[:, past], rtol=1e-6, atol=1e-6))

        dots = q @ k.transpose(-1, -2)
        bias, flipped = _t5_bias(seq, table, max_distance), _t5_bias(seq, table, max_distance, flipped=True)
        if matches(dots + bias):
            continue
        if matches(dots / math.sqrt(head_dim) + bias):
            return failed(
                "The bias is right now; the dot products are not what T5 adds it to. How does T5Attention "
                "(transformers) scale q·kᵀ?"
            )
        if matches(dots + flipped) or matches(dots / math.sqrt(head_dim) + flipped):
            return failed(
                "Every key in the past gets the same bias here, whatever its distance: the buckets are computed "
                "from the wrong offset. Which one does t5_relative_bucket expect, query − key or key − query?"
            )
        bidirectional = [
            _t5_bias(seq, table, max_distance, flipped=f, bidirectional=True) for f in (False, True)
        ]  # the encoder's buckets, from either offset
        if any(matches(d + b) for d in (dots, dots / math.sqrt(head_dim)) for b in bidirectional):
            return failed(
                "These are the encoder's buckets: half the table is kept for keys after the query, which a "
                "causal model never sees. Which setting of t5_relative_bucket gives a decoder all its buckets for "
                "keys at or before the query?"
            )
        return failed("Not T5's scores yet: compare one entry by hand with q·k plus the bias of its bucket.")
    return passed(
        "T5's causal scores: q·kᵀ with no 1/√head_dim, plus the learned bias of bucket(key − query); checked "
        "on three sizes of heads, lengths and tables."
    )
