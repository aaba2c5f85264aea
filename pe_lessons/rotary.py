r"""Rotary position embedding, RoPE (Su et al. 2021, RoFormer §3.4), and its context-extension rules.

Instead of adding a vector to the token embedding, RoPE rotates each query
and key. The ``head_dim`` features form ``head_dim/2`` pairs; pair ``i`` of
the vector at position ``m`` is turned by the angle ``m·θ_i`` with

.. math::

    \theta_i = \mathrm{base}^{-2i/\mathrm{head\_dim}}, \qquad
    \begin{pmatrix} y_a \\ y_b \end{pmatrix} =
    \begin{pmatrix} \cos m\theta_i & -\sin m\theta_i \\ \sin m\theta_i & \cos m\theta_i \end{pmatrix}
    \begin{pmatrix} x_a \\ x_b \end{pmatrix}

— in complex numbers, ``(x_a + i·x_b) · e^{i·m·θ_i}``. A rotation by ``m·θ``
followed by one by ``-n·θ`` is a rotation by ``(m - n)·θ``, so
``⟨R_m q, R_n k⟩ = ⟨q, R_{n-m} k⟩`` depends on the positions only through
``m - n``. :func:`rope_formula` is that definition written out, one step per
line; read it first.

Which features make a pair is the **layout**:

- ``"interleaved"``: ``(2i, 2i+1)`` — the RoFormer paper, Meta's llama
  reference code (``view_as_complex``), torchtune, GPT-J;
- ``"half"``: ``(i, i + head_dim/2)`` — Hugging Face Llama (``rotate_half``),
  GPT-NeoX.

The two are the same map up to the feature permutation
``P = [0, 2, …, head_dim-2, 1, 3, …, head_dim-1]`` (:func:`to_half_layout`):
``rope_half(x[..., P]) == rope_interleaved(x)[..., P]``.

Context extension (:func:`scaled_frequencies`). Models whose context was stretched
after pre-training change the frequencies ``θ_i`` per pair, and some multiply cos and
sin by an attention factor: ``"linear"`` (position interpolation), ``"dynamic"`` (NTK
base change growing with the length), ``"yarn"``, ``"llama3"``, ``"longrope"`` — given
as a dict in the form of a Hugging Face config's ``rope_parameters``. ``rotary_dim``
rotates only the first features of each head (GPT-NeoX ``rotary_pct``, GPT-J
``rotary_dim``); positions may be ``[seq]`` or one row per batch element
``[batch, seq]`` (left padding, packed sequences), integers or fractional floats.

Accuracy. Angles ``m·θ_i`` are formed in float64 and their cos/sin rounded
once to the working precision (float32, or float64 for float64 inputs); the
rotation itself runs in that precision. fp16/bf16 inputs are rotated in
float32 and rounded once at the end. Integer positions are exact up to
:data:`MAX_POSITION` = 2**32 in magnitude (the float64 angle is then within 1e-6 rad; larger
positions are refused where the host knows them, not silently rounded); never hold
positions in float16/bfloat16 (they round large integers: bfloat16 keeps 8
significant bits), which is why those dtypes are refused.

Speed. :func:`apply_rope` and :class:`RotaryEmbedding` compute what
:func:`rope_formula` computes, through the fast path of :mod:`pe_lessons._rope_fast`:
cached cos/sin tables (shared ones bounded by bytes, see :func:`rope_cache_bytes` and
:func:`clear_rope_cache`), one complex multiplication for the interleaved layout, a
copy-free half layout, an exact autograd rule, and a formula ``torch.compile`` fuses.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from . import _rope_fast as fast
from ._checks import (
    check_base,
    check_bool,
    check_choice,
    check_d_model,
    check_float_tensor,
    check_int,
    check_positive_int,
    check_real,
    check_reals,
    check_tensor,
)
from .sinusoidal import float64_device, interleave, inverse_frequencies

__all__ = [
    "LAYOUTS",
    "ROPE_TYPES",
    "SCALING_RULES",
    "rope_frequencies",
    "rope_formula",
    "scaled_frequencies",
    "apply_rope",
    "RotaryEmbedding",
    "to_half_layout",
    "to_interleaved_layout",
    "rope_cache_bytes",
    "clear_rope_cache",
]

#: The two pairings in use: ``"interleaved"`` (2i, 2i+1) and ``"half"`` (i, i + head_dim/2).
LAYOUTS = ("interleaved", "half")
_LAYOUT_HINT = (
    "interleaved: pairs (2i, 2i+1) as in RoFormer, Meta llama, torchtune; "
    "half: pairs (i, i + head_dim/2) as in Hugging Face rotate_half, GPT-NeoX"
)

Positions = torch.Tensor | Sequence[int] | Sequence[float] | None


def rope_frequencies(head_dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    r"""``θ_i = base^(-2i/head_dim)`` for ``i = 0 … head_dim/2 - 1`` (length ``head_dim // 2``).

    The sinusoidal encoding's frequencies ``ω_i`` with ``d_model = head_dim``
    (:func:`pe_lessons.sinusoidal.inverse_frequencies`, computed in float64, cast to ``dtype``).
    """
    return inverse_frequencies(check_d_model(head_dim, "head_dim"), base, dtype=dtype)


# --------------------------------------------------------------------------- the definition


def rope_formula(
    x: torch.Tensor,
    positions: Positions = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    scaling: Mapping[str, object] | None = None,
    rotary_dim: int | None = None,
) -> torch.Tensor:
    r"""RoPE as its definition, one step per line, computed in float64 and rounded once to ``x.dtype``.

    Same arguments and same result as :func:`apply_rope` (to float rounding), without any
    of its speed-ups: read this one, run that one.
    """
    x, m, theta, attention, r = _definition_inputs(x, positions, base, layout, scaling, rotary_dim)
    angles = m[..., None] * theta  # m·θ_i for every position m and pair i
    cos, sin = attention * torch.cos(angles), attention * torch.sin(angles)
    turned = x[..., :r].to(m.device, torch.float64)  # only the first rotary_dim features turn
    if layout == "interleaved":  # the two members of each pair: (2i, 2i+1) …
        a, b = turned[..., 0::2], turned[..., 1::2]
    else:  # … or (i, i + r/2)
        a, b = turned.chunk(2, dim=-1)
    a, b = a * cos - b * sin, a * sin + b * cos  # rotate every pair by its angle
    turned = interleave(a, b) if layout == "interleaved" else torch.cat((a, b), dim=-1)  # pairs back in place
    return torch.cat((turned.to(x.device, x.dtype), x[..., r:]), dim=-1)


def _definition_inputs(
    x: object,
    positions: object,
    base: float,
    layout: object,
    scaling: Mapping[str, object] | None,
    rotary_dim: object,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, int]:
    """:func:`rope_formula`'s arguments, checked: ``x``, the positions ``m`` (float64, ``[seq]`` or
    ``[batch, 1, …, 1, seq]``, so they broadcast against ``x``), ``θ'_i``, the attention factor and ``rotary_dim``."""
    x, pos, bounds, r = _check_call(x, positions, layout, rotary_dim)
    params = _check_scaling(scaling, r)
    theta, attention = scaled_frequencies(r, scaling, base=base, seq_len=_sequence_length(params, x, pos, bounds))
    work = float64_device(x.device)
    m = (torch.arange(x.shape[-2]) if pos is None else pos).to(work, torch.float64)  # default positions 0 … seq-1
    if m.dim() == 2:  # one row of positions per batch element, the same for every head
        m = m.reshape(m.shape[0], *[1] * (x.dim() - 3), m.shape[1])
    return x, m, theta.to(work), attention, r


