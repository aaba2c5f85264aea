r"""The baselines and references the course measures and checks against, in one place.

Tests, the benchmark (:mod:`pe_lessons.bench`) and notebooks 02 and 08 share them:

- sinusoidal tables: :func:`loop_table` (the formula one number at a time, as a beginner
  writes it), :func:`textbook_table` (the common tutorial code, float32 angles) and
  :func:`float64_angles_table` (accurate, slow);
- rotary embedding as Hugging Face runs it eagerly: :func:`hf_cos_sin`, :func:`rotate_half`,
  :func:`hf_rope`, and one decoding step of it, cos/sin included (:func:`hf_inv_freq`,
  :func:`hf_rope_step`); and :func:`rope_reference`, the float64 reference every RoPE kernel
  is compared with, with :func:`rope_complex_reference` (complex multiply) as a second formulation.

The teaching versions stay in the notebooks, each asserted equal to one of these.
"""

from __future__ import annotations

import math

import torch

from ._checks import check_base, check_choice, check_d_model, check_device, check_fits, check_float_tensor, check_int
from .sinusoidal import exact_rows, interleave, inverse_frequencies, pe_formula

__all__ = [
    "loop_table",
    "textbook_table",
    "float64_angles_table",
    "rotate_half",
    "hf_cos_sin",
    "hf_rope",
    "hf_inv_freq",
    "hf_rope_step",
    "rope_angles",
    "rope_reference",
    "rope_complex_reference",
]


