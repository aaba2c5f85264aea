r"""Positions in today's models: each scheme built from a plain config dict, on top of :func:`~pe_lessons.rotary.apply_rope`.

A config is a plain ``dict`` with the keys of a Hugging Face ``config.json`` (or of
``PretrainedConfig.to_dict()``): ``head_dim`` (or ``hidden_size`` and
``num_attention_heads``), ``rope_parameters`` (``{"rope_type", "rope_theta", …}``; the older
``rope_theta`` + ``rope_scaling`` keys work too), and the keys of each scheme below. Every
rotation here is the course's RoPE — pair ``i`` of a head turned by ``m·θ_i``,
``θ_i = base^{-2i/head_dim}`` — with one of these changes:

- **Multimodal RoPE** (Qwen2-VL, Qwen2.5-VL; :func:`mrope_position_ids`, :func:`mrope_rotate`):
  three position streams (time, height, width), ``p = (p_t, p_h, p_w)``; ``mrope_section``
  (default ``[16, 24, 24]`` pairs) splits the pairs into three consecutive blocks, and pair ``i``
  of block ``s`` turns by ``p_s·θ_i``. Text tokens have ``p_t = p_h = p_w``: plain RoPE.
- **2-D (axial) RoPE** for image patches (Pixtral; :func:`axial_rotate`): patch ``(r, c)``;
  the first ``head_dim/4`` pairs turn by ``r·θ_{2j}``, the others by ``c·θ_{2j+1}``.
- **Decoupled RoPE** (DeepSeek-V2/V3 multi-head latent attention; :func:`decoupled_rotate`,
  :class:`LatentAttention`): each query/key is ``[nope | rope]``; only the ``qk_rope_head_dim``
  part turns, and the key's rotated part is one vector shared by all heads.
- **Layers without RoPE** (Llama 4, SmolLM3; :func:`nope_layers`, :func:`attention_temperature`):
  some layers rotate nothing; Llama 4 scales those layers' queries by
  ``1 + attn_scale·ln(1 + ⌊(m + 1)/floor_scale⌋)``.
- **A base per layer type** (Gemma 3, ModernBERT; :func:`layer_types`, :func:`layer_rope`):
  sliding-window and global layers use different ``rope_theta`` (and scaling rules).
- **Partial rotary** (GPT-NeoX, Phi; ``partial_rotary_factor``): the first
  ``int(head_dim·factor)`` features turn, with the frequencies of a head that wide.
  **p-RoPE** (Barbero et al. 2024; transformers' ``"proportional"``, Gemma 4): the first
  ``int(p·head_dim)//2`` pairs keep their frequencies ``base^{-2i/head_dim}``, the slowest
  pairs get ``θ = 0`` (no rotation).

Each block of pairs is rotated by :func:`~pe_lessons.rotary.apply_rope` itself: a run of ``n``
consecutive pairs ``a … a+n-1`` with frequencies ``θ_i = c·ρ^{i-a}`` is plain RoPE of width
``2n`` with base ``ρ^{-n}`` at positions ``c·m``. Layout: ``"half"`` pairs ``(i, i + head_dim/2)``
as in Hugging Face's ``rotate_half``, except where a function says otherwise.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ._checks import (
    check_base,
    check_d_model,
    check_fits,
    check_float_tensor,
    check_int,
    check_positive_int,
    check_real,
    check_tensor,
)
from .rotary import LAYOUTS, apply_rope, rope_frequencies, scaled_frequencies, to_half_layout

__all__ = [
    "MROPE_SECTION",
    "head_dim_of",
    "rope_settings",
    "mrope_position_ids",
    "mrope_angles",
    "mrope_rotate",
    "axial_position_ids",
    "axial_angles",
    "axial_rotate",
    "decoupled_rotate",
    "mla_softmax_scale",
    "LatentAttention",
    "nope_layers",
    "attention_temperature",
    "layer_types",
    "LayerRope",
    "layer_rope",
    "proportional_frequencies",
]

#: Qwen2-VL's default split of the 64 pairs of a 128-wide head: 16 temporal, 24 height, 24 width.
MROPE_SECTION = (16, 24, 24)

#: ``model_type`` values whose RoPE pairs features ``(2i, 2i+1)`` (``view_as_complex``) in transformers.
_INTERLEAVED = frozenset({"llama4", "llama4_text", "deepseek_v2"})

Positions = torch.Tensor | Sequence[int] | None


# --------------------------------------------------------------------------- config reading


def _check_config(config: object, name: str = "config") -> Mapping:
    if not isinstance(config, Mapping):
        raise TypeError(
            f"{name} must be a dict of a model's configuration (the keys of its config.json), "
            f"got {type(config).__name__}"
        )
    return config


def _need(config: Mapping, key: str, why: str) -> object:
    if config.get(key) is None:
        raise ValueError(f"config needs the key {key!r} ({why})")
    return config[key]


def head_dim_of(config: Mapping) -> int:
    """The head width: ``config["head_dim"]``, or ``hidden_size // num_attention_heads`` when that is missing or None."""
    config = _check_config(config)
    if config.get("head_dim") is not None:
        return check_d_model(config["head_dim"], "config['head_dim']")
    hidden = check_int("config['hidden_size']", _need(config, "hidden_size", "or 'head_dim'"), minimum=1)
    heads = check_int("config['num_attention_heads']", _need(config, "num_attention_heads", "or 'head_dim'"), minimum=1)
    if hidden % heads:
        raise ValueError(f"config['hidden_size'] = {hidden} is not a multiple of num_attention_heads = {heads}")
    return check_d_model(hidden // heads, "head_dim (hidden_size // num_attention_heads)")


#: Keys of ``rope_parameters`` that describe the model, not a context-extension rule.
_NOT_SCALING = ("rope_theta", "rope_type", "type", "partial_rotary_factor", "mrope_section", "mrope_interleaved")


def _rope_parameters(config: Mapping, layer_type: str | None = None) -> dict:
    """``rope_parameters`` (of ``layer_type`` when the model has one per type), in the new form.

    The older form — ``rope_theta`` beside ``rope_scaling`` (``"type"`` or ``"rope_type"``) — is read too.
    """
    params = config.get("rope_parameters")
    if params is not None:
        if not isinstance(params, Mapping):
            raise TypeError(f"config['rope_parameters'] must be a dict, got {type(params).__name__}")
        if layer_type is not None:
            if layer_type not in params:
                raise ValueError(
                    f"config['rope_parameters'] has no entry for the layer type {layer_type!r} "
                    f"(it has {', '.join(map(repr, params))})"
                )
            params = params[layer_type]
            if not isinstance(params, Mapping):
                raise TypeError(f"config['rope_parameters'][{layer_type!r}] must be a dict")
        elif "rope_theta" not in params and all(isinstance(v, Mapping) for v in params.values()):
            raise ValueError(
                f"config['rope_parameters'] holds one entry per layer type ({', '.join(map(repr, params))}): "
                "name the layer (layer_rope(config, layer))"
            )
        out = dict(params)
    else:  # the older config.json form
        out = dict(config.get("rope_scaling") or {})
        if "rope_theta" in config:
            out["rope_theta"] = config["rope_theta"]
    kind = out.pop("type", None)
    out.setdefault("rope_type", kind or "default")
    if out["rope_type"] == "mrope":  # Qwen2-VL's old configs: plain frequencies, split by mrope_section
        out["rope_type"] = "default"
    if "rope_theta" not in out:
        raise ValueError("config needs 'rope_theta' (in config['rope_parameters'] or at the top level)")
    return out


def rope_settings(config: Mapping, *, layer_type: str | None = None) -> dict:
    """The keyword arguments of :func:`~pe_lessons.rotary.apply_rope` for this config: ``base``, ``scaling``, ``rotary_dim``.

    ``base`` is ``rope_theta``; ``scaling`` the context-extension rule (``None`` for
    ``"default"``); ``rotary_dim`` is ``int(head_dim·partial_rotary_factor)`` (GPT-NeoX, Phi),
    else ``None`` (the whole head). ``layer_type`` picks the entry of models with one
    ``rope_parameters`` per layer type (Gemma 3, ModernBERT). The layout is not a config key:
    see :class:`LayerRope`.
    """
    config = _check_config(config)
    params = _rope_parameters(config, layer_type)
    base = check_base(params["rope_theta"], "rope_theta")
    if params["rope_type"] == "proportional":
        raise ValueError(
            "rope_type 'proportional' (p-RoPE) zeroes the slowest pairs' frequencies: use layer_rope(config, layer), "
            "which handles it"
        )
    head_dim = head_dim_of(config)
    factor = params.get("partial_rotary_factor", config.get("partial_rotary_factor", config.get("rotary_pct")))
    rotary_dim = None
    if factor is not None:
        factor = _fraction(factor, "partial_rotary_factor")
        rotary_dim = int(head_dim * factor)
        if rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(
                f"partial_rotary_factor = {factor} of head_dim {head_dim} gives {rotary_dim} rotated features; "
                "it must be a positive even number"
            )
        rotary_dim = None if rotary_dim == head_dim else rotary_dim
    scaling = None
    if params["rope_type"] != "default":
        scaling = {k: v for k, v in params.items() if k not in _NOT_SCALING or k == "rope_type"}
        if (
            scaling["rope_type"] in ("dynamic", "yarn", "longrope")
            and "original_max_position_embeddings" not in scaling
            and config.get("max_position_embeddings") is not None
        ):  # as transformers: the trained length defaults to max_position_embeddings
            scaling["original_max_position_embeddings"] = config["max_position_embeddings"]
        scaled_frequencies(rotary_dim or head_dim, scaling, base=base)  # a bad rule fails here, by name
    return {"base": base, "scaling": scaling, "rotary_dim": rotary_dim}


def _fraction(value: object, name: str) -> float:
    value = check_real(name, value, above=0.0, what="a fraction in (0, 1]")
    if value > 1:
        raise ValueError(f"{name} must be a fraction in (0, 1], got {value!r}")
    return value


# --------------------------------------------------------------------------- one block of pairs, by apply_rope


def _rotate_block(
    x: torch.Tensor, lo: int, hi: int, positions: torch.Tensor, first: float, ratio: float
) -> torch.Tensor:
    r"""Turn the half-layout pairs ``lo … hi-1`` of ``x`` (pair ``i`` = features ``i``, ``i + d/2``) by ``m·θ_i``.

    ``θ_i = first·ratio^{i-lo}`` (``0 < ratio < 1``): plain RoPE of width ``2n`` (``n = hi - lo``) with
    base ``ratio^{-n}``, at positions ``first·m`` — which is how :func:`apply_rope` does it.
    """
    n, half = hi - lo, x.shape[-1] // 2
    if n == 0:
        return x
    index = torch.cat((torch.arange(lo, hi), torch.arange(half + lo, half + hi))).to(x.device)
    pos = positions if first == 1.0 else positions.to(torch.float64) * first
    turned = apply_rope(x.index_select(-1, index), pos, base=ratio ** (-n), layout="half")
    out = x.clone()
    out[..., index] = turned
    return out


def _check_x(x: object, head_dim: int | None = None) -> torch.Tensor:
    x = check_float_tensor("x", x)
    if x.dim() < 2:
        raise ValueError(f"x must have shape [..., seq, head_dim], got {list(x.shape)}")
    if head_dim is not None and x.shape[-1] != head_dim:
        raise ValueError(f"x.shape[-1] must be the config's head_dim = {head_dim}, got shape {list(x.shape)}")
    return x


def _int_positions(name: str, positions: object) -> torch.Tensor:
    if isinstance(positions, (list, tuple)):
        positions = torch.tensor(positions)
    positions = check_tensor(name, positions)
    if positions.dtype.is_floating_point or positions.dtype.is_complex or positions.dtype == torch.bool:
        raise TypeError(f"{name} must hold integers, got dtype {positions.dtype}")
    return positions.long()


# --------------------------------------------------------------------------- multimodal RoPE (Qwen2-VL)


def _grid(item: object, index: int) -> tuple[tuple[int, int, int], float]:
    if isinstance(item, Mapping):
        if "grid_thw" not in item:
            raise ValueError(f"segments[{index}] is a dict and needs the key 'grid_thw' (t, h, w)")
        grid, interval = item["grid_thw"], item.get("time_interval", 1.0)
    else:
        grid, interval = item, 1.0
    if isinstance(grid, torch.Tensor):
        grid = grid.tolist()
    if not isinstance(grid, (list, tuple)) or len(grid) != 3:
        raise ValueError(f"segments[{index}]: a vision grid is (t, h, w), three positive integers; got {grid!r}")
    t, h, w = (check_int(f"segments[{index}] grid", g, minimum=1) for g in grid)
    interval = check_real(f"segments[{index}]['time_interval']", interval, minimum=0.0, below=1e9)
    return (t, h, w), interval


def mrope_position_ids(
    segments: Sequence[object], *, spatial_merge_size: int = 1, rule: str = "transformers"
) -> torch.Tensor:
    r"""The ``[3, seq]`` position ids (time, height, width) of a text + image/video sequence, as ``get_rope_index``.

    ``segments`` lists the sequence in order: an ``int`` ``n`` is ``n`` text tokens; a triple
    ``(t, h, w)`` is an image's patch grid (``image_grid_thw``: temporal patches — 1 for an image, two
    frames each in a video —, patch rows, patch columns, before merging); a dict ``{"grid_thw": (t, h, w),
    "time_interval": τ}`` is a video whose temporal patches are ``τ`` apart (Qwen2.5-VL:
    ``τ = tokens_per_second · second_per_grid_t``). The language model sees
    ``t × (h/k) × (w/k)`` tokens per grid, ``k = spatial_merge_size`` (2 in the released models).

    With ``s`` the next free position: text tokens get ``(s, s, s), (s+1, s+1, s+1), …``; the
    token of temporal patch ``f``, row ``r``, column ``c`` gets ``(s + ⌊f·τ⌋, s + r, s + c)``; after text
    ``s`` advances by its length. After a grid, ``rule`` says where the next segment starts:

    - ``"paper"``: one past the largest id of the grid in any stream, the Qwen2-VL paper's rule (§2.1:
      each modality starts at the preceding modality's largest position id plus one) and that of Qwen's
      ``get_rope_index`` in transformers up to v5.2 (``st_idx = llm_pos_ids_list[-1].max() + 1``);
    - ``"transformers"`` (default, what the tests compare with transformers 5.24): ``s + max(h, w)/k``.

    For an image (``t = 1``) the two agree: its largest id is ``s + max(h, w)/k − 1``. After a video
    whose time ids run past ``s + max(h, w)/k − 1`` they differ: 5.24 puts the text's time id inside the
    video's time range, while its own decoding (``rope_deltas``) continues at the largest id + 1. The change
    is visible in the v5.2 vs 5.3 traces of transformers issue #45381, whose fix (PR #45400) corrected the
    video's time ids but kept ``s + max(h, w)/k``.
    """
    if rule not in ("paper", "transformers"):
        raise ValueError(f"rule must be 'paper' or 'transformers', got {rule!r}")
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or len(segments) == 0:
        raise ValueError("segments must be a non-empty list of text lengths (int) and vision grids ((t, h, w))")
    k = check_int("spatial_merge_size", spatial_merge_size, minimum=1)
    start, parts = 0, []
    for index, item in enumerate(segments):
        if isinstance(item, numbers.Integral) and not isinstance(item, bool):
            n = check_int(f"segments[{index}]", item, minimum=1)
            check_fits("segments", [3, start + n], torch.int64, what="the position ids")
            parts.append((torch.arange(n) + start).expand(3, n))
            start += n
            continue
        if isinstance(item, bool) or isinstance(item, (str, bytes)):
            raise TypeError(f"segments[{index}] must be an int (text) or a grid (t, h, w), got {item!r}")
        (t, h, w), interval = _grid(item, index)
        if h % k or w % k:
            raise ValueError(
                f"segments[{index}]: the grid's h = {h} and w = {w} must be multiples of spatial_merge_size = {k}"
            )
        h, w = h // k, w // k
        check_fits("segments", [3, t * h * w], torch.int64, what=f"the position ids of segments[{index}]")
        frames = (torch.arange(t) * interval).long() + start
        tt, hh, ww = torch.meshgrid(frames, torch.arange(h) + start, torch.arange(w) + start, indexing="ij")
        parts.append(torch.stack((tt, hh, ww)).reshape(3, -1))
        start = int(parts[-1].max()) + 1 if rule == "paper" else start + max(h, w)
    return torch.cat(parts, dim=1)


def _mrope_config(config: Mapping) -> tuple[int, float, tuple[int, ...]]:
    config = _check_config(config)
    head_dim = head_dim_of(config)
    params = _rope_parameters(config)
    if params["rope_type"] != "default":
        raise ValueError(f"multimodal RoPE here supports rope_type 'default', got {params['rope_type']!r}")
    base = check_base(params["rope_theta"], "rope_theta")
    section = params.get("mrope_section", MROPE_SECTION)
    if isinstance(section, (str, bytes)) or not isinstance(section, Sequence) or len(section) != 3:
        raise ValueError(f"mrope_section must be three numbers of pairs (time, height, width), got {section!r}")
    section = tuple(check_int("mrope_section item", s, minimum=0) for s in section)
    if sum(section) != head_dim // 2:
        raise ValueError(
            f"mrope_section {list(section)} must add up to head_dim/2 = {head_dim // 2} pairs, got {sum(section)}"
        )
    return head_dim, base, section


def _check_mrope_ids(position_ids: object) -> torch.Tensor:
    ids = _int_positions("position_ids", position_ids)
    if ids.dim() not in (2, 3) or ids.shape[0] != 3:
        raise ValueError(
            f"position_ids must have shape [3, seq] or [3, batch, seq] (time, height, width), got {list(ids.shape)}"
        )
    return ids


def mrope_angles(position_ids: torch.Tensor, config: Mapping) -> torch.Tensor:
    r"""The angle of every pair, float64 ``[..., seq, head_dim/2]``: pair ``i`` in block ``s`` of ``mrope_section`` turns by ``p_s·θ_i``."""
    head_dim, base, section = _mrope_config(config)
    ids = _check_mrope_ids(position_ids).to(torch.float64)
    theta = rope_frequencies(head_dim, base)
    stream = torch.repeat_interleave(torch.arange(3), torch.tensor(section))  # which stream each pair reads
    angles = ids[..., None] * theta  # [3, ..., seq, pairs]
    return angles.gather(0, stream.expand(1, *angles.shape[1:]).clone()).squeeze(0)


def mrope_rotate(x: torch.Tensor, position_ids: torch.Tensor, config: Mapping) -> torch.Tensor:
    r"""Rotate ``x`` (``[..., seq, head_dim]``, or ``[batch, …, seq, head_dim]`` for ``[3, batch, seq]`` ids) as Qwen2-VL.

    Half layout; the pairs of block ``s`` (``mrope_section[s]`` consecutive pairs) turn with the
    stream ``position_ids[s]`` — one :func:`~pe_lessons.rotary.apply_rope` per block.
    """
    head_dim, base, section = _mrope_config(config)
    x = _check_x(x, head_dim)
    ids = _check_mrope_ids(position_ids).to(x.device)
    if ids.shape[-1] != x.shape[-2]:
        raise ValueError(f"position_ids cover {ids.shape[-1]} tokens, x has seq = {x.shape[-2]}")
    lo = 0
    for s, n in enumerate(section):
        x = _rotate_block(x, lo, lo + n, ids[s], base ** (-2 * lo / head_dim), base ** (-2 / head_dim))
        lo += n
    return x


# --------------------------------------------------------------------------- 2-D RoPE (Pixtral)


def axial_position_ids(height: int, width: int) -> torch.Tensor:
    """``[height·width, 2]`` (row, column) of the patches of an image, row by row, as Pixtral's vision encoder."""
    height = check_int("height", height, minimum=1)
    width = check_int("width", width, minimum=1)
    check_fits("height", [height * width, 2], torch.int64, what="the patch positions")
    rows, cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    return torch.stack((rows.flatten(), cols.flatten()), dim=-1)


def _axial_config(config: Mapping) -> tuple[int, float]:
    config = _check_config(config)
    head_dim = head_dim_of(config)
    if head_dim % 4:
        raise ValueError(
            f"2-D RoPE splits the pairs between rows and columns: head_dim must be a multiple of 4, got {head_dim}"
        )
    params = _rope_parameters(config)
    if params["rope_type"] not in ("default", "axial"):
        raise ValueError(f"2-D RoPE here supports rope_type 'axial' (or 'default'), got {params['rope_type']!r}")
    return head_dim, check_base(params["rope_theta"], "rope_theta")


def _check_axial_ids(position_ids: object) -> torch.Tensor:
    ids = _int_positions("position_ids", position_ids)
    if ids.dim() < 2 or ids.shape[-1] != 2:
        raise ValueError(f"position_ids must have shape [..., n, 2] (row, column), got {list(ids.shape)}")
    return ids


def axial_angles(position_ids: torch.Tensor, config: Mapping) -> torch.Tensor:
    r"""Float64 ``[n, head_dim/2]``: pairs ``j < head_dim/4`` turn by ``r·θ_{2j}``, pairs ``head_dim/4 + j`` by ``c·θ_{2j+1}``."""
    head_dim, base = _axial_config(config)
    ids = _check_axial_ids(position_ids).to(torch.float64)
    theta = rope_frequencies(head_dim, base)
    return torch.cat((ids[..., 0:1] * theta[0::2], ids[..., 1:2] * theta[1::2]), dim=-1)


def axial_rotate(x: torch.Tensor, position_ids: torch.Tensor, config: Mapping) -> torch.Tensor:
    r"""Rotate patch features ``x`` (``[..., n, head_dim]``) by their ``(row, column)`` (``[n, 2]``), as Pixtral.

    Half layout. The row block uses the even frequencies ``θ_{2j} = base^{-2j/(head_dim/2)}``: plain
    RoPE of width ``head_dim/2``; the column block uses ``θ_{2j+1} = base^{-2/head_dim}·θ_{2j}``.
    Then ``⟨R(r, c) q, R(r', c') k⟩`` depends on ``(r - r', c - c')`` only.
    """
    head_dim, base = _axial_config(config)
    x = _check_x(x, head_dim)
    ids = _check_axial_ids(position_ids).to(x.device)
    if ids.dim() != 2 or ids.shape[0] != x.shape[-2]:
        raise ValueError(
            f"position_ids must have shape [n, 2] with n = x.shape[-2] = {x.shape[-2]}, got {list(ids.shape)}"
        )
    q = head_dim // 4
    step = base ** (-4 / head_dim)
    x = _rotate_block(x, 0, q, ids[:, 0], 1.0, step)
    return _rotate_block(x, q, 2 * q, ids[:, 1], base ** (-2 / head_dim), step)


# --------------------------------------------------------------------------- decoupled RoPE (DeepSeek MLA)


def _mla_config(config: Mapping) -> dict[str, Any]:
    config = _check_config(config)
    out: dict[str, Any] = {}
    for key in ("hidden_size", "num_attention_heads", "kv_lora_rank", "qk_nope_head_dim", "v_head_dim"):
        out[key] = check_int(f"config[{key!r}]", _need(config, key, "multi-head latent attention"), minimum=1)
    out["qk_rope_head_dim"] = check_d_model(
        _need(config, "qk_rope_head_dim", "the rotated part of each head"), "config['qk_rope_head_dim']"
    )
    q_rank = config.get("q_lora_rank")
    out["q_lora_rank"] = None if q_rank is None else check_int("config['q_lora_rank']", q_rank, minimum=1)
    out["rms_norm_eps"] = float(config.get("rms_norm_eps", 1e-6))
    out["attention_bias"] = bool(config.get("attention_bias", False))
    model_type = config.get("model_type", "deepseek_v3")
    # DeepSeek-V2 in transformers: interleaved in and out (view_as_complex); V3: interleaved in, half out
    out["layout_in"] = "interleaved" if model_type == "deepseek_v2" or config.get("rope_interleave", True) else "half"
    out["permute_out"] = model_type != "deepseek_v2" and bool(config.get("rope_interleave", True))
    out["rope"] = rope_settings({**config, "head_dim": out["qk_rope_head_dim"]})
    return out


def decoupled_rotate(x: torch.Tensor, positions: Positions, config: Mapping) -> torch.Tensor:
    r"""Rotate the ``qk_rope_head_dim`` features of DeepSeek queries or keys (``[..., seq, qk_rope_head_dim]``).

    As transformers does it: DeepSeek-V2 (``model_type="deepseek_v2"``) pairs ``(2i, 2i+1)`` and
    keeps them in place; DeepSeek-V3 with ``rope_interleave=True`` (its default) pairs ``(2i, 2i+1)``
    and writes the result in the half layout — ``to_half_layout(apply_rope(x, layout="interleaved"))``,
    a fixed permutation applied to q and k alike, so every score is unchanged; with
    ``rope_interleave=False``, plain half layout. The rule (``rope_parameters``, e.g. YaRN) is applied
    with ``head_dim = qk_rope_head_dim``.
    """
    c = _mla_config(config)
    x = _check_x(x, c["qk_rope_head_dim"])
    rope = c["rope"]
    out = apply_rope(x, positions, base=rope["base"], scaling=rope["scaling"], layout=c["layout_in"])
    return to_half_layout(out) if c["permute_out"] else out


def mla_softmax_scale(config: Mapping) -> float:
    r"""``(qk_nope_head_dim + qk_rope_head_dim)^{-1/2}``, times ``mscale(s, mscale_all_dim)²`` under YaRN (DeepSeek-V3).

    ``mscale(s, m) = 0.1·m·ln s + 1`` (1 for ``s ≤ 1``), as transformers' ``yarn_apply_mscale``.
    """
    c = _mla_config(config)
    scale = (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]) ** -0.5
    scaling = c["rope"]["scaling"]
    if scaling is not None and scaling.get("mscale_all_dim"):
        s, m = float(scaling["factor"]), float(scaling["mscale_all_dim"])
        mscale = 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0
        scale *= mscale * mscale
    return scale