# --------------------------------------------------------------------------- context extension
# One function per rule, in the shape of transformers' ROPE_INIT_FUNCTIONS: it gets the head
# width, the base and the length it looks at, and its keyword-only parameters are the rule's keys
# (required unless they have a default). Each key is checked by _PARAMETERS before the rule runs
# (a key means the same in every rule that takes it); the rule checks how its keys relate.


def _default(head_dim: int, base: float, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """No extension: ``θ_i``."""
    return rope_frequencies(head_dim, base), 1.0


def _linear(head_dim: int, base: float, seq_len: int | None, *, factor: float) -> tuple[torch.Tensor, float]:
    """Position interpolation: ``θ_i / s``, the same as positions ``m/s``."""
    return rope_frequencies(head_dim, base) / factor, 1.0


def _dynamic(
    head_dim: int, base: float, seq_len: int | None, *, factor: float, original_max_position_embeddings: int
) -> tuple[torch.Tensor, float]:
    """The NTK-aware base ``base·α^{d/(d-2)}`` for the length in hand: ``α = s·n/L - (s - 1)``, ``n = max(seq_len, L)``."""
    if head_dim < 4:
        raise ValueError("rope_type 'dynamic' needs head_dim >= 4 (its base exponent is d/(d-2))")
    L = original_max_position_embeddings
    n = L if seq_len is None else max(seq_len, L)
    alpha = factor * n / L - (factor - 1)  # 1 (no change) up to L
    return rope_frequencies(head_dim, base * alpha ** (head_dim / (head_dim - 2))), 1.0


def _yarn(
    head_dim: int,
    base: float,
    seq_len: int | None,
    *,
    factor: float,
    original_max_position_embeddings: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
    attention_factor: float | None = None,
    truncate: bool = True,
) -> tuple[torch.Tensor, float]:
    """``θ'_i = (1 - γ_i)·θ_i + γ_i·θ_i/s``, the ramp ``γ`` rising from the pair that turns ``beta_fast``
    times over ``L`` to the one that turns ``beta_slow`` times; cos and sin times ``0.1·ln s + 1``."""
    if beta_fast <= beta_slow:
        raise ValueError(
            "scaling['beta_fast'] must be larger than scaling['beta_slow'] (fast pairs turn more often), got "
            f"{beta_fast} and {beta_slow}"
        )
    L = original_max_position_embeddings

    def pair_turning(turns: float) -> float:  # the pair i that turns `turns` times over L: L·θ_i/2π = turns
        return head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_turning(beta_fast), pair_turning(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # (as the reference implementation: no division by zero)
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    theta = rope_frequencies(head_dim, base)
    theta = theta * (1 - ramp) + theta / factor * ramp  # fast pairs kept, slow pairs interpolated
    if attention_factor is None:
        if mscale and mscale_all_dim:
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    return theta, attention_factor


def _yarn_mscale(s: float, m: float = 1.0) -> float:
    """YaRN's factor on cos and sin for the scale ``s``: ``0.1·m·ln s + 1`` (1 for ``s <= 1``)."""
    return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0


def _llama3(
    head_dim: int,
    base: float,
    seq_len: int | None,
    *,
    factor: float,
    low_freq_factor: float,
    high_freq_factor: float,
    original_max_position_embeddings: int,
) -> tuple[torch.Tensor, float]:
    """Wavelengths below ``L/high_freq_factor`` kept, above ``L/low_freq_factor`` divided by ``s``, blended between."""
    if high_freq_factor <= low_freq_factor:
        raise ValueError(
            "scaling['high_freq_factor'] must be larger than scaling['low_freq_factor'] (Llama 3.1: 4 and 1), got "
            f"{high_freq_factor} and {low_freq_factor}"
        )
    L = original_max_position_embeddings
    theta = rope_frequencies(head_dim, base)
    wavelength = 2 * math.pi / theta
    alpha = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)  # 0 at L/low, 1 at L/high
    interpolated = torch.where(wavelength > L / low_freq_factor, 1.0 / factor, (1 - alpha) / factor + alpha)
    return theta * torch.where(wavelength < L / high_freq_factor, 1.0, interpolated), 1.0


def _longrope(
    head_dim: int,
    base: float,
    seq_len: int | None,
    *,
    short_factor: tuple[float, ...],
    long_factor: tuple[float, ...],
    original_max_position_embeddings: int,
    factor: float | None = None,
    attention_factor: float | None = None,
) -> tuple[torch.Tensor, float]:
    """``θ_i / f_i``, the per-pair ``long_factor`` beyond ``L``, else ``short_factor``; cos and sin times
    ``sqrt(1 + ln s / ln L)``."""
    if factor is None and attention_factor is None:
        raise ValueError(
            "scaling for rope_type 'longrope' needs the key 'factor' (the context ratio, max_position_embeddings / "
            "original_max_position_embeddings) or 'attention_factor'"
        )
    L = original_max_position_embeddings
    factors = long_factor if seq_len is not None and seq_len > L else short_factor
    theta = rope_frequencies(head_dim, base) / torch.tensor(factors, dtype=torch.float64)
    if attention_factor is None:
        assert factor is not None
        attention_factor = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(L))
    return theta, attention_factor


