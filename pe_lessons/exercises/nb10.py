"""Checkers for the exercises of notebook 10 (stretching RoPE's context: PI, NTK, YaRN, Llama 3).

The givens of each exercise live here too (:data:`CRITICAL`, :data:`NTK`, :data:`YARN`), so the
notebook and its solutions read the same numbers.
"""

from __future__ import annotations

import math
import numbers

from ._feedback import Feedback, _short, checker, failed, not_done, passed

__all__ = ["CRITICAL", "NTK", "YARN", "check_critical_pair", "check_ntk_base", "check_yarn_range"]

#: Exercise 1: the first pair that never completes a turn within the trained length.
CRITICAL = {"head_dim": 64, "base": 10000.0, "train_len": 2048}
#: Exercise 2: the NTK-aware base that stretches a model trained at ``train_len`` to ``target_len``.
NTK = {"head_dim": 128, "base": 10000.0, "train_len": 4096, "target_len": 16384}
#: Exercise 3: YaRN's correction range (β_fast = 32, β_slow = 1, truncated as in the reference code).
YARN = {"head_dim": 128, "base": 500000.0, "train_len": 8192, "beta_fast": 32.0, "beta_slow": 1.0}


def _pair_for_turns(turns: float, head_dim: int, base: float, train_len: int) -> float:
    """The (fractional) pair index ``i`` that turns ``turns`` times over ``train_len`` positions."""
    return head_dim * math.log(train_len / (turns * 2 * math.pi)) / (2 * math.log(base))


def _as_int(value: object) -> int | None:
    """``value`` as an int when it is an integer number (``4``, ``4.0``, a 0-d tensor), else ``None``."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except Exception:
            return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        if not math.isfinite(float(value)) or float(value) != int(value):
            return None
        return int(value)
    except (OverflowError, ValueError, TypeError):
        return None


def _as_float(value: object) -> float | None:
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except Exception:
            return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        return None
    return float(value)


def critical_pair(head_dim: int, base: float, train_len: int) -> int:
    """The first pair whose wavelength ``2π·base^(2i/head_dim)`` is at least ``train_len``."""
    return math.ceil(_pair_for_turns(1.0, head_dim, base, train_len))


@checker
def check_critical_pair(answer: object) -> Feedback:
    """Exercise 1: the index of the first pair that never completes a turn in training (:data:`CRITICAL`)."""
    if answer is None or answer is Ellipsis:
        return not_done()
    value = _as_int(answer)
    if value is None:
        return failed(f"Give the pair index as a whole number, got {_short(answer)}.")
    d, base, n = CRITICAL["head_dim"], CRITICAL["base"], CRITICAL["train_len"]
    want = critical_pair(d, base, n)
    exact = _pair_for_turns(1.0, d, base, n)
    if value == want:
        return passed(
            f"Pair {want}: its wavelength {2 * math.pi * base ** (2 * want / d):.0f} ≥ {n}, while pair {want - 1}'s "
            f"is {2 * math.pi * base ** (2 * (want - 1) / d):.0f}. "
            f"Pairs {want}…{d // 2 - 1} never turn once in training."
        )
    if value == want - 1:
        return failed(
            f"Pair {value} still completes a turn within {n} positions (wavelength "
            f"{2 * math.pi * base ** (2 * value / d):.0f} < {n}); the solution of λ_i = L is i = {exact:.2f}: round up."
        )
    if value == math.ceil(d * math.log(n) / (2 * math.log(base))):
        return failed(
            "The wavelength is 2π/θ_i, not 1/θ_i: solve 2π·base^(2i/d) = L, i.e. i = (d/2)·ln(L/2π)/ln(base)."
        )
    if value == 2 * want:
        return failed(f"That is a feature index (Liu et al.'s 'critical dimension' 2i); the pair index is {value}/2.")
    if not 0 <= value < d // 2:
        return failed(f"A pair index lies between 0 and head_dim/2 - 1 = {d // 2 - 1}, got {value}.")
    return failed(f"Not pair {value}. Solve 2π·base^(2i/head_dim) ≥ L for the smallest integer i.")


def ntk_base(head_dim: int, base: float, scale: float) -> float:
    """``base·s^(d/(d-2))``: keeps ``θ_0`` and divides the slowest frequency by ``s``."""
    return base * scale ** (head_dim / (head_dim - 2))


@checker
def check_ntk_base(scale: object, new_base: object) -> Feedback:
    """Exercise 2: the scale factor ``s`` and NTK-aware base for :data:`NTK`'s target length."""
    if scale is None or new_base is None or scale is Ellipsis or new_base is Ellipsis:
        return not_done()
    s, b = _as_float(scale), _as_float(new_base)
    if s is None or b is None:
        return failed(f"Give two finite numbers (the scale and the base), got {_short(scale)} and {_short(new_base)}.")
    d, base = NTK["head_dim"], NTK["base"]
    want_s = NTK["target_len"] / NTK["train_len"]
    if not math.isclose(s, want_s, rel_tol=1e-9):
        if math.isclose(s, 1 / want_s, rel_tol=1e-9):
            return failed(f"The scale is target / trained = {NTK['target_len']} / {NTK['train_len']}, not the inverse.")
        return failed(f"The scale factor s is the target length over the trained length, not {s:g}.")
    want = ntk_base(d, base, want_s)
    if math.isclose(b, want, rel_tol=1e-6):
        return passed(
            f"s = {want_s:g}, base' = {base:g}·{want_s:g}^({d}/{d - 2}) ≈ {want:.0f}: θ_0 stays 1 and the slowest "
            f"pair turns exactly {want_s:g}× slower."
        )
    if math.isclose(b, base * want_s, rel_tol=1e-6):
        return failed(
            f"base·s ({b:.0f}) divides the slowest frequency by s^((d-2)/d), slightly less than s: solve "
            f"base'^(-(d-2)/d) = base^(-(d-2)/d)/s for base'."
        )
    if math.isclose(b, base * want_s ** ((d - 2) / d), rel_tol=1e-6):
        return failed("The exponent is upside down: base' = base·s^(d/(d-2)).")
    return failed(f"Not {b:g}. Ask the slowest pair, i = d/2 - 1, to turn s times slower and solve for the base.")