class LatentAttention(nn.Module):
    r"""DeepSeek-V2/V3 multi-head latent attention (MLA), causal, with decoupled RoPE.

    Parameters carry transformers' ``DeepseekV3Attention`` names, so its ``state_dict`` loads here.
    For a token ``x``: the latent ``c = RMSNorm(W_{DKV} x)`` (``kv_lora_rank`` wide, the only thing
    cached besides ``k_rope``); per head ``h`` the unrotated key ``k^{nope}_h = W^{UK}_h c`` and the
    value ``v_h = W^{UV}_h c``; the rotated key part ``k^{rope} = R_n W_{KR} x`` is **one** vector
    shared by all heads. Queries ``q_h = [q^{nope}_h | R_m q^{rope}_h]``. The score is

    .. math::

        s_{h}(m, n) = \big(q^{nope}_{h,m}\cdot W^{UK}_h c_n + (R_m q^{rope}_{h,m})\cdot(R_n k^{rope}_n)\big)\cdot\text{scale}.

    The first term equals ``((W^{UK}_h)^\top q^{nope}_{h,m})\cdot c_n``: the up-projection can be
    absorbed into the query (``absorbed=True`` in :meth:`scores`), so attention runs on the cached
    latent. Had the key been rotated after the up-projection, ``R_n W^{UK}_h c_n``, the matrix
    between ``q`` and ``c`` would depend on ``n`` and nothing could be absorbed: hence the separate,
    small rotated part.
    """

    def __init__(self, config: Mapping) -> None:
        super().__init__()
        c = _mla_config(config)
        self.num_heads, self.kv_lora_rank = c["num_attention_heads"], c["kv_lora_rank"]
        self.qk_nope_head_dim, self.qk_rope_head_dim = c["qk_nope_head_dim"], c["qk_rope_head_dim"]
        self.v_head_dim, self.q_lora_rank = c["v_head_dim"], c["q_lora_rank"]
        self.qk_head_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
        hidden, heads, bias = c["hidden_size"], self.num_heads, c["attention_bias"]
        if self.q_lora_rank is None:
            self.q_proj = nn.Linear(hidden, heads * self.qk_head_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(hidden, self.q_lora_rank, bias=bias)
            self.q_a_layernorm = nn.RMSNorm(self.q_lora_rank, eps=c["rms_norm_eps"])
            self.q_b_proj = nn.Linear(self.q_lora_rank, heads * self.qk_head_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(hidden, self.kv_lora_rank + self.qk_rope_head_dim, bias=bias)
        self.kv_a_layernorm = nn.RMSNorm(self.kv_lora_rank, eps=c["rms_norm_eps"])
        self.kv_b_proj = nn.Linear(self.kv_lora_rank, heads * (self.qk_nope_head_dim + self.v_head_dim), bias=False)
        self.o_proj = nn.Linear(heads * self.v_head_dim, hidden, bias=bias)
        self.scaling = mla_softmax_scale(config)
        self._config = dict(config)

    def _rotate(self, x: torch.Tensor, positions: Positions) -> torch.Tensor:
        return decoupled_rotate(x, positions, self._config)

    def pieces(self, hidden: torch.Tensor, positions: Positions = None) -> dict[str, torch.Tensor]:
        """The parts of the computation: ``q_nope``, ``q_rope`` (rotated) ``[b, heads, seq, ·]``; ``latent``
        ``[b, seq, kv_lora_rank]``; ``k_rope`` (rotated, shared) ``[b, 1, seq, qk_rope_head_dim]``;
        ``k_nope``, ``v`` ``[b, heads, seq, ·]``."""
        hidden = check_float_tensor("hidden", hidden)
        if hidden.dim() != 3:
            raise ValueError(f"hidden must have shape [batch, seq, hidden_size], got {list(hidden.shape)}")
        b, s, _ = hidden.shape
        positions = torch.arange(s, device=hidden.device) if positions is None else positions
        if self.q_lora_rank is None:
            q = self.q_proj(hidden)
        else:
            q = self.q_b_proj(self.q_a_layernorm(self.q_a_proj(hidden)))
        q = q.view(b, s, self.num_heads, self.qk_head_dim).transpose(1, 2)
        q_nope, q_rope = q.split([self.qk_nope_head_dim, self.qk_rope_head_dim], dim=-1)
        latent, k_rope = self.kv_a_proj_with_mqa(hidden).split([self.kv_lora_rank, self.qk_rope_head_dim], dim=-1)
        latent = self.kv_a_layernorm(latent)
        kv = self.kv_b_proj(latent).view(b, s, self.num_heads, -1).transpose(1, 2)
        k_nope, v = kv.split([self.qk_nope_head_dim, self.v_head_dim], dim=-1)
        return {
            "q_nope": q_nope,
            "q_rope": self._rotate(q_rope, positions),
            "latent": latent,
            "k_rope": self._rotate(k_rope.view(b, 1, s, self.qk_rope_head_dim), positions),
            "k_nope": k_nope,
            "v": v,
        }

    def absorbed_key_weight(self) -> torch.Tensor:
        """``W^{UK}``: ``[heads, qk_nope_head_dim, kv_lora_rank]``, the key half of ``kv_b_proj`` per head."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.qk_nope_head_dim + self.v_head_dim, self.kv_lora_rank)
        return w[:, : self.qk_nope_head_dim]

    def scores(self, hidden: torch.Tensor, positions: Positions = None, *, absorbed: bool = False) -> torch.Tensor:
        """Scaled scores ``[b, heads, seq, seq]`` before the mask; ``absorbed=True`` computes the unrotated
        term on the latent, ``((W^{UK})^T q^{nope}) · c``, without forming any key."""
        p = self.pieces(hidden, positions)
        rope = p["q_rope"] @ p["k_rope"].transpose(-2, -1)
        if absorbed:
            q_latent = p["q_nope"] @ self.absorbed_key_weight()  # [b, h, s, kv_lora_rank]
            nope = q_latent @ p["latent"][:, None].transpose(-2, -1)
        else:
            nope = p["q_nope"] @ p["k_nope"].transpose(-2, -1)
        return (nope + rope) * self.scaling

    def forward(self, hidden: torch.Tensor, positions: Positions = None) -> torch.Tensor:
        """Causal attention output ``[b, seq, hidden_size]``."""
        p = self.pieces(hidden, positions)
        k = torch.cat((p["k_nope"], p["k_rope"].expand(-1, self.num_heads, -1, -1)), dim=-1)
        q = torch.cat((p["q_nope"], p["q_rope"]), dim=-1)
        scores = q @ k.transpose(-2, -1) * self.scaling
        s = scores.shape[-1]
        future = torch.ones(s, s, dtype=torch.bool, device=scores.device).triu(1)
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        out = (weights @ p["v"]).transpose(1, 2).reshape(hidden.shape[0], s, -1)
        return self.o_proj(out)


# --------------------------------------------------------------------------- layers without RoPE (Llama 4, SmolLM3)


def _num_layers(config: Mapping) -> int:
    return check_int("config['num_hidden_layers']", _need(config, "num_hidden_layers", "the layer count"), minimum=1)


def nope_layers(config: Mapping) -> list[bool]:
    """For each layer, ``True`` where it has **no** RoPE (Llama 4, SmolLM3).

    Read from ``no_rope_layers`` — despite its name, transformers' list holds ``1`` for a layer that
    *uses* RoPE and ``0`` for one that does not — or, when that is missing, built as transformers does:
    every ``no_rope_layer_interval``-th layer (default 4: layers 3, 7, 11, …) has none. Models without
    either key use RoPE everywhere.
    """
    config = _check_config(config)
    n = _num_layers(config)
    flags = config.get("no_rope_layers")
    if flags:
        if isinstance(flags, (str, bytes)) or not isinstance(flags, Sequence) or len(flags) != n:
            raise ValueError(
                f"config['no_rope_layers'] must list one 0/1 per layer ({n} layers; 1 = uses RoPE), got {flags!r}"
            )
        if any(f not in (0, 1) or isinstance(f, float) for f in flags):
            raise ValueError(f"config['no_rope_layers'] must hold 0 (no RoPE) or 1 (RoPE), got {list(flags)!r}")
        return [not bool(f) for f in flags]
    if "no_rope_layer_interval" not in config:
        return [False] * n
    every = check_int("config['no_rope_layer_interval']", config["no_rope_layer_interval"], minimum=1)
    return [(i + 1) % every == 0 for i in range(n)]


def attention_temperature(positions: Positions, config: Mapping) -> torch.Tensor:
    r"""Llama 4's query scale in its NoPE layers, float32 ``[seq]``: ``1 + attn_scale·ln(1 + ⌊(m+1)/floor_scale⌋)``.

    ``floor_scale`` (8 192) and ``attn_scale`` (0.1) come from the config; all ones when
    ``attn_temperature_tuning`` is false. The scale is 1 up to position ``floor_scale - 2``, then
    grows like the log of the position: attention over many far tokens stays sharp (the idea of
    "Scalable-Softmax", Nakanishi 2025).
    """
    config = _check_config(config)
    pos = _int_positions("positions", positions)
    if not config.get("attn_temperature_tuning", False):
        return torch.ones(pos.shape, dtype=torch.float32)
    floor_scale = check_positive_int("config['floor_scale']", config.get("floor_scale", 8192))
    attn_scale = check_real("config['attn_scale']", config.get("attn_scale", 0.1))
    if pos.numel() and int(pos.min()) < 0:
        raise ValueError(f"positions must be >= 0, got {int(pos.min())}")
    return torch.log1p(torch.floor((pos.float() + 1.0) / floor_scale)) * attn_scale + 1.0


# --------------------------------------------------------------------------- a base per layer type (Gemma 3, ModernBERT)


def layer_types(config: Mapping) -> list[str]:
    """``"sliding_attention"`` or ``"full_attention"`` for each layer, as the model's configuration builds them.

    ``layer_types`` when given; else Gemma 3's rule (``sliding_window_pattern`` p, default 6: layer
    ``i`` is global when ``(i + 1) % p == 0``) or ModernBERT's (``global_attn_every_n_layers`` n,
    default 3: global when ``i % n == 0``), picked by ``model_type``; other models: all full.
    """
    config = _check_config(config)
    n = _num_layers(config)
    types = config.get("layer_types")
    if types is not None:
        if isinstance(types, (str, bytes)) or not isinstance(types, Sequence) or len(types) != n:
            raise ValueError(f"config['layer_types'] must list one type per layer ({n}), got {types!r}")
        return [str(t) for t in types]
    kind = str(config.get("model_type", ""))
    if kind.startswith("gemma3"):
        p = check_int("config['sliding_window_pattern']", config.get("sliding_window_pattern", 6), minimum=1)
        return ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    if kind == "modernbert":
        every = check_int(
            "config['global_attn_every_n_layers']", config.get("global_attn_every_n_layers", 3), minimum=1
        )
        return ["full_attention" if i % every == 0 else "sliding_attention" for i in range(n)]
    return ["full_attention"] * n


def _per_type_parameters(config: Mapping, layer_type: str) -> dict | None:
    """Older Gemma 3 / ModernBERT config.json keys, in the per-type form (None when not such a config)."""
    kind = str(config.get("model_type", ""))
    if kind.startswith("gemma3"):
        global_ = {**(config.get("rope_scaling") or {}), "rope_theta": config.get("rope_theta", 1_000_000.0)}
        local = {"rope_type": "default", "rope_theta": config.get("rope_local_base_freq", 10_000.0)}
    elif kind == "modernbert":
        global_ = {"rope_type": "default", "rope_theta": config.get("global_rope_theta", 160_000.0)}
        local = {"rope_type": "default", "rope_theta": config.get("local_rope_theta", 10_000.0)}
    else:
        return None
    return global_ if layer_type == "full_attention" else local


@dataclass(frozen=True)
class LayerRope:
    """How one layer of a model turns its queries and keys.

    ``base``, ``scaling``, ``rotary_dim`` and ``layout`` are :func:`~pe_lessons.rotary.apply_rope`'s
    arguments; ``proportion`` is set for p-RoPE (``rope_type="proportional"``); ``nope`` marks a
    layer without RoPE (:meth:`rotate` then returns its input).
    """

    head_dim: int
    base: float = 10000.0
    scaling: Mapping[str, object] | None = None
    rotary_dim: int | None = None
    layout: str = "half"
    proportion: float | None = None
    factor: float = 1.0
    nope: bool = False

    def frequencies(self) -> torch.Tensor:
        """``θ_i`` of every pair of the head, float64 ``[head_dim/2]`` (0 for pairs that do not turn)."""
        if self.nope:
            return torch.zeros(self.head_dim // 2, dtype=torch.float64)
        if self.proportion is not None:
            return proportional_frequencies(self.head_dim, self.base, self.proportion, factor=self.factor)
        r = self.rotary_dim or self.head_dim
        theta = scaled_frequencies(r, self.scaling, base=self.base)[0]
        return torch.cat((theta, torch.zeros((self.head_dim - r) // 2, dtype=torch.float64)))

    def rotate(self, x: torch.Tensor, positions: Positions = None) -> torch.Tensor:
        """``x`` (``[..., seq, head_dim]``) turned as this layer turns its queries and keys."""
        x = _check_x(x, self.head_dim)
        if self.nope:
            return x
        if self.proportion is not None:
            kept = int(self.proportion * self.head_dim // 2)
            pos = torch.arange(x.shape[-2]) if positions is None else _int_positions("positions", positions)
            ratio = self.base ** (-2 / self.head_dim)
            return _rotate_block(x, 0, kept, pos.to(x.device), 1.0 / self.factor, ratio)
        return apply_rope(
            x, positions, base=self.base, scaling=self.scaling, rotary_dim=self.rotary_dim, layout=self.layout
        )


def layer_rope(config: Mapping, layer: int) -> LayerRope:
    """The :class:`LayerRope` of layer ``layer`` (0-based): NoPE layers, the base and rule of its layer type,
    partial rotary, p-RoPE, and the layout (interleaved for Llama 4 and DeepSeek-V2, half elsewhere)."""
    config = _check_config(config)
    n = _num_layers(config)
    layer = check_int("layer", layer, minimum=0)
    if layer >= n:
        raise ValueError(f"layer must be below num_hidden_layers = {n}, got {layer}")
    head_dim = head_dim_of(config)
    layout = "interleaved" if config.get("model_type") in _INTERLEAVED else "half"
    assert layout in LAYOUTS
    if nope_layers(config)[layer]:
        return LayerRope(head_dim, layout=layout, nope=True)
    kind = layer_types(config)[layer]
    per_type = isinstance(config.get("rope_parameters"), Mapping) and kind in config["rope_parameters"]
    older = None if per_type or config.get("rope_parameters") else _per_type_parameters(config, kind)
    view = dict(config)
    if older is not None:
        view = {k: v for k, v in config.items() if k not in ("rope_scaling", "rope_theta")}
        view["rope_parameters"] = older
        per_type = False
    params = _rope_parameters(view, kind if per_type else None)
    if params["rope_type"] == "proportional":
        proportion = _fraction(params.get("partial_rotary_factor", 1.0), "partial_rotary_factor")
        factor = check_real("rope_parameters['factor']", params.get("factor", 1.0), above=0.0)
        base = check_base(params["rope_theta"], "rope_theta")
        return LayerRope(head_dim, base=base, layout=layout, proportion=proportion, factor=factor)
    settings = rope_settings(view, layer_type=kind if per_type else None)
    return LayerRope(head_dim, layout=layout, **settings)


def proportional_frequencies(head_dim: int, base: float, proportion: float, *, factor: float = 1.0) -> torch.Tensor:
    r"""p-RoPE's frequencies, float64 ``[head_dim/2]``: ``base^{-2i/head_dim}/factor`` for the first
    ``int(proportion·head_dim)//2`` pairs, 0 for the rest (transformers' ``"proportional"`` rule).

    Unlike partial rotary, the kept pairs keep the frequencies they have in a full head: p-RoPE
    removes the slowest pairs, partial rotary squeezes the whole range into fewer pairs.
    """
    head_dim = check_d_model(head_dim, "head_dim")
    base = check_base(base)
    proportion = _fraction(proportion, "proportion")
    factor = check_real("factor", factor, above=0.0)
    kept = int(proportion * head_dim // 2)
    theta = rope_frequencies(head_dim, base)
    theta[kept:] = 0.0
    return theta / factor
