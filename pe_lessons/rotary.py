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
float32 and rounded once at the end. Integer positions are exact; never hold
positions in float16/bfloat16 (bfloat16 cannot even hold the integers above
256), which is why those dtypes are refused.

Speed. :func:`apply_rope` and :class:`RotaryEmbedding` compute what
:func:`rope_formula` computes, through the fast path of :mod:`pe_lessons._rope_fast`:
cached cos/sin tables (shared ones bounded by bytes, see :func:`rope_cache_bytes` and
:func:`clear_rope_cache`), one complex multiplication for the interleaved layout, a
copy-free half layout, an exact autograd rule, and a formula ``torch.compile`` fuses.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from . import _rope_fast as fast
from ._checks import check_base, check_d_model, check_float_tensor, check_int, check_tensor
from .sinusoidal import inverse_frequencies

__all__ = [
    "LAYOUTS",
    "ROPE_TYPES",
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

#: The ``rope_type`` values :func:`scaled_frequencies` understands.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")

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
    x, pos, bounds = _check_call(x, positions, layout, rotary_dim)
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    seq_len = _rule_length(_check_scaling(scaling, r), x, pos, bounds)  # the length "dynamic"/"longrope" see
    pos = torch.arange(x.shape[-2]) if pos is None else pos.cpu()  # default positions 0 … seq-1
    theta, attention = scaled_frequencies(r, scaling, base=base, seq_len=seq_len)  # 1. θ_i, [r/2], float64
    angles = pos.to(torch.float64)[..., None] * theta  # 2. m·θ_i: [seq, r/2] (or [batch, seq, r/2])
    if angles.dim() == 3:  # per-row positions: one table per batch element, the same for every head
        angles = angles.reshape(angles.shape[0], *[1] * (x.dim() - 3), *angles.shape[1:])
    cos, sin = attention * torch.cos(angles), attention * torch.sin(angles)  # 3. (scaled) cos and sin
    turned, kept = x[..., :r].cpu().double(), x[..., r:]  # 4. only the first rotary_dim features turn
    if layout == "interleaved":  # 5. the two members of each pair: (2i, 2i+1) …
        a, b = turned[..., 0::2], turned[..., 1::2]
    else:  # … or (i, i + r/2)
        a, b = turned[..., : r // 2], turned[..., r // 2 :]
    a, b = a * cos - b * sin, a * sin + b * cos  # 6. rotate every pair by its angle
    if layout == "interleaved":  # 7. put the pairs back where they came from
        turned = torch.stack((a, b), dim=-1).flatten(-2)
    else:
        turned = torch.cat((a, b), dim=-1)
    return torch.cat((turned.to(x.device, x.dtype), kept), dim=-1)


# --------------------------------------------------------------------------- context extension

#: Keys each ``rope_type`` needs, and the ones it may take besides.
_REQUIRED = {
    "default": (),
    "linear": ("factor",),
    "dynamic": ("factor", "original_max_position_embeddings"),
    "yarn": ("factor", "original_max_position_embeddings"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings"),
}
_OPTIONAL = {
    "yarn": ("beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate"),
    "longrope": ("factor", "attention_factor"),
}


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
    A missing or unknown key, or a bad value, raises ``ValueError`` naming the key.
    """
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    params = _check_scaling(scaling, head_dim)
    seq_len = None if seq_len is None else check_int("seq_len", seq_len, minimum=1)
    theta, attention = _scaled(head_dim, base, _frozen(params), _length_key(params, seq_len))
    return theta.clone(), attention


_memo: dict[tuple, tuple[torch.Tensor, float]] = {}


def _scaled(head_dim: int, base: float, frozen: tuple, seq_len: int | None) -> tuple[torch.Tensor, float]:
    """:func:`scaled_frequencies` of checked arguments, remembered (the fast path asks on every call)."""
    key = (head_dim, base, frozen, seq_len)
    answer = _memo.get(key)
    if answer is None:
        if len(_memo) >= 256:
            _memo.clear()
        answer = _memo[key] = _compute_scaled(head_dim, base, dict(frozen), seq_len)
    return answer


def _compute_scaled(head_dim: int, base: float, p: dict, seq_len: int | None) -> tuple[torch.Tensor, float]:
    kind = p["rope_type"]
    theta = rope_frequencies(head_dim, base)  # θ_i = base^(-2i/d)
    if kind == "default":
        return theta, 1.0
    if kind == "linear":  # positions m/s: every angle m·θ_i/s
        return theta / p["factor"], 1.0
    s, L = p["factor"], p["original_max_position_embeddings"]
    if kind == "dynamic":  # NTK base change for the length in hand (no change up to L)
        n = L if seq_len is None else max(seq_len, L)
        new_base = base * (s * n / L - (s - 1)) ** (head_dim / (head_dim - 2))
        return rope_frequencies(head_dim, new_base), 1.0
    if kind == "yarn":

        def correction_dim(turns: float) -> float:  # the pair i that turns `turns` times over L
            return head_dim * math.log(L / (turns * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(p.get("beta_fast", 32.0)), correction_dim(p.get("beta_slow", 1.0))
        if p.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        if low == high:
            high += 0.001  # (as the reference implementation: no division by zero)
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        theta = theta * (1 - ramp) + theta / s * ramp  # fast pairs kept, slow pairs interpolated
        return theta, _yarn_attention(p)
    if kind == "llama3":
        low_f, high_f = p["low_freq_factor"], p["high_freq_factor"]
        wavelength = 2 * math.pi / theta
        alpha = (L / wavelength - low_f) / (high_f - low_f)  # 0 at wavelength L/low_f, 1 at L/high_f
        scale = torch.where(
            wavelength < L / high_f, 1.0, torch.where(wavelength > L / low_f, 1.0 / s, (1 - alpha) / s + alpha)
        )
        return theta * scale, 1.0
    # longrope: per-pair factors, the long ones beyond L
    factors = p["long_factor"] if seq_len is not None and seq_len > L else p["short_factor"]
    theta = theta / torch.tensor(factors, dtype=torch.float64)
    attention = p.get("attention_factor")
    if attention is None:
        attention = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L))
    return theta, float(attention)


def _yarn_attention(p: dict) -> float:
    """YaRN's factor on cos and sin: ``0.1·m·ln s + 1`` (``m = 1``), or the mscale ratio, or ``attention_factor``."""
    if p.get("attention_factor") is not None:
        return float(p["attention_factor"])

    def mscale(s: float, m: float = 1.0) -> float:
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    s = p["factor"]
    if p.get("mscale") and p.get("mscale_all_dim"):
        return float(mscale(s, p["mscale"]) / mscale(s, p["mscale_all_dim"]))
    return mscale(s)


def _length_key(params: dict, seq_len: int | None) -> int | None:
    """The part of ``seq_len`` a rule looks at (so cached answers are shared)."""
    kind = params["rope_type"]
    if kind == "dynamic":
        return None if seq_len is None else max(seq_len, params["original_max_position_embeddings"])
    if kind == "longrope":
        trained = params["original_max_position_embeddings"]
        return trained + 1 if seq_len is not None and seq_len > trained else None  # long factors, or short
    return None


def _frozen(params: dict) -> tuple:
    return tuple(sorted(params.items()))


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
    head_dim]``). Integer positions are exact, negative ones rotate backwards; float32/float64
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
    x, pos, bounds = _check_call(x, positions, layout, rotary_dim)
    base = check_base(base)
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    params = _check_scaling(scaling, r)
    frozen, length = _frozen(params), _length_key(params, _rule_length(params, x, pos, bounds))
    theta, attention = _scaled(r, base, frozen, length)
    dtype = fast.working_dtype(x.dtype)
    tables = fast.shared_lookup(
        (r, base, frozen, length),
        theta,
        attention,
        pos,
        bounds,
        x.shape[-2],
        x.device,
        dtype,
        fast.table_kind(layout, x.dtype),
    )
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
        self.layout = _check_layout(layout)
        self.rotary_dim = self.head_dim if rotary_dim is None else _check_rotary_dim(rotary_dim, self.head_dim)
        self.scaling = _check_scaling(scaling, self.rotary_dim)
        self._frozen = _frozen(self.scaling)
        self._tables: dict[tuple, fast.CosSinCache] = {}  # by the length key (several only for dynamic/longrope)
        self._last = fast.CosSinCache(*_scaled(self.rotary_dim, self.base, self._frozen, None))

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

    def _tables_for(self, seq_len: int | None) -> fast.CosSinCache:
        length = _length_key(self.scaling, seq_len)
        tables = self._tables.get(length)
        if tables is None:
            if length is None and not self._tables:
                tables = self._last
            else:
                tables = fast.CosSinCache(*_scaled(self.rotary_dim, self.base, self._frozen, length))
            if len(self._tables) >= 2:  # dynamic lengths: keep the last two
                self._tables.pop(next(iter(self._tables)))
            self._tables[length] = tables
        self._last = tables
        return tables

    def forward(self, x: torch.Tensor, positions: Positions = None) -> torch.Tensor:
        x, pos, bounds = _check_call(x, positions, self.layout, None, head_dim=self.head_dim)
        tables = self._tables_for(_rule_length(self.scaling, x, pos, bounds)).lookup(
            pos, bounds, x.shape[-2], x.device, fast.working_dtype(x.dtype), fast.table_kind(self.layout, x.dtype)
        )
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


def _check_layout(layout: object) -> str:
    if not isinstance(layout, str):
        raise TypeError(f"layout must be a string, 'interleaved' or 'half', got {layout!r}")
    if layout not in LAYOUTS:
        raise ValueError(
            "layout must be 'interleaved' (pairs (2i, 2i+1): RoFormer, Meta llama, torchtune) or "
            f"'half' (pairs (i, i + head_dim/2): Hugging Face rotate_half, GPT-NeoX), got {layout!r}"
        )
    return layout


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
) -> tuple[torch.Tensor, torch.Tensor | None, tuple | None]:
    """Check the arguments every RoPE entry point shares.

    Returns ``x``, the positions (``None``, or int64/float64 on ``x``'s device) and their
    host-known ``(min, max)`` (``None`` when only the device knows them: nothing is read back).
    """
    x = _check_x(x)
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"x.shape[-1] must be head_dim = {head_dim}, got shape {list(x.shape)}")
    _check_layout(layout)
    if rotary_dim is not None:
        _check_rotary_dim(rotary_dim, x.shape[-1])
    pos, bounds = _check_positions(positions, x)
    return x, pos, bounds