class ScalingRule(NamedTuple):
    """A context-extension rule: its frequencies, and the part of the sequence length they depend on."""

    #: ``frequencies(head_dim, base, seq_len, **parameters) -> (θ'_i float64 [head_dim/2], attention factor)``
    frequencies: Callable[..., tuple[torch.Tensor, float]]
    #: ``length_seen(parameters, seq_len)``: the part of the length the frequencies depend on (``None``: none)
    length_seen: Callable[[Mapping[str, Any], int], int | None] | None = None


#: ``rope_type`` → its rule (the shape of transformers' ``ROPE_INIT_FUNCTIONS``).
SCALING_RULES: dict[str, ScalingRule] = {
    "default": ScalingRule(_default),
    "linear": ScalingRule(_linear),
    "dynamic": ScalingRule(_dynamic, lambda p, n: max(n, p["original_max_position_embeddings"])),
    "yarn": ScalingRule(_yarn),
    "llama3": ScalingRule(_llama3),
    # the long factors beyond L, the short ones up to it: two answers
    "longrope": ScalingRule(
        _longrope,
        lambda p, n: p["original_max_position_embeddings"] + 1 if n > p["original_max_position_embeddings"] else None,
    ),
}

#: The ``rope_type`` values :func:`scaled_frequencies` understands.
ROPE_TYPES = tuple(SCALING_RULES)


def _positive(name: str, value: object, head_dim: int) -> float:
    return check_real(name, value, above=0.0)


def _non_negative(name: str, value: object, head_dim: int) -> float:
    return check_real(name, value, minimum=0.0)


