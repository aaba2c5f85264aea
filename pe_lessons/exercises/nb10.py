"""Checkers for the exercises of notebook 10 (stretching RoPE's context: PI, NTK, YaRN, Llama 3).

The givens of each exercise live here too (:data:`OUT_OF_RANGE`, :data:`NTK_BASE`, :data:`STRETCH`),
so the notebook and its solutions read the same numbers. None of the answers is printed by the
notebook: each is worked out from its section's reasoning, with other numbers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypedDict

import torch

from .. import rotary
from ..rotary import rope_frequencies, scaled_frequencies
from ._feedback import (
    Feedback,
    _short,
    as_integer,
    as_number,
    attempt,
    checker,
    failed,
    is_placeholder,
    not_done,
    passed,
)

__all__ = [
    "OUT_OF_RANGE",
    "NTK_BASE",
    "STRETCH",
    "YARN_PROBES",
    "check_out_of_range",
    "check_ntk_base",
    "check_yarn_frequencies",
    "check_stretch_ratio",
]


class _OutOfRange(TypedDict):  # the key types of OUT_OF_RANGE, for the type checker
    head_dim: int
    base: float
    train_len: int
    factor: float


class _NtkBase(TypedDict):  # the key types of NTK_BASE, for the type checker
    head_dim: int
    base: float
    train_len: int
    target_len: int


#: Exercise 1: a model stretched to ``factor × train_len`` with NTK-aware scaling set for ``factor``.
OUT_OF_RANGE: _OutOfRange = {"head_dim": 64, "base": 10000.0, "train_len": 2048, "factor": 8.0}
#: Exercise 2: a model trained at ``train_len`` read at ``target_len`` with NTK-aware scaling: the smallest
#: factor ``s`` (and its base) that leaves no pair out of range.
NTK_BASE: _NtkBase = {"head_dim": 96, "base": 10000.0, "train_len": 4096, "target_len": 32768}
#: Exercise 3: the configurations ``(head_dim, base, factor, trained_len)`` a YaRN implementation is tried on.
YARN_PROBES = ((16, 10000.0, 4.0, 16), (64, 10000.0, 8.0, 2048), (128, 500000.0, 8.0, 8192), (96, 10000.0, 16.0, 4096))
#: Exercise 4: Llama 3's rule with ``factor`` 4 and ``low_freq_factor`` 0.5 (so it blends some pairs that never
#: turn), asked to read ``target_len`` = 16 × ``train_len``.
STRETCH = {
    "head_dim": 128,
    "base": 10000.0,
    "train_len": 4096,
    "target_len": 65536,
    "factor": 4.0,
    "low_freq_factor": 0.5,
    "high_freq_factor": 4.0,
}


def ntk_out_of_range(head_dim: int, base: float, train_len: int, factor: float) -> list[int]:
    """Pairs that never complete a turn in ``train_len`` positions and still exceed their largest
    trained angle at ``factor·train_len`` with the NTK-aware base ``base·factor^(d/(d-2))``."""
    theta = rope_frequencies(head_dim, base)
    theta_ntk = rope_frequencies(head_dim, base * factor ** (head_dim / (head_dim - 2)))
    never = train_len * theta / (2 * math.pi) < 1
    rho = factor * theta_ntk / theta  # (factor·L)·θ'_j / (L·θ_j)
    return (never & (rho > 1 + 1e-9)).nonzero().flatten().tolist()


def _pair_list(answer: object, pairs: int) -> tuple[list[int] | None, Feedback | None]:
    """A collection of pair indices (list, tuple, set, range, tensor, array) as a sorted list of distinct ints;
    a boolean mask over the ``pairs`` pairs of a head is read as the indices where it is true."""
    wrong = failed(f"Give the pair indices as a list, e.g. [3, 4, 5]; got {_short(answer)}.")
    if isinstance(answer, (str, bytes, dict)) or not hasattr(answer, "__iter__"):
        return None, wrong
    try:
        if isinstance(answer, torch.Tensor) or type(answer).__module__.split(".")[0] == "numpy":
            answer = answer.reshape(-1).tolist()  # type: ignore[attr-defined]  # a tensor or NumPy value (checked above)
        values = list(answer)[:10_000]
    except Exception:  # a meta tensor, an iterator that raises …
        return None, wrong
    if values and all(type(v).__name__ in ("bool", "bool_") for v in values):  # a mask such as never & (rho > 1)
        if len(values) != pairs:
            return None, failed(
                f"That is a mask of {len(values)} values: give the pair indices (e.g. with `.nonzero()`), "
                f"or a mask with one value per pair ({pairs})."
            )
        return [j for j, v in enumerate(values) if v], None
    items = []
    for value in values:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        number, problem = as_integer(value, "whole pair indices")
        if problem is not None:
            return None, problem
        assert number is not None  # set whenever problem is None
        items.append(number)
    return sorted(set(items)), None


@checker
def check_out_of_range(answer: object) -> Feedback:
    """Exercise 1: the pairs NTK-aware scaling leaves out of range for :data:`OUT_OF_RANGE`."""
    if is_placeholder(answer):
        return not_done()
    p = OUT_OF_RANGE
    pairs, problem = _pair_list(answer, p["head_dim"] // 2)
    if problem is not None:
        return problem
    assert pairs is not None  # set whenever problem is None
    d, half = p["head_dim"], p["head_dim"] // 2
    want = ntk_out_of_range(p["head_dim"], p["base"], p["train_len"], p["factor"])
    if pairs == want:
        return passed(
            f"{len(want)} pairs, {want[0]}…{want[-1]}: they never turn in training and NTK slows them by less than "
            f"s = {p['factor']:g}. Only the slowest pair, {half - 1}, is slowed by exactly s."
        )
    if any(not 0 <= j < half for j in pairs):
        return failed(f"Pair indices run from 0 to head_dim/2 - 1 = {half - 1}.")
    theta = rope_frequencies(d, p["base"])
    turned = [j for j in pairs if p["train_len"] * theta[j].item() / (2 * math.pi) >= 1]
    if turned:
        return failed(
            f"Pair {turned[0]} completes a turn within {p['train_len']} positions: it has seen every angle, so it "
            "cannot meet a new one. Find the first pair whose wavelength exceeds the trained length."
        )
    if half - 1 in pairs:
        return failed(
            f"Look at pair {half - 1} again: by how much does the NTK-aware base slow the slowest pair? "
            "(If your ρ for it comes out a hair above 1, e.g. 1.0000000000000013, that is floating-point "
            "rounding: compare with a small tolerance.)"
        )
    missing = [j for j in want if j not in pairs]
    if missing:
        return failed(
            "Some out-of-range pairs are missing. For each pair that never turns, compare the stretch s with "
            "the factor by which NTK slows that pair."
        )
    return failed("Not that set of pairs. Use ρ_j = n·θ'_j / (L·θ_j) for the pairs that never complete a turn.")


def _one_of(answer: object) -> object:
    """A one-element list or tuple, ``[5.27]``, read as its element (both numeric checkers alike)."""
    if isinstance(answer, (list, tuple)) and len(answer) == 1:
        return answer[0]
    return answer


def ntk_base(head_dim: int, base: float, scale: float) -> float:
    """``base·s^(d/(d-2))``: keeps ``θ_0`` and divides the slowest frequency by ``s``."""
    return base * scale ** (head_dim / (head_dim - 2))


def critical_pair(head_dim: int, base: float, train_len: int) -> int:
    """The first pair whose wavelength ``2π/θ_j`` is at least ``train_len``: it never completes a turn."""
    theta = rope_frequencies(head_dim, base)
    return int((train_len * theta / (2 * math.pi) < 1).nonzero()[0])


def smallest_ntk_factor(head_dim: int, base: float, train_len: int, target_len: int) -> float:
    """The smallest NTK factor ``s`` with ``ρ_j = (n/L)/s^(2j/(d-2)) ≤ 1`` on every pair that never turns.

    ``ρ_j`` falls with ``j``, so the critical pair ``j_c`` decides: ``s = (n/L)^((d-2)/(2 j_c))``."""
    j = critical_pair(head_dim, base, train_len)
    return (target_len / train_len) ** ((head_dim - 2) / (2 * j))


@checker
def check_ntk_base(scale: object, new_base: object) -> Feedback:
    """Exercise 2: the smallest NTK factor ``s`` that leaves no pair of :data:`NTK_BASE` out of range at
    ``target_len``, and its NTK-aware base.

    ``s`` is accepted to two decimals; the base to 0.1 %, or as the NTK base of the ``s`` given (the task asks
    for it to the nearest whole number; within 0.5 % the hint asks for more digits only for a base of at most four
    significant figures, and otherwise points at the exponent).
    """
    if is_placeholder(scale) or is_placeholder(new_base):
        return not_done()
    scale, new_base = _one_of(scale), _one_of(new_base)
    s, problem = as_number(scale, "the factor s (a number)")
    if problem is not None:
        return problem
    assert s is not None  # set whenever problem is None
    b, problem = as_number(new_base, "the new base (a number)")
    if problem is not None:
        return problem
    assert b is not None  # set whenever problem is None
    p = NTK_BASE
    d, base, L, n = p["head_dim"], p["base"], p["train_len"], p["target_len"]
    stretch = n / L
    want_s = smallest_ntk_factor(d, base, L, n)
    j = critical_pair(d, base, L)
    if not abs(s - want_s) <= 0.005 + 1e-4 * want_s:
        if math.isclose(s, stretch, rel_tol=1e-9):
            return failed(
                f"s = n/L = {stretch:g} is the stretch, and section 5 shows NTK set for the stretch leaves all but "
                "the slowest slow pair out of range. Which slow pair has the largest ρ, and what s brings it to 1?"
            )
        for other in (j - 1, j + 1, d // 2 - 1):
            if other > 0 and abs(s - stretch ** ((d - 2) / (2 * other))) <= 0.005 + 1e-4 * s:
                return failed(
                    f"That s brings pair {other} to ρ = 1. Is it the pair with the largest ρ among those that never "
                    "complete a turn? Check which pair is the first whose wavelength reaches the trained length."
                )
        if abs(s - stretch ** (d / (2 * j))) <= 0.005 + 1e-4 * s:
            return failed("Close: check the exponent. NTK slows pair j by s^(2j/(d-2)), not s^(2j/d).")
        if s < want_s:
            return failed(
                f"With s = {s:g} some pair that never turns still has ρ > 1. Write ρ_j as a function of s for the "
                "pair with the largest ρ and set it to 1."
            )
        return failed(
            f"With s = {s:g} every slow pair is in range, but a smaller s would do. Write ρ_j as a function of s "
            "for the pair with the largest ρ and set it to 1."
        )
    want = ntk_base(d, base, want_s)
    if abs(b - want) <= 1e-3 * want or abs(b - ntk_base(d, base, s)) <= max(1.0, 1e-4 * want):
        turning = want_s ** (2 * (j - 1) / (d - 2))  # the slow-down of the last pair that turns, j_c - 1
        return passed(
            f"s = (n/L)^((d-2)/(2·j_c)) = {stretch:g}^({d - 2}/{2 * j}) ≈ {want_s:.2f}, base' ≈ {want:.0f}: the "
            f"critical pair {j} has the largest ρ and is slowed by exactly n/L = {stretch:g}. s is "
            f"{want_s / stretch:.1f}× the stretch: NTK brings its slow pairs back only by slowing the pairs after "
            f"the critical one by more than the stretch, and the pairs that turn, which need no slowing, by up to "
            f"{turning:.1f}."
        )
    if abs(b - base * s) <= 1e-3 * base * s:
        return failed(
            "base·s divides the slowest frequency by s^((d-2)/d), slightly less than s: solve "
            "base'^(-(d-2)/d) = base^(-(d-2)/d)/s for base'."
        )
    if abs(b - base * s ** ((d - 2) / d)) <= 1e-3 * base * s:
        return failed("The exponent is upside down: solve the slowest pair's condition for base' again.")
    if abs(b - want) <= 5e-3 * want:
        if float(f"{b:.4g}") == b:  # a round number, e.g. 188000 or 1.88e5: the right base, cut short
            return failed(
                f"s is right, and the base {b:g} is close: give it to the nearest whole number (more digits)."
            )
        return failed(
            f"s is right, and the base {b:g} is close but not the NTK base of that s, and rounding is not "
            "the cause. Check the exponent of s in section 3's NTK-aware base."
        )
    return failed(f"s is right; the base is not {b:g}. Use section 3's NTK-aware base for that s.")


def _yarn_reference(head_dim: int, base: float, factor: float, trained_len: int) -> torch.Tensor:
    rule = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": trained_len}
    return scaled_frequencies(head_dim, rule, base=base)[0]


@contextmanager
def _watch_reference(fn: object) -> Iterator[list[bool]]:
    """While the block runs, every name bound to :func:`scaled_frequencies` in ``fn``'s module namespace
    (and ``pe_lessons.rotary.scaled_frequencies``, ``pe_lessons.scaled_frequencies``) calls it through a
    wrapper that records the call, so the checker can tell a fixed formula from a function that just asks the
    library for the answer."""
    called = [False]

    def watched(*args: object, **kwargs: object) -> object:
        called[0] = True
        return scaled_frequencies(*args, **kwargs)  # type: ignore[arg-type]

    namespace = getattr(fn, "__globals__", None)
    names = [k for k, v in namespace.items() if v is scaled_frequencies] if isinstance(namespace, dict) else []
    for name in names:
        namespace[name] = watched  # type: ignore[index]
    package = sys.modules[__name__.split(".")[0]]  # pe_lessons itself, which re-exports scaled_frequencies
    rotary.scaled_frequencies = watched  # type: ignore[assignment]
    package.scaled_frequencies = watched  # type: ignore[attr-defined]
    try:
        yield called
    finally:
        rotary.scaled_frequencies = scaled_frequencies
        package.scaled_frequencies = scaled_frequencies  # type: ignore[attr-defined]
        for name in names:
            namespace[name] = scaled_frequencies  # type: ignore[index]


@checker
def check_yarn_frequencies(fn: Callable[..., object]) -> Feedback:
    """Exercise 3: ``fn(head_dim, base, factor, trained_len)`` returns YaRN's ``θ'_j`` (Hugging Face's ramp),
    tried on every configuration of :data:`YARN_PROBES`."""
    if is_placeholder(fn):
        return not_done()
    for head_dim, base, factor, trained_len in YARN_PROBES:
        label = f"yarn_frequencies({head_dim}, {base:g}, {factor:g}, {trained_len})"
        with _watch_reference(fn) as called:
            got, problem = attempt(label, fn, head_dim, base, factor, trained_len)
        if problem is not None:
            return problem
        if called[0]:
            return failed(
                f"{label} calls scaled_frequencies: use it beside your function to compare, not inside it. "
                "The exercise is to find and fix the bug in the function's own formula."
            )
        try:
            got = torch.as_tensor(got, dtype=torch.float64).flatten() if not isinstance(got, torch.Tensor) else got
        except Exception:
            return failed(
                f"{label} must return a tensor of head_dim/2 = {head_dim // 2} frequencies, got {_short(got)}."
            )
        if got.shape != (head_dim // 2,):
            return failed(
                f"{label} must return {head_dim // 2} frequencies (one per pair), got shape {list(got.shape)}."
            )
        got = got.detach().to(torch.float64).cpu()
        if not bool(torch.isfinite(got).all()):
            return failed(f"{label} returned NaN or infinite frequencies.")
        want = _yarn_reference(head_dim, base, factor, trained_len)
        if torch.allclose(got, want, rtol=1e-5, atol=0):
            continue
        theta = rope_frequencies(head_dim, base)
        if math.isclose(got[0].item(), theta[0].item() / factor, rel_tol=1e-5):
            return failed(
                f"{label}: the fastest pair (j = 0) should be kept, yet it comes out divided by the factor. "
                "Which end of the ramp keeps a pair as it was?"
            )
        if math.isclose(got[-1].item(), theta[-1].item(), rel_tol=1e-5):
            return failed(f"{label}: the slowest pair is left as it was, yet it never completes a turn in training.")
        worst = int((got / want - 1).abs().argmax())
        return failed(
            f"{label}: pair {worst} is off ({got[worst].item():.4g}); compare your ramp's ends with the pairs "
            "that turn β_fast and β_slow times over the trained length."
        )
    return passed(
        f"Right on all {len(YARN_PROBES)} configurations: fast pairs kept, slow pairs divided by the factor, "
        "a ramp linear in the pair index in between."
    )


def _stretch_rho() -> tuple[torch.Tensor, torch.Tensor]:
    """ρ_j of every pair under :data:`STRETCH`'s rule, and the mask of the pairs that never turn in training."""
    p = STRETCH
    rule = {
        "rope_type": "llama3",
        "factor": p["factor"],
        "low_freq_factor": p["low_freq_factor"],
        "high_freq_factor": p["high_freq_factor"],
        "original_max_position_embeddings": p["train_len"],
    }
    theta = rope_frequencies(int(p["head_dim"]), p["base"])
    theta_rule = scaled_frequencies(int(p["head_dim"]), rule, base=p["base"])[0]
    never = p["train_len"] * theta / (2 * math.pi) < 1
    return p["target_len"] * theta_rule / (p["train_len"] * theta), never


@checker
def check_stretch_ratio(answer: object) -> Feedback:
    """Exercise 4: the largest ρ over the pairs that never turn, under :data:`STRETCH`'s rule (to 2 decimals)."""
    if is_placeholder(answer):
        return not_done()
    value, problem = as_number(_one_of(answer), "a number (the ratio ρ)")
    if problem is not None:
        return problem
    assert value is not None  # set whenever problem is None
    p = STRETCH
    stretch, s = p["target_len"] / p["train_len"], p["factor"]
    rho, never = _stretch_rho()
    want = rho[never].max().item()
    close = lambda target: abs(value - target) <= 0.005 + 1e-3 * abs(target)  # noqa: E731
    if close(want):
        blended = int((never & (rho > stretch / s + 1e-9)).sum())
        critical = int(never.nonzero()[0]) + int(rho[never].argmax())
        return passed(
            f"ρ ≈ {want:.2f}, above (n/L)/s = {stretch / s:g}: with low_freq_factor {p['low_freq_factor']:g} the rule "
            f"divides by the full factor only the wavelengths above L/{p['low_freq_factor']:g}; {blended} pairs that "
            f"never turn are blended, slowed by less than s, and the critical pair (pair {critical}), slowed least of "
            "them, meets the largest angles."
        )
    if close(stretch):
        return failed(
            f"{value:g} is the ρ of the pairs the rule keeps (wavelength below L/high_freq_factor): they complete "
            "turns in training. Take only the pairs that never turn."
        )
    if close(stretch / s):
        return failed(
            f"{value:g} = (n/L)/s is the ρ of a pair divided by the full factor. Are all the pairs that never turn "
            "divided by the full factor under this rule's low_freq_factor?"
        )
    if close(1 / want) or close(s / stretch):
        return failed("Upside down: ρ is the angle at the target length over the largest angle seen in training.")
    if any(close(r) for r in rho[~never].tolist()):
        return failed(
            f"ρ = {value:g} belongs to a pair that completes a turn in training: it has seen every angle. Take only "
            "the pairs whose wavelength exceeds the trained length."
        )
    if value.is_integer() and stretch < value < len(rho):  # above every pair's ρ (none exceeds n/L)
        return failed(f"{value:g} looks like a pair index: give ρ, the ratio of angles, not the pair it is on.")
    one_decimal = abs(value - round(value, 1)) < 1e-6  # float32's 5.2 is 5.1999998
    if one_decimal and abs(value - want) < 0.1:  # 5.3 or 5.2: the answer rounded or cut to one decimal
        return failed(f"{value:g} is close, but not within two decimals of ρ: give more digits.")
    if abs(value - want) <= 0.05:
        return failed(
            f"{value:g} is close, but not ρ: check the blend weight (L/λ_j − low_freq_factor)/(high_freq_factor − "
            "low_freq_factor) of the pair with the largest ρ."
        )
    return failed(
        f"Not {value:g}. Compute ρ_j = n·θ'_j / (L·θ_j) for every pair that never turns and take the largest."
    )