def _rule_length(params: dict, x: torch.Tensor, pos: torch.Tensor | None, bounds: tuple | None) -> int | None:
    """The length a ``"dynamic"`` or ``"longrope"`` rule sees: largest position + 1 (``None`` for the others).

    Positions only the device knows are read back here (a synchronisation), for those two rules only.
    """
    if params["rope_type"] not in ("dynamic", "longrope"):
        return None
    if pos is None:
        return x.shape[-2] or None
    if pos.numel() == 0:
        return None
    top = bounds[1] if bounds is not None else pos.max().item()
    return max(math.floor(top) + 1, 1)


def _check_positions(positions: object, x: torch.Tensor) -> tuple[torch.Tensor | None, tuple | None]:
    """``(None, None)`` or ``(positions, bounds)``: int64 or float64 on ``x``'s device, ``[seq]`` or ``[batch, seq]``.

    ``bounds`` are the smallest and largest position when the host knows them for free (lists, CPU tensors).
    """
    if positions is None:
        return None, None
    seq, device = x.shape[-2], x.device
    if isinstance(positions, range):
        if len(positions) != seq:
            raise ValueError(f"positions must have length seq = x.shape[-2] = {seq}, got a range of {len(positions)}")
        bounds = (min(positions), max(positions)) if len(positions) else None
        return torch.arange(positions.start, positions.stop, positions.step, device=device), bounds
    if isinstance(positions, (list, tuple)):
        positions = _from_sequence(positions)
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            "positions must be None, a tensor of shape [seq] or [batch, seq], or a list of numbers, "
            f"got {type(positions).__name__}"
        )
    if (
        positions.dtype in (torch.float16, torch.bfloat16)
        or positions.dtype.is_complex
        or positions.dtype == torch.bool
    ):
        raise TypeError(
            f"positions must hold integers (e.g. torch.long), got dtype {positions.dtype}: float16/bfloat16 "
            "positions are rounded (bfloat16 cannot even hold the integers above 256), so angles would be wrong; "
            "fractional positions (position interpolation) are accepted as float32 or float64"
        )
    if positions.dim() == 1:
        if positions.shape[0] != seq:
            raise ValueError(
                f"positions must be a 1-D tensor of length seq = x.shape[-2] = {seq} (or [batch, seq]), "
                f"got shape {list(positions.shape)}"
            )
    elif positions.dim() == 2:
        if x.dim() < 3 or positions.shape[1] != seq or positions.shape[0] not in (1, x.shape[0]):
            raise ValueError(
                f"positions of shape [batch, seq] need x of shape [batch, ..., seq, head_dim] with the same batch and "
                f"seq; got positions {list(positions.shape)} for x {list(x.shape)}"
            )
    else:
        raise ValueError(f"positions must have shape [seq] or [batch, seq] (1-D or 2-D), got {list(positions.shape)}")
    floating = positions.dtype.is_floating_point
    positions = positions.to(torch.float64 if floating else torch.long)
    bounds = None
    if fast.compiling():  # reading values back would break the graph: checked by eager calls only
        return positions.to(device), None
    if floating and positions.numel() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite numbers (no NaN or infinity)")
    if positions.device.type == "cpu" and positions.numel():
        lo, hi = torch.aminmax(positions)
        bounds = (lo.item(), hi.item())
    return positions.to(device), bounds