def _one_per_pair(name: str, value: object, head_dim: int) -> tuple[float, ...]:
    return check_reals(name, value, length=head_dim // 2, above=0.0)


#: How each key of a rule is checked: ``check(name, value, head_dim)`` → the value as a plain Python object.
_PARAMETERS: dict[str, Callable[[str, object, int], object]] = {
    "factor": lambda name, value, head_dim: check_real(name, value, minimum=1.0, hint="the context ratio"),
    "original_max_position_embeddings": lambda name, value, head_dim: check_positive_int(name, value),
    "beta_fast": _positive,
    "beta_slow": _positive,
    "attention_factor": _positive,
    "low_freq_factor": _positive,
    "high_freq_factor": _positive,
    "mscale": _non_negative,
    "mscale_all_dim": _non_negative,
    "truncate": lambda name, value, head_dim: check_bool(name, value),
    "short_factor": _one_per_pair,
    "long_factor": _one_per_pair,
}

#: Keys of a Hugging Face config that this module takes as arguments instead.
_ARGUMENT_KEYS = {"rope_theta": " (pass it as base=)", "partial_rotary_factor": " (pass rotary_dim= instead)"}


@functools.cache
def _rule_keys(kind: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The keys the rule ``kind`` requires, and the ones it may take besides with their defaults."""
    keyword = [
        p for p in inspect.signature(SCALING_RULES[kind].frequencies).parameters.values() if p.kind is p.KEYWORD_ONLY
    ]
    required = tuple(p.name for p in keyword if p.default is p.empty)
    return required, {p.name: p.default for p in keyword if p.default is not p.empty}


def _check_scaling(scaling: object, head_dim: int) -> dict[str, Any]:
    """A context-extension rule, checked: ``rope_type`` and the rule's keys as plain Python values."""
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict like a Hugging Face rope_parameters, got {type(scaling).__name__}"
        )
    if "rope_type" not in scaling:
        raise ValueError(f"scaling needs the key 'rope_type' (one of {', '.join(map(repr, ROPE_TYPES))})")
    kind = check_choice("scaling['rope_type']", scaling["rope_type"], ROPE_TYPES)
    required, optional = _rule_keys(kind)
    unknown = [key for key in scaling if key != "rope_type" and key not in required and key not in optional]
    if unknown:
        raise ValueError(
            f"scaling key {unknown[0]!r} is not used by rope_type {kind!r}{_ARGUMENT_KEYS.get(unknown[0], '')}; "
            f"its keys are {', '.join(map(repr, sorted(['rope_type', *required, *optional])))}"
        )
    missing = [key for key in required if key not in scaling]
    if missing:
        raise ValueError(f"scaling for rope_type {kind!r} needs the key {missing[0]!r}")
    checked: dict[str, Any] = {"rope_type": kind}
    for key, value in scaling.items():
        if key != "rope_type" and not (value is None and optional.get(key, 0) is None):  # None: the default
            checked[key] = _PARAMETERS[key](f"scaling[{key!r}]", value, head_dim)
    return checked


def _hashable(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A checked rule as a cache key."""
    return tuple(sorted(params.items()))


def _length_seen(params: Mapping[str, Any], seq_len: int | None) -> int | None:
    """The part of ``seq_len`` the rule's frequencies depend on (``None`` for most rules), so that
    every length with the same part shares one cached answer."""
    length_seen = SCALING_RULES[params["rope_type"]].length_seen
    return None if length_seen is None or seq_len is None else length_seen(params, seq_len)


@functools.lru_cache(maxsize=256)
def _rule_frequencies(
    head_dim: int, base: float, rule: tuple[tuple[str, Any], ...], length: int | None
) -> tuple[torch.Tensor, float]:
    """``θ'_i`` and the attention factor of a checked rule (:func:`_hashable`), remembered: the fast path
    asks on every call. The answer is shared: never modify it."""
    params = dict(rule)
    frequencies = SCALING_RULES[params.pop("rope_type")].frequencies
    theta, attention = frequencies(head_dim, base, length, **params)
    return theta, float(attention)


@torch.compiler.assume_constant_result
def _rule_frequencies_constant(
    head_dim: int, base: float, rule: tuple[tuple[str, Any], ...], length: int | None
) -> tuple[torch.Tensor, float]:
    """:func:`_rule_frequencies`, which ``torch.compile`` calls while tracing and takes as a constant."""
    return _rule_frequencies(head_dim, base, rule, length)


def scaled_frequencies(
    head_dim: int, scaling: Mapping[str, object] | None, *, base: float = 10000.0, seq_len: int | None = None
) -> tuple[torch.Tensor, float]:
    r"""The frequencies ``θ'_i`` (float64, ``[head_dim/2]``) and attention factor of a context-extension rule.

    ``scaling`` is ``None`` or a dict in the form of a Hugging Face config's ``rope_parameters``
    (without ``rope_theta``: that is ``base``). With ``θ_i = base^(-2i/head_dim)``, trained
    length ``L`` = ``original_max_position_embeddings`` and ``s`` = ``factor``:

    - ``"default"``: ``θ_i``.
    - ``"linear"`` (position interpolation, Chen et al. 2023): ``θ_i / s`` — the same as positions ``m/s``.
    - ``"dynamic"`` (NTK-aware, bloc97 2023; dynamic, emozilla 2023): the NTK-aware base for the
      scale ``α = s·n/L - (s - 1)`` of the length ``n = max(seq_len, L)`` in hand,
      ``base' = base·α^{d/(d-2)}``, which keeps ``θ_0`` and divides the slowest ``θ`` by ``α``
      (``α = 1``, no change, up to ``L``). (Hugging Face reads ``L`` from ``max_position_embeddings`` here.)
    - ``"yarn"`` (Peng et al. 2023): ``θ'_i = (1 - γ_i)·θ_i + γ_i·θ_i/s``, with the ramp ``γ_i`` rising
      from 0 at the pair that turns ``beta_fast`` (32) times over ``L`` to 1 at the one that turns
      ``beta_slow`` (1) times; pair ``i`` turns ``L·θ_i/2π`` times, so the ends are
      ``d·ln(L/(2π·β))/(2·ln base)`` (floored/ceiled unless ``truncate=False``). Attention factor
      ``0.1·ln s + 1`` (or ``attention_factor``, or the ratio for ``mscale``/``mscale_all_dim``).
    - ``"llama3"`` (Llama 3.1): wavelengths ``λ_i = 2π/θ_i`` below ``L/high_freq_factor`` are kept,
      those above ``L/low_freq_factor`` divided by ``s``, and in between
      ``θ'_i = (1 - α)·θ_i/s + α·θ_i`` with ``α = (L/λ_i - low_freq_factor)/(high_freq_factor - low_freq_factor)``.
    - ``"longrope"`` (LongRoPE, Phi-3): ``θ_i / f_i`` with the per-pair ``long_factor`` when
      ``seq_len > L``, else ``short_factor``; attention factor ``sqrt(1 + ln s / ln L)`` (``s`` =
      ``factor``, the context ratio) unless ``attention_factor`` is given.

    ``seq_len`` is the length ``"dynamic"`` and ``"longrope"`` look at (others ignore it).
    Each rule is one function in :data:`SCALING_RULES`. A value of the wrong kind raises ``TypeError``;
    a missing or unknown key, or a bad value, ``ValueError`` — each naming the key.
    """
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    params = _check_scaling(scaling, head_dim)
    seq_len = None if seq_len is None else check_positive_int("seq_len", seq_len)
    theta, attention = _rule_frequencies(head_dim, base, _hashable(params), _length_seen(params, seq_len))
    return theta.clone(), attention


# --------------------------------------------------------------------------- the fast versions


def apply_rope(
    x: torch.Tensor,
    positions: Positions = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    scaling: Mapping[str, object] | None = None,
    rotary_dim: int | None = None,
) -> torch.Tensor:
    r"""Rotate every pair of features of ``x`` by ``m·θ_i`` (``m`` = position, ``θ_i = base^(-2i/head_dim)``).

    ``x`` is ``[..., seq, head_dim]`` with a floating dtype. ``positions`` is ``None``
    (``0 … seq-1``), or a tensor (or list) of shape ``[seq]`` — e.g. ``torch.arange(start,
    start + seq)`` for cached decoding — or ``[batch, seq]``, one row per element of
    ``x.shape[0]`` (left-padded batches, packed sequences; ``x`` is then ``[batch, …, seq,
    head_dim]``). Integer positions are exact (up to :data:`MAX_POSITION` = 2**32 in magnitude; larger ones
    are refused), negative ones rotate backwards; float32/float64
    positions may be fractional (position interpolation). ``layout`` is ``"interleaved"``
    (pairs ``(2i, 2i+1)``) or ``"half"`` (pairs ``(i, i + head_dim/2)``). ``scaling`` is a
    context-extension rule (:func:`scaled_frequencies`; for ``"dynamic"`` and ``"longrope"``
    the length is the largest position + 1, read back from the device when positions live
    there). ``rotary_dim`` rotates only the first ``rotary_dim`` features of each head (pairs
    formed among them in ``layout``) and passes the rest through.

    Returns a new tensor with ``x``'s shape and dtype, equal to :func:`rope_formula` up to the
    rounding of the working precision: angles come from float64, the rotation runs in float32
    (float64 for float64 ``x``). Differentiable (the gradient is the inverse rotation), and works
    under ``torch.func`` and ``torch.compile``. Integer positions on an accelerator are used
    without reading them back (no synchronisation); pass CPU positions (or a list) to use the cache.
    """
    x, pos, bounds, r = _check_call(x, positions, layout, rotary_dim)
    base = check_base(base)
    params = _check_scaling(scaling, r)
    key = (r, base, _hashable(params), _length_seen(params, _sequence_length(params, x, pos, bounds)))
    # (torch.compile traces the rule itself: its answer becomes a constant of the graph)
    theta, attention = _rule_frequencies_constant(*key)
    dtype = fast.working_dtype(x.dtype)
    kind = fast.table_kind(layout, x.dtype)
    tables = fast.shared_lookup(key, theta, attention, pos, bounds, x.shape[-2], x.device, dtype, kind)
    return _rotate_first(x, tables, layout, r, pos)


def _rotate_first(
    x: torch.Tensor, tables: tuple[torch.Tensor, ...], layout: str, r: int, pos: torch.Tensor | None
) -> torch.Tensor:
    """Rotate the first ``r`` features of ``x`` with ``tables`` (per-row tables broadcast over the heads)."""
    if pos is not None and pos.dim() == 2:  # [batch, seq, k] → [batch, 1, …, 1, seq, k]
        tables = tuple(t.reshape(t.shape[0], *[1] * (x.dim() - 3), *t.shape[1:]) for t in tables)
    if r == x.shape[-1]:
        return fast.apply_tables(x, tables, layout)
    return torch.cat((fast.apply_tables(x[..., :r], tables, layout), x[..., r:]), dim=-1)


class RotaryEmbedding(nn.Module):
    r"""Rotates queries or keys by their positions, with a cached cos/sin table.

    ``forward(x, positions=None)`` takes ``x`` of shape ``[..., seq, head_dim]`` (e.g.
    ``[batch, heads, seq, head_dim]``) and returns what :func:`apply_rope` returns with this
    module's ``base``, ``layout``, ``scaling`` and ``rotary_dim``. The table rows
    ``cos(m·θ_i)``, ``sin(m·θ_i)`` (times the attention factor) are computed in float64 and
    stored in float32 (float64 for float64 inputs) on the input's device: the cache follows the
    input's device and dtype and grows (to the next power of two) when longer sequences or
    larger positions arrive. Negative, fractional and device-resident positions, and positions
    beyond :attr:`max_cached_len`, get their cos/sin computed directly (still from float64
    angles) instead of gathered from the cache.

    ``cos`` and ``sin`` (``[max_len, rotary_dim/2]``) are the cache, not state: nothing is in
    ``state_dict`` (they are a function of the arguments). No parameters.
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        *,
        layout: str = "interleaved",
        scaling: Mapping[str, object] | None = None,
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = check_d_model(head_dim, "head_dim")
        self.base = check_base(base)
        self.layout = check_choice("layout", layout, LAYOUTS, hint=_LAYOUT_HINT)
        self.rotary_dim = self.head_dim if rotary_dim is None else _check_rotary_dim(rotary_dim, self.head_dim)
        self.scaling = _check_scaling(scaling, self.rotary_dim)
        self._rule = _hashable(self.scaling)
        # one cache per length the rule sees (several only for dynamic/longrope): the two most recently used
        self._caches: OrderedDict[int | None, fast.CosSinCache] = OrderedDict()
        self._last = self._cache_for(None)

    @property
    def cos(self) -> torch.Tensor:
        """The cached ``attention·cos(m·θ_i)``, ``[max_len, rotary_dim/2]``, of the frequencies last used."""
        return self._last.cos

    @property
    def sin(self) -> torch.Tensor:
        """The cached ``attention·sin(m·θ_i)``, ``[max_len, rotary_dim/2]``, of the frequencies last used."""
        return self._last.sin

    @property
    def max_len(self) -> int:
        """Positions ``0 … max_len-1`` the cache holds now (it grows on demand)."""
        return self._last.max_len

    @property
    def max_cached_len(self) -> int:
        """The cache never grows beyond this many positions (``2**21 / (rotary_dim/2)``, at least 4096)."""
        return self._last.max_rows

    def _cache_for(self, length: int | None) -> fast.CosSinCache:
        """The cos/sin cache of the frequencies the rule gives for ``length`` (:func:`_length_seen`)."""
        cache = self._caches.pop(length, None)
        if cache is None:
            cache = fast.CosSinCache(*_rule_frequencies(self.rotary_dim, self.base, self._rule, length))
        self._caches[length] = cache  # the most recently used last
        if len(self._caches) > 2:
            self._caches.popitem(last=False)
        self._last = cache
        return cache

    def forward(self, x: torch.Tensor, positions: Positions = None) -> torch.Tensor:
        x, pos, bounds, _ = _check_call(x, positions, self.layout, None, head_dim=self.head_dim)
        cache = self._cache_for(_length_seen(self.scaling, _sequence_length(self.scaling, x, pos, bounds)))
        kind = fast.table_kind(self.layout, x.dtype)
        tables = cache.lookup(pos, bounds, x.shape[-2], x.device, fast.working_dtype(x.dtype), kind)
        return _rotate_first(x, tables, self.layout, self.rotary_dim, pos)

    def extra_repr(self) -> str:
        text = f"head_dim={self.head_dim}, base={self.base:g}, layout={self.layout!r}, max_len={self.max_len}"
        if self.rotary_dim != self.head_dim:
            text += f", rotary_dim={self.rotary_dim}"
        if self.scaling["rope_type"] != "default":
            text += f", scaling={self.scaling!r}"
        return text


def rope_cache_bytes() -> int:
    """Bytes held now by the cos/sin tables :func:`apply_rope` keeps between calls.

    They are dropped, least recently used first, beyond ``pe_lessons._rope_fast.CACHE_LIMIT_BYTES``
    (64 MiB). :class:`RotaryEmbedding` modules keep their own table, not counted here.
    """
    return fast.cache_bytes()


def clear_rope_cache() -> None:
    """Drop the cos/sin tables :func:`apply_rope` keeps between calls (rebuilt on demand)."""
    fast.clear_cache()


# --------------------------------------------------------------------------- layouts


def _check_pair_dim(x: object, dim: object) -> tuple[torch.Tensor, int]:
    x = check_tensor("x", x)
    dim = check_int("dim", dim)
    if x.dim() == 0 or not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim must name a dimension of x (shape {list(x.shape)}), got {dim}")
    dim %= x.dim()
    size = x.shape[dim]
    if size == 0 or size % 2:
        raise ValueError(f"x.shape[{dim}] (head_dim) must be a positive even number, got {size}")
    return x, dim


def to_half_layout(x: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
    """Reorder features from the interleaved layout to the half layout: ``x[..., P]``.

    ``P = [0, 2, 4, …, head_dim-2, 1, 3, …, head_dim-1]``: feature ``2i`` goes to ``i``
    and ``2i+1`` to ``i + head_dim/2``, so pair ``(2i, 2i+1)`` becomes pair
    ``(i, i + head_dim/2)``. Then ``apply_rope(to_half_layout(x), layout="half")`` equals
    ``to_half_layout(apply_rope(x))`` up to rounding (the two layouts' kernels round
    differently: float32 results may differ in the last bit, not bitwise equal). Checkpoint converters apply this to the output
    features of each head's q and k projection weights: for ``W_q`` of shape
    ``[heads·head_dim, d_model]`` use ``to_half_layout(W_q.view(heads, head_dim, -1), dim=1)``.
    """
    x, dim = _check_pair_dim(x, dim)
    half = x.shape[dim] // 2
    return x.unflatten(dim, (half, 2)).transpose(dim, dim + 1).flatten(dim, dim + 1)


def to_interleaved_layout(x: torch.Tensor, *, dim: int = -1) -> torch.Tensor:
    """The inverse of :func:`to_half_layout`: features ``i`` and ``i + head_dim/2`` go to ``2i`` and ``2i+1``."""
    x, dim = _check_pair_dim(x, dim)
    half = x.shape[dim] // 2
    return x.unflatten(dim, (2, half)).transpose(dim, dim + 1).flatten(dim, dim + 1)


# --------------------------------------------------------------------------- argument checks


def _check_x(x: object) -> torch.Tensor:
    x = check_float_tensor("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must have shape [..., seq, head_dim] (at least 2 dimensions), got shape {list(x.shape)}")
    head_dim = x.shape[-1]
    if head_dim == 0 or head_dim % 2:
        raise ValueError(
            "x.shape[-1] is head_dim and must be a positive even number (RoPE rotates features in pairs), "
            f"got {head_dim}"
        )
    return x


def _check_rotary_dim(rotary_dim: object, head_dim: int) -> int:
    rotary_dim = check_int("rotary_dim", rotary_dim)
    if rotary_dim <= 0 or rotary_dim % 2 or rotary_dim > head_dim:
        raise ValueError(
            f"rotary_dim must be a positive even number of features, at most head_dim = {head_dim}, got {rotary_dim}"
        )
    return rotary_dim


def _check_call(
    x: object, positions: object, layout: object, rotary_dim: object, *, head_dim: int | None = None
) -> tuple[torch.Tensor, torch.Tensor | None, tuple | None, int]:
    """Check the arguments every RoPE entry point shares.

    Returns ``x``, the positions (``None``, or int64/float64 on ``x``'s device), their
    host-known ``(min, max)`` (``None`` when only the device knows them: nothing is read back)
    and the number of features that turn (``rotary_dim``, by default all of them).
    """
    x = _check_x(x)
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"x.shape[-1] must be head_dim = {head_dim}, got shape {list(x.shape)}")
    check_choice("layout", layout, LAYOUTS, hint=_LAYOUT_HINT)
    r = x.shape[-1] if rotary_dim is None else _check_rotary_dim(rotary_dim, x.shape[-1])
    pos, bounds = _check_positions(positions, x)
    return x, pos, bounds, r


def _sequence_length(
    params: Mapping[str, Any], x: torch.Tensor, pos: torch.Tensor | None, bounds: tuple | None
) -> int | None:
    """The sequence length (largest position + 1) for the rules whose frequencies depend on it; ``None`` for the others.

    Positions only the device knows are read back here (a synchronisation), for those rules only.
    """
    if SCALING_RULES[params["rope_type"]].length_seen is None:
        return None
    if pos is None:
        return x.shape[-2] or None
    if pos.numel() == 0:
        return None
    top = bounds[1] if bounds is not None else pos.max().item()
    return max(math.floor(top) + 1, 1)


#: Largest |position| accepted (checked where the host knows the positions: lists, ranges, CPU
#: tensors; positions on an accelerator are not read back to check them). Angles ``m·θ_i`` are
#: formed in float64, within ``|m|·2⁻⁵²`` ≤ 1e-6 rad of the exact ones up to here.
MAX_POSITION = 2**32


def _check_positions(positions: object, x: torch.Tensor) -> tuple[torch.Tensor | None, tuple | None]:
    """``(None, None)`` or ``(positions, bounds)``: int64 or float64 on ``x``'s device, ``[seq]`` or ``[batch, seq]``.

    ``bounds`` are the smallest and largest position when the host knows them for free (lists, CPU tensors).
    """
    if positions is None:
        return None, None
    if isinstance(positions, range):
        positions = torch.arange(positions.start, positions.stop, positions.step)
    elif isinstance(positions, (list, tuple)):
        positions = _from_sequence(positions)
    positions = _check_position_values(positions)
    _check_position_shape(positions, x)
    bounds = None
    # (under torch.compile a read back would break the graph: the tables are then computed in it)
    if positions.device.type == "cpu" and positions.numel() and not fast.compiling():
        lo, hi = torch.aminmax(positions)
        bounds = (lo.item(), hi.item())
        if max(-bounds[0], bounds[1]) > MAX_POSITION:
            far = bounds[0] if -bounds[0] > bounds[1] else bounds[1]
            raise ValueError(
                f"positions must satisfy |position| <= 2**32 = {MAX_POSITION}, got {far}: a float64 angle m·θ "
                "is off by up to |m|·2**-52 rad (1e-6 rad at 2**32, a whole radian at 2**53), so larger positions "
                "would rotate by the wrong angle"
            )
    return positions.to(x.device), bounds


def _check_position_values(positions: object) -> torch.Tensor:
    """A tensor of integer positions (as int64) or of float32/float64 ones (as float64), all finite."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            "positions must be None, a tensor of shape [seq] or [batch, seq], or a list of numbers, "
            f"got {type(positions).__name__}"
        )
    if positions.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions of dtype {positions.dtype} are refused: float16/bfloat16 round large integer positions "
            "(bfloat16 keeps 8 significant bits), so the angles would be wrong; pass integers (e.g. torch.long), "
            "or float32/float64 for fractional positions (position interpolation)"
        )
    if positions.dtype == torch.bool or positions.dtype.is_complex:
        raise TypeError(
            f"positions must hold integers (e.g. torch.long) or real numbers (float32/float64), "
            f"got dtype {positions.dtype}"
        )
    if not positions.dtype.is_floating_point:
        return positions.to(torch.long)
    positions = positions.to(torch.float64)
    # (checked by eager calls; under torch.compile reading the answer back would break the graph)
    if positions.numel() and not fast.compiling() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite numbers (no NaN or infinity)")
    return positions


def _check_position_shape(positions: torch.Tensor, x: torch.Tensor) -> None:
    """``[seq]``, or ``[batch, seq]`` with ``x`` of shape ``[batch, …, seq, head_dim]`` (or a batch of 1)."""
    seq = x.shape[-2]
    if positions.dim() == 1 and positions.shape[0] != seq:
        raise ValueError(
            f"positions must be a 1-D tensor of length seq = x.shape[-2] = {seq} (or [batch, seq]), "
            f"got shape {list(positions.shape)}"
        )
    if positions.dim() == 2 and (x.dim() < 3 or positions.shape[1] != seq or positions.shape[0] not in (1, x.shape[0])):
        raise ValueError(
            f"positions of shape [batch, seq] need x of shape [batch, ..., seq, head_dim] with the same batch and "
            f"seq; got positions {list(positions.shape)} for x {list(x.shape)}"
        )
    if positions.dim() not in (1, 2):
        raise ValueError(f"positions must have shape [seq] or [batch, seq] (1-D or 2-D), got {list(positions.shape)}")


def _from_sequence(values: Sequence[object]) -> torch.Tensor:
    """A list or tuple of numbers: int64 when all are integers, float64 when any is a float."""
    items: list[int | float] = []
    floating = False
    for v in values:
        if isinstance(v, bool) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool):
            raise TypeError(f"positions must hold integers or real numbers, got a sequence with a bool item: {v!r}")
        if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.dtype.is_complex:
            v = v.item()
        try:
            items.append(operator.index(v))  # type: ignore[arg-type]  # Python ints, numpy integers
            continue
        except TypeError:
            pass
        if isinstance(v, numbers.Real):
            if not math.isfinite(float(v)):
                raise ValueError(f"positions must be finite numbers, got {v!r}")
            items.append(float(v))
            floating = True
            continue
        raise TypeError(
            f"positions must hold integers (token indices) or real numbers, got a sequence with a "
            f"{type(v).__name__} item: {v!r} (per-row positions [batch, seq] must be a tensor)"
        )
    if floating:
        return torch.tensor(items, dtype=torch.float64)
    if items and not -(2**63) <= min(items) <= max(items) < 2**63:
        raise ValueError("positions must fit in int64 (|position| < 2**63), got a larger integer")
    return torch.tensor(items, dtype=torch.long)