def yarn_range(head_dim: int, base: float, train_len: int, beta_fast: float, beta_slow: float) -> tuple[int, int]:
    """YaRN's ramp ends ``(floor(i(β_fast)), ceil(i(β_slow)))``, clipped to ``[0, head_dim - 1]``."""
    low = math.floor(_pair_for_turns(beta_fast, head_dim, base, train_len))
    high = math.ceil(_pair_for_turns(beta_slow, head_dim, base, train_len))
    return max(low, 0), min(high, head_dim - 1)


@checker
def check_yarn_range(answer: object) -> Feedback:
    """Exercise 3: ``(low, high)`` of YaRN's ramp for :data:`YARN`."""
    if answer is None or answer is Ellipsis:
        return not_done()
    items = None
    if not isinstance(answer, (str, bytes)):
        try:
            items = list(answer)
        except Exception:
            items = None
    if items is None or len(items) != 2:
        return failed(f"Give two numbers (low, high), got {_short(answer)}.")
    low, high = (_as_int(v) for v in items)
    if low is None or high is None:
        return failed(f"Both ends are whole pair indices (floor and ceil), got {_short(answer)}.")
    p = YARN
    want = yarn_range(p["head_dim"], p["base"], p["train_len"], p["beta_fast"], p["beta_slow"])
    if (low, high) == want:
        return passed(
            f"Pairs below {want[0]} turn more than {p['beta_fast']:g} times in {p['train_len']} positions and are left "
            f"alone; pairs from {want[1]} on turn less than {p['beta_slow']:g} time and are interpolated by s; "
            "the ramp runs in between."
        )
    if (high, low) == want:
        return failed("Swapped: β_fast (many turns: fast pairs, small i) gives the low end.")
    exact = (
        _pair_for_turns(p["beta_fast"], p["head_dim"], p["base"], p["train_len"]),
        _pair_for_turns(p["beta_slow"], p["head_dim"], p["base"], p["train_len"]),
    )
    if (low, high) in {(round(exact[0]), round(exact[1])), (math.ceil(exact[0]), math.floor(exact[1]))}:
        return failed(
            f"Close: the exact ends are {exact[0]:.2f} and {exact[1]:.2f}; round the low end down, the high up."
        )
    return failed("Not that range. Pair i turns L·θ_i/2π times over L positions: solve it for β_fast and β_slow turns.")