def _from_sequence(values: Sequence[object]) -> torch.Tensor:
    """A list or tuple of numbers: int64 when all are integers, float64 when any is a float."""
    items, floating = [], False
    for v in values:
        if isinstance(v, bool) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool):
            raise TypeError(f"positions must hold integers or real numbers, got a sequence with a bool item: {v!r}")
        if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.dtype.is_complex:
            v = v.item()
        try:
            items.append(operator.index(v))  # Python ints, numpy integers
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


def _real(params: Mapping[str, object], key: str, *, minimum: float, strict: bool = True) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"scaling[{key!r}] must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise ValueError(f"scaling[{key!r}] must be a finite number {'>' if strict else '>='} {minimum:g}, got {value}")
    return value


def _check_scaling(scaling: object, head_dim: int) -> dict:
    """A context-extension rule, checked: a plain dict of Python numbers and tuples."""
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict like a Hugging Face rope_parameters, got {type(scaling).__name__}"
        )
    if "rope_type" not in scaling:
        raise ValueError(f"scaling needs the key 'rope_type' (one of {', '.join(map(repr, ROPE_TYPES))})")
    kind = scaling["rope_type"]
    if kind not in ROPE_TYPES:
        raise ValueError(f"scaling['rope_type'] must be one of {', '.join(map(repr, ROPE_TYPES))}, got {kind!r}")
    allowed = {"rope_type", *_REQUIRED[kind], *_OPTIONAL.get(kind, ())}
    for key in scaling:
        if key not in allowed:
            hint = {"rope_theta": " (pass it as base=)", "partial_rotary_factor": " (pass rotary_dim= instead)"}
            raise ValueError(
                f"scaling key {key!r} is not used by rope_type {kind!r}{hint.get(key, '')}; "
                f"its keys are {', '.join(map(repr, sorted(allowed)))}"
            )
    for key in _REQUIRED[kind]:
        if key not in scaling:
            raise ValueError(f"scaling for rope_type {kind!r} needs the key {key!r}")
    if kind == "longrope" and "factor" not in scaling and scaling.get("attention_factor") is None:
        raise ValueError(
            "scaling for rope_type 'longrope' needs the key 'factor' (the context ratio, max_position_embeddings / "
            "original_max_position_embeddings) or 'attention_factor'"
        )
    if kind == "dynamic" and head_dim < 4:
        raise ValueError("rope_type 'dynamic' needs head_dim >= 4 (its base exponent is d/(d-2))")
    out: dict[str, object] = {"rope_type": kind}
    for key, value in scaling.items():
        if key == "rope_type" or (value is None and key in ("attention_factor", "mscale", "mscale_all_dim")):
            continue
        if key == "factor":
            out[key] = _real(scaling, key, minimum=1.0, strict=False)
        elif key == "original_max_position_embeddings":
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(f"scaling[{key!r}] must be a positive integer (the trained length), got {value!r}")
            out[key] = int(value)
        elif key in ("beta_fast", "beta_slow", "attention_factor", "low_freq_factor", "high_freq_factor"):
            out[key] = _real(scaling, key, minimum=0.0)
        elif key in ("mscale", "mscale_all_dim"):
            out[key] = _real(scaling, key, minimum=0.0, strict=False)
        elif key == "truncate":
            if not isinstance(value, bool):
                raise ValueError(f"scaling['truncate'] must be True or False, got {value!r}")
            out[key] = value
        else:  # short_factor, long_factor: one positive number per pair
            values = value.tolist() if isinstance(value, torch.Tensor) else value
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != head_dim // 2:
                raise ValueError(
                    f"scaling[{key!r}] must be a list of head_dim/2 = {head_dim // 2} numbers (one per pair), "
                    f"got {value!r}"
                )
            checked = []
            for v in values:
                if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0:
                    raise ValueError(f"scaling[{key!r}] must hold finite numbers > 0, got an item {v!r}")
                checked.append(float(v))
            out[key] = tuple(checked)
    if kind == "yarn" and out.get("beta_fast", 32.0) <= out.get("beta_slow", 1.0):
        raise ValueError(
            "scaling['beta_fast'] must be larger than scaling['beta_slow'] (fast pairs turn more often), got "
            f"{out.get('beta_fast', 32.0)} and {out.get('beta_slow', 1.0)}"
        )
    if kind == "llama3" and out["high_freq_factor"] <= out["low_freq_factor"]:
        raise ValueError(
            "scaling['high_freq_factor'] must be larger than scaling['low_freq_factor'] (Llama 3.1: 4 and 1), got "
            f"{out['high_freq_factor']} and {out['low_freq_factor']}"
        )
    return out