def loop_table(max_len: int, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The paper's formula one number at a time (:func:`pe_formula` per row), as a float32 tensor.

    ``max_len·d_model`` calls of ``math.sin``/``math.cos``, each through the Python
    interpreter: correct (float64 angles) and slow.
    """
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    check_fits("max_len × d_model", (max_len, d_model), 32, what="the table as Python lists of floats")
    return torch.tensor([pe_formula(pos, d_model, base) for pos in range(max_len)], dtype=torch.float32).reshape(
        max_len, d_model
    )


def textbook_table(
    max_len: int, d_model: int, base: float = 10000.0, *, device: torch.device | str | None = None
) -> torch.Tensor:
    r"""The common tutorial code: float32 angles ``pos·ω_i``, then ``sin``/``cos`` into strided columns.

    Fast, but a float32 angle near ``pos = 65536`` is only known to ``≈ pos·6e-8``
    radians, so entries there are off by up to ~4e-3.
    """
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    device = check_device(device)
    check_fits("max_len × d_model", (max_len, d_model), torch.float32, what="the table")
    position = torch.arange(max_len, dtype=torch.float32, device=device)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32, device=device) * (-math.log(base) / d_model))
    pe = torch.zeros(max_len, d_model, device=device)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def float64_angles_table(
    max_len: int, d_model: int, base: float = 10000.0, *, device: torch.device | str | None = None
) -> torch.Tensor:
    """Angles, sin and cos in float64, rounded once to float32: accurate, but float64 math is slow."""
    max_len = check_int("max_len", max_len, minimum=0)
    d_model = check_d_model(d_model)
    base = check_base(base)
    device = check_device(device)
    check_fits("max_len × d_model", (max_len, d_model), torch.float64, what="the float64 table")
    positions = torch.arange(max_len, dtype=torch.float64, device=device)
    return exact_rows(positions, inverse_frequencies(d_model, base)).to(torch.float32)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's helper: ``[x1, x2] → [-x2, x1]`` over the two halves of the last dimension."""
    x = check_float_tensor("x", x)
    if x.dim() == 0 or x.shape[-1] % 2:
        raise ValueError(f"x's last dimension must be even (two halves), got shape {list(x.shape)}")
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def hf_cos_sin(
    seq_len: int, head_dim: int, base: float = 10000.0, *, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's precomputed ``cos``/``sin`` of shape ``[seq_len, head_dim]`` (half layout, float32).

    ``θ_i = base^(-2i/head_dim)``; the angles ``pos·θ_i`` are repeated for both halves.
    """
    seq_len = check_int("seq_len", seq_len, minimum=1)
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    device = check_device(device)
    check_fits("seq_len × head_dim", (seq_len, head_dim), torch.float32, what="cos (and sin)")
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim)
    freqs = torch.arange(seq_len, dtype=torch.float32, device=device)[:, None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def hf_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face's eager formula ``x·cos + rotate_half(x)·sin`` (half layout).

    Five kernels: ``x·cos``, ``-x2``, ``cat``, ``·sin``, ``+``; each reads and writes
    whole tensors of ``x``'s size.
    """
    return x * cos + rotate_half(x) * sin


def hf_inv_freq(head_dim: int, base: float = 10000.0, *, device: torch.device | str | None = None) -> torch.Tensor:
    """Hugging Face's ``inv_freq`` buffer (default rope): ``1 / base^(2i/head_dim)`` in float32, ``[head_dim/2]``."""
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    device = check_device(device)
    return 1.0 / (
        base ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / head_dim)
    )


def hf_rope_step(
    x: torch.Tensor, position_ids: torch.Tensor, inv_freq: torch.Tensor, attention_scaling: float = 1.0
) -> torch.Tensor:
    """One call of Hugging Face's rotary path, as each decoding step (and each forward) runs it.

    ``LlamaRotaryEmbedding.forward`` computes cos/sin for ``position_ids`` (``[batch, seq]``) in
    float32 — ``freqs = position_ids·inv_freq``, ``cat(freqs, freqs)``, ``cos``/``sin`` times the
    attention scaling, cast to ``x``'s dtype — then ``apply_rotary_pos_emb`` rotates ``x``
    (``[batch, heads, seq, head_dim]``) with them broadcast over the heads (:func:`hf_rope`).
    """
    x = check_float_tensor("x", x)
    if not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 2:
        raise ValueError("position_ids must be a tensor of shape [batch, seq]")
    freqs = position_ids[..., None].float() * inv_freq.to(device=x.device, dtype=torch.float)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention_scaling
    sin = emb.sin() * attention_scaling
    return hf_rope(x, cos.to(dtype=x.dtype).unsqueeze(1), sin.to(dtype=x.dtype).unsqueeze(1))


def rope_angles(positions: object, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """Angles ``pos·θ_i`` in float64, shape ``[len(positions), head_dim/2]``.

    ``θ_i = base^(-2i/head_dim)`` computed with Python's ``pow``, not the package's exp/log,
    so a test comparing with these angles checks the package's frequencies too.
    """
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    try:
        positions = torch.as_tensor(positions, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"positions must be a 1-D tensor or list of numbers, got {positions!r} ({err})") from None
    if positions.dim() != 1:
        raise ValueError(f"positions must be 1-D, got shape {list(positions.shape)}")
    thetas = torch.tensor([base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    return positions[:, None] * thetas.to(positions.device)[None, :]


def _positions(positions: object, seq: int, device: torch.device) -> torch.Tensor:
    """``positions`` (default ``0 … seq-1``) as a float64 vector of length ``seq``."""
    if positions is None:
        return torch.arange(seq, dtype=torch.float64, device=device)
    pos = torch.as_tensor(positions, dtype=torch.float64, device=device)
    if pos.shape != (seq,):
        raise ValueError(f"positions must have one entry per row of x ({seq}), got shape {list(pos.shape)}")
    return pos


def rope_reference(
    x: torch.Tensor, layout: str = "interleaved", base: float = 10000.0, *, positions: object = None
) -> torch.Tensor:
    """Rotary embedding of ``x`` ``[..., seq, head_dim]`` at ``positions`` (default ``0 … seq-1``), in float64.

    Pair ``i`` (features ``(2i, 2i+1)`` interleaved, ``(i, i+head_dim/2)`` half) turns by
    ``pos·θ_i``, ``θ_i = base^(-2i/head_dim)``: ``(a, b) → (a cos − b sin, a sin + b cos)``.
    The angles use Python's ``pow``, independent of the package's frequency code.
    """
    x = check_float_tensor("x", x).double()
    layout = check_choice("layout", layout, ("interleaved", "half"))
    seq, head_dim = x.shape[-2], check_d_model(x.shape[-1], "x.shape[-1] (head_dim)")
    angles = rope_angles(_positions(positions, seq, x.device), head_dim, check_base(base))
    cos, sin = angles.cos(), angles.sin()
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return interleave(a * cos - b * sin, a * sin + b * cos)
    a, b = x[..., : head_dim // 2], x[..., head_dim // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def rope_complex_reference(x: torch.Tensor, positions: object = None, base: float = 10000.0) -> torch.Tensor:
    """Rotary embedding as Meta's Llama code writes it, in complex128 (interleaved layout).

    Pairs ``(2i, 2i+1)`` are complex numbers ``z_i``; position ``m`` multiplies them by
    ``e^{i·m·θ_i}``. A second formulation of :func:`rope_reference` (same math, other code).
    """
    x = check_float_tensor("x", x).double()
    seq, head_dim = x.shape[-2], check_d_model(x.shape[-1], "x.shape[-1] (head_dim)")
    angles = rope_angles(_positions(positions, seq, x.device), head_dim, check_base(base))
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], head_dim // 2, 2).contiguous())
    return torch.view_as_real(z * torch.polar(torch.ones_like(angles), angles)).reshape(x.shape)
