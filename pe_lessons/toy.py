r"""A tiny Transformer with a pluggable position scheme, three tasks, training and evaluation.

Small enough to train in seconds on a laptop CPU, so students can compare position
schemes themselves.

Model. Tokens → embedding ``E[token]`` → position scheme → ``n_layers`` pre-norm
blocks (multi-head self-attention, then a 2-layer MLP, each added to the residual) →
LayerNorm → linear head. Attention, written out in :func:`attention`, is

.. math::

    \mathrm{Attention}(q, k, v) = \mathrm{softmax}\!\Big(\frac{\tilde q\, \tilde k^\top}{\sqrt{head\_dim}}
    + b + M\Big)\, v, \qquad (\tilde q, \tilde k) = \mathrm{rotate}(q, k, positions)

where ``b`` is a relative bias (or 0) and ``M`` the causal mask: ``-∞`` on every key after
its query when ``causal=True`` (a decoder), else 0 (every token sees every token, an encoder).
Position schemes (:func:`available_schemes`):

- ``"none"``: nothing; without a mask the model is then permutation equivariant (permute the
  tokens, the per-token outputs permute the same way) and a mean-pooled output is invariant;
  with ``causal=True`` it is a decoder with no positional encoding (NoPE).
- ``"sinusoidal"``: :class:`~pe_lessons.sinusoidal.SinusoidalPositionalEncoding` added to the embeddings.
- ``"learned"``: :class:`~pe_lessons.learned.LearnedPositionalEmbedding` added to the embeddings.
- ``"rotary"``: nothing is added; ``rotate`` turns q and k by position-dependent angles
  (:func:`~pe_lessons.rotary.apply_rope`) before the dot product, with the model's ``rope_base`` and
  context-extension rule ``rope_scaling`` (:func:`~pe_lessons.rotary.scaled_frequencies`);
  :meth:`ToyTransformer.with_rope` gives a copy that reads positions with another rule.
- ``"alibi"``: :class:`~pe_lessons.relative.ALiBiBias`, a fixed linear penalty on distance, as ``b``.
- ``"t5"``: :class:`~pe_lessons.relative.RelativePositionBias`, a learned bucketed bias, as ``b``, added
  to **unscaled** scores as in T5 (``q̃ k̃ᵀ + b``, no ``1/√head_dim``: T5 folds that factor into the
  initialisation of the query projection, and so does this toy).

Tasks (all need positions; all have a fixed vocabulary of ``n_symbols`` filler tokens; :data:`TASKS`):

- :class:`OrderTask` (``"order"``): two marker tokens A and B sit at random places among
  random fillers; say which comes first (2 classes, one answer per sequence, mean-pooled).
  Batches come in pairs — each sequence and its twin with A and B swapped — so a
  position-free model, which gives both twins the same output, scores exactly 50 %.
- :class:`LagTask` (``"lag"``): at every position ``pos ≥ lag`` output the token ``lag``
  places back (a purely relative rule; earlier positions are not scored).
- :class:`PreviousTokenTask` (``"previous"``): the lag task with ``lag = 1``.

Determinism: :func:`make_model` initialises from ``seed`` and leaves torch's global RNG
as it found it; data come from ``torch.Generator`` objects seeded explicitly; the ops
are deterministic on CPU, and :func:`train` / :func:`evaluate` run on one thread so the
machine's thread count does not change a single bit. Another CPU (other SIMD kernels)
can still change the last bits, which training amplifies: report trained metrics
coarsely rounded or as thresholds.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import cast

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from ._checks import (
    check_base,
    check_bool,
    check_choice,
    check_d_model,
    check_fits,
    check_int,
    check_positive_int,
    check_real,
    check_seed,
    check_tensor,
)
from .learned import LearnedPositionalEmbedding
from .relative import ALiBiBias, RelativePositionBias
from .rotary import apply_rope, scaled_frequencies
from .sinusoidal import SinusoidalPositionalEncoding

__all__ = [
    "Rotate",
    "RopeRotate",
    "Bias",
    "available_schemes",
    "attention",
    "MultiHeadSelfAttention",
    "EncoderBlock",
    "ToyTransformer",
    "OrderTask",
    "PreviousTokenTask",
    "LagTask",
    "TASKS",
    "make_task",
    "make_model",
    "train",
    "train_seeds",
    "evaluate",
    "with_nope_layers",
]

#: ``rotate(q, k, positions) -> (q, k)``: q and k are ``[batch, heads, seq, head_dim]``,
#: positions an int64 tensor ``[seq]``.
Rotate = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], "tuple[torch.Tensor, torch.Tensor]"]
#: ``bias(q_len, k_len) -> [heads, q_len, k_len]``: a number added to every attention logit.
Bias = Callable[[int, int], torch.Tensor]

SCHEMES = ("none", "sinusoidal", "learned", "rotary", "alibi", "t5")
IGNORE = -100  # label of positions that are not scored


def available_schemes() -> tuple[str, ...]:
    """The position schemes :class:`ToyTransformer` accepts."""
    return SCHEMES


@dataclass(frozen=True)
class RopeRotate:
    """The ``"rotary"`` scheme's hook: :func:`~pe_lessons.rotary.apply_rope` on q and k with one
    ``base`` and one context-extension rule ``scaling`` (``None``: plain RoPE).

    An object, not a closure, so that a rotary model can be pickled and ``torch.save``-d.
    """

    base: float = 10000.0
    scaling: Mapping[str, object] | None = None

    def __call__(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            apply_rope(q, positions, base=self.base, scaling=self.scaling),
            apply_rope(k, positions, base=self.base, scaling=self.scaling),
        )


def _rope_rotate(head_dim: int, base: object, scaling: Mapping[str, object] | None) -> RopeRotate:
    """A checked :class:`RopeRotate`: a bad base or rule raises here, naming it, not at the first forward."""
    base = check_base(base, "rope_base")
    try:
        scaled_frequencies(head_dim, scaling, base=base)  # checks every key of the rule
    except (TypeError, ValueError) as err:
        raise type(err)(f"rope_scaling: {err}") from None
    return RopeRotate(base, None if scaling is None else dict(scaling))


#: The plain ``"rotary"`` hook (base 10 000, no rule).
rope_rotate = RopeRotate()


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    rotate: Rotate | None = None,
    positions: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    r"""Scaled dot-product attention: ``softmax(scale · q̃ k̃ᵀ + bias + mask) v``, ``scale = 1/√head_dim``.

    ``q, k, v`` are ``[batch, heads, seq, head_dim]``. When ``rotate`` is given,
    ``(q̃, k̃) = rotate(q, k, positions)`` (``positions`` default to ``arange(seq)``);
    otherwise ``q̃, k̃ = q, k``. ``bias`` (optional) is added to the scores; it must broadcast
    to ``[batch, heads, seq, seq]`` (e.g. ``[heads, seq, seq]`` from ALiBi or a T5 bias).
    ``causal=True`` masks every key after its query (score ``-inf``, weight 0). ``scale`` replaces
    ``1/√head_dim`` (T5 uses ``scale=1``: unscaled scores). Returns ``[batch, heads, seq, head_dim]``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t)
        if t.dim() != 4:
            raise ValueError(f"{name} must have shape [batch, heads, seq, head_dim], got {list(t.shape)}")
    if q.shape != k.shape or k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"q, k, v shapes do not fit: q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)}")
    check_bool("causal", causal)
    if scale is not None:
        scale = check_real("scale", scale, above=0.0, hint="None for 1/sqrt(head_dim), 1 for T5")
    if rotate is not None:
        seq = q.shape[-2]
        if positions is None:
            positions = torch.arange(seq, device=q.device)
        q, k = rotate(q, k, positions)
    scores = q @ k.transpose(-2, -1)
    scores = scores / math.sqrt(q.shape[-1]) if scale is None else scores * scale
    if bias is not None:
        check_tensor("bias", bias)
        try:
            torch.broadcast_shapes(bias.shape, scores.shape)
        except RuntimeError:
            raise ValueError(
                f"bias of shape {list(bias.shape)} does not broadcast to the scores {list(scores.shape)} "
                "[batch, heads, seq, seq]"
            ) from None
        scores = scores + bias
    if causal:
        seq = scores.shape[-1]
        future = torch.ones(seq, seq, dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class MultiHeadSelfAttention(nn.Module):
    """Self-attention with ``n_heads`` heads of width ``d_model // n_heads``; see :func:`attention`.

    ``rotate`` turns q and k (rotary); ``bias`` is a module or function ``bias(q_len, k_len)`` giving
    ``[n_heads, q_len, k_len]`` added to the scores (ALiBi, T5); ``causal`` masks future keys; ``scale``
    multiplies ``q kᵀ`` (``None``: ``1/√head_dim``; T5: ``1``).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        rotate: Rotate | None = None,
        *,
        bias: Bias | None = None,
        causal: bool = False,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        d_model = check_d_model(d_model)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(f"n_heads must split d_model={d_model} into heads of even width, got n_heads={n_heads}")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.rotate = rotate
        self.bias = bias
        self.causal = check_bool("causal", causal)
        self.scale = scale

    def weights(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        """The attention weights ``[batch, heads, seq, seq]`` (rows: queries, columns: keys) for input ``x``."""
        b, s, _ = x.shape
        q, k, _ = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        eye = torch.eye(s, dtype=x.dtype, device=x.device).expand(b, self.n_heads, s, s)
        return attention(
            q, k, eye, rotate=self.rotate, positions=positions, bias=self._bias(s), causal=self.causal, scale=self.scale
        )

    def _bias(self, seq: int) -> torch.Tensor | None:
        return None if self.bias is None else self.bias(seq, seq)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        y = attention(
            q, k, v, rotate=self.rotate, positions=positions, bias=self._bias(s), causal=self.causal, scale=self.scale
        )
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class EncoderBlock(nn.Module):
    """Pre-norm block: ``x + attn(LN(x))``, then ``x + MLP(LN(x))`` (MLP width 4·d_model, GELU).

    ``causal=True`` makes it a decoder block (each token attends to itself and earlier tokens only).
    """

    attn: MultiHeadSelfAttention

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        rotate: Rotate | None = None,
        *,
        bias: Bias | None = None,
        causal: bool = False,
        scale: float | None = None,
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, n_heads, rotate, bias=bias, causal=causal, scale=scale)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), positions)
        return x + self.mlp(self.norm2(x))


class Blocks(nn.ModuleList):
    """The model's blocks in order: an ``nn.ModuleList`` whose items are typed as :class:`EncoderBlock`."""

    def __iter__(self) -> Iterator[EncoderBlock]:
        return cast(Iterator[EncoderBlock], super().__iter__())

    def __getitem__(self, index: int) -> EncoderBlock:  # type: ignore[override]
        return cast(EncoderBlock, super().__getitem__(index))


class ToyTransformer(nn.Module):
    """Token ids ``[batch, seq]`` → logits: ``[batch, n_classes]`` if ``pooled`` (mean over positions),
    else ``[batch, seq, n_classes]``.

    ``scheme`` is one of :func:`available_schemes`. ``max_len`` is the learned table's
    length (the other schemes exist at every position) and the T5 bias's ``max_distance``
    (offsets from ``max_len`` on share its last bucket). ``num_buckets`` is the T5 bias's
    bucket count (split by sign unless ``causal``). ``causal=True`` masks future keys in
    every layer: with ``scheme="none"`` that is a decoder with no positional encoding (NoPE).
    The T5 bias module is one table shared by all layers, as in T5, and its scores are unscaled
    (``q kᵀ + b``, as ``T5Attention`` computes them): the query projection's initial weights and
    bias are divided by ``√head_dim`` instead, so the untrained model computes what scaled
    attention would. ALiBi has no parameters.
    """

    def __init__(
        self,
        vocab_size: int,
        n_classes: int,
        *,
        scheme: str = "none",
        d_model: int = 32,
        n_heads: int = 2,
        n_layers: int = 2,
        max_len: int = 16,
        pooled: bool = False,
        causal: bool = False,
        num_buckets: int = 8,
        rope_base: float = 10000.0,
        rope_scaling: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.n_classes = check_int("n_classes", n_classes, minimum=2)
        self.scheme = check_choice("scheme", scheme, SCHEMES)
        self.d_model = check_d_model(d_model)
        n_layers, max_len = check_positive_int("n_layers", n_layers), check_positive_int("max_len", max_len)
        self.pooled, self.causal = check_bool("pooled", pooled), check_bool("causal", causal)
        self._refuse_absurd_sizes(n_layers, max_len)
        if scheme != "rotary" and (rope_base != 10000.0 or rope_scaling is not None):
            raise ValueError(f"rope_base and rope_scaling need scheme='rotary', this model uses {scheme!r}")
        self.embed = nn.Embedding(self.vocab_size, self.d_model)
        self.position: nn.Module | None = None
        self.relative: nn.Module | None = None
        rotate = None
        if scheme == "sinusoidal":
            self.position = SinusoidalPositionalEncoding(self.d_model, max_len=max_len)
        elif scheme == "rotary":
            rotate = _rope_rotate(self.d_model // check_positive_int("n_heads", n_heads), rope_base, rope_scaling)
        elif scheme == "alibi":
            self.relative = ALiBiBias(n_heads)
        elif scheme == "t5":
            self.relative = RelativePositionBias(
                n_heads,
                num_buckets=num_buckets,
                max_distance=max_len,
                bidirectional=not causal,
            )
        scale = 1.0 if scheme == "t5" else None  # T5: unscaled scores
        self.blocks = Blocks(
            EncoderBlock(self.d_model, n_heads, rotate, bias=self.relative, causal=causal, scale=scale)
            for _ in range(n_layers)
        )
        if scheme == "t5":  # fold 1/√head_dim into the initial query projection (rows 0 … d_model-1 of qkv)
            with torch.no_grad():
                for block in self.blocks:
                    block.attn.qkv.weight[: self.d_model] /= math.sqrt(block.attn.head_dim)
                    block.attn.qkv.bias[: self.d_model] /= math.sqrt(block.attn.head_dim)
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.n_classes)
        if scheme == "learned":  # drawn last: every other weight is the one the other schemes get from the same seed
            self.position = LearnedPositionalEmbedding(max_len, self.d_model)

    def _refuse_absurd_sizes(self, n_layers: int, max_len: int) -> None:
        """Refuse, before allocating anything, float32 parameters past the memory limit."""
        d = self.d_model
        check_fits("vocab_size", [self.vocab_size, d], torch.float32, what="the token embedding")
        check_fits("n_classes", [self.n_classes, d], torch.float32, what="the output layer")
        check_fits("d_model", [4 * d, d], torch.float32, what="each MLP weight")
        check_fits("n_layers", [n_layers, 12 * d, d], torch.float32, what="the blocks' parameters")
        if self.scheme in ("sinusoidal", "learned"):
            check_fits("max_len", [max_len, d], torch.float32, what="the position table")

    def _check_tokens(self, tokens: object) -> torch.Tensor:
        tokens = check_tensor("tokens", tokens)
        if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise TypeError(f"tokens must hold integer token ids, got dtype {tokens.dtype}")
        if tokens.dim() != 2 or tokens.shape[1] == 0:
            raise ValueError(f"tokens must have shape [batch, seq] with seq >= 1, got {list(tokens.shape)}")
        if tokens.device.type == "meta" and _device_of(self).type != "meta":  # a meta model: shapes only, fine
            raise ValueError(
                "tokens are on the meta device (a shape without values): make them on the model's device, "
                f"{_device_of(self)}"
            )
        self.check_activations("tokens", tokens.shape[0], tokens.shape[1])
        if tokens.numel() and tokens.device.type != "meta" and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"tokens must be ids in 0 … {self.vocab_size - 1} (vocab_size={self.vocab_size}), "
                f"got values in {int(tokens.min())} … {int(tokens.max())}"
            )
        return tokens

    def check_activations(self, name: str, batch: int, seq: int) -> None:
        """Refuse, before a forward pass allocates it, any activation past the memory limit: the
        attention scores ``[batch, heads, seq, seq]``, a relative bias and its int64 distances
        ``[heads, seq, seq]``, the MLP's hidden ``[batch, seq, 4·d_model]``, the logits."""
        heads = self.blocks[0].attn.n_heads
        d = self.d_model
        check_fits(name, [batch, heads, seq, seq], torch.float32, what="one layer's attention scores")
        check_fits(name, [batch, seq, 4 * d], torch.float32, what="one layer's MLP activations")
        check_fits(name, [batch, seq, self.n_classes], torch.float32, what="the logits")
        if self.relative is not None:
            check_fits(name, [seq, seq], torch.int64, what="the relative distances")

    def _embed(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens.long())
        return x if self.position is None else self.position(x)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._logits(self._check_tokens(tokens))

    def _logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """``forward`` without the token checks (they read values, which ``torch.func.vmap`` cannot)."""
        x = self._embed(tokens)
        positions = torch.arange(tokens.shape[1], device=x.device)
        for block in self.blocks:
            x = block(x, positions)
        logits = self.head(self.norm(x))
        return logits.mean(dim=1) if self.pooled else logits

    @torch.no_grad()
    def attention_weights(self, tokens: torch.Tensor) -> torch.Tensor:
        """Every layer's attention weights for ``tokens``: ``[n_layers, batch, heads, seq, seq]``
        (rows: queries, columns: keys; each row sums to 1)."""
        tokens = self._check_tokens(tokens)
        x = self._embed(tokens)
        positions = torch.arange(tokens.shape[1], device=x.device)
        weights = []
        for block in self.blocks:
            weights.append(block.attn.weights(block.norm1(x), positions))
            x = block(x, positions)
        return torch.stack(weights)

    @torch.no_grad()
    def hidden_states(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream ``[n_layers + 1, batch, seq, d_model]``: after the embedding (and any
        added position vectors), then after each block (what a linear probe reads)."""
        tokens = self._check_tokens(tokens)
        x = self._embed(tokens)
        positions = torch.arange(tokens.shape[1], device=x.device)
        states = [x]
        for block in self.blocks:
            x = block(x, positions)
            states.append(x)
        return torch.stack(states)

    def without_heads(self, heads: Iterable[tuple[int, int]]) -> ToyTransformer:
        """A copy with the attention heads ``(layer, head)`` ablated: their outputs are zeroed (the columns
        of the output projection that read them), so the rest of the model no longer receives them."""
        twin = copy.deepcopy(self)
        with torch.no_grad():
            for pair in heads:
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise ValueError(f"heads must be (layer, head) pairs, got {pair!r}")
                layer = check_int("layer", pair[0], minimum=0)
                head = check_int("head", pair[1], minimum=0)
                if layer >= len(self.blocks):
                    raise ValueError(f"layer must be below n_layers={len(self.blocks)}, got {layer}")
                attn = twin.blocks[layer].attn
                if head >= attn.n_heads:
                    raise ValueError(f"head must be below n_heads={attn.n_heads}, got {head}")
                attn.out.weight[:, head * attn.head_dim : (head + 1) * attn.head_dim] = 0
        return twin

    def with_longer_table(self, max_len: int, *, seed: int = 0) -> ToyTransformer:
        """A copy whose learned table has ``max_len`` rows; the new rows are untrained ``N(0, 0.02²)`` draws."""
        if self.scheme != "learned":
            raise ValueError(f"with_longer_table needs scheme='learned', this model uses {self.scheme!r}")
        assert isinstance(self.position, LearnedPositionalEmbedding)
        seed = check_seed(seed)
        twin = copy.deepcopy(self)
        twin.position = self.position.extended(max_len, generator=torch.Generator().manual_seed(seed))
        return twin

    def with_rope(self, *, base: float | None = None, scaling: Mapping[str, object] | None = None) -> ToyTransformer:
        """A copy that rotates q and k with ``base`` (default: this model's) and the context-extension
        rule ``scaling`` (:func:`~pe_lessons.rotary.scaled_frequencies`; ``None``: plain RoPE) in every
        rotary layer (NoPE layers, see :func:`with_nope_layers`, stay as they are).

        The weights are the same: this is how a trained model is read at a longer length with a rule
        (zero-shot, or before a fine-tune of the copy)."""
        if self.scheme != "rotary":
            raise ValueError(f"with_rope needs scheme='rotary', this model uses {self.scheme!r}")
        rope = self.rope
        old_base = 10000.0 if rope is None else rope.base
        rotate = _rope_rotate(self.blocks[0].attn.head_dim, old_base if base is None else base, scaling)
        twin = copy.deepcopy(self)
        for block in twin.blocks:
            if block.attn.rotate is not None:
                block.attn.rotate = rotate
        return twin

    @property
    def rope(self) -> RopeRotate | None:
        """The rotary hook (its ``base`` and ``scaling``), or ``None`` when no layer rotates."""
        hooks = [block.attn.rotate for block in self.blocks if isinstance(block.attn.rotate, RopeRotate)]
        return hooks[0] if hooks else None

    def extra_repr(self) -> str:
        text = f"scheme={self.scheme!r}, pooled={self.pooled}, causal={self.causal}"
        rope = self.rope
        if rope is not None and (rope.base != 10000.0 or rope.scaling is not None):
            text += f", rope_base={rope.base:g}, rope_scaling={rope.scaling!r}"
        return text


# --------------------------------------------------------------------------- tasks


def _check_batch(batch_size: object, seq_len: object, minimum_seq: int) -> tuple[int, int]:
    batch_size = check_int("batch_size", batch_size, minimum=2)
    seq_len = check_int("seq_len", seq_len, minimum=minimum_seq)
    check_fits("batch_size × seq_len", [batch_size, seq_len], torch.int64, what="the batch of token ids")
    return batch_size, seq_len


@dataclass(frozen=True)
class OrderTask:
    """Which of the two markers A, B comes first? Label 0: A first; 1: B first.

    Tokens ``0 … n_symbols-1`` are fillers, ``n_symbols`` is A, ``n_symbols+1`` is B.
    A batch holds ``batch_size // 2`` random sequences followed by their twins with A
    and B swapped (so labels are exactly balanced).
    """

    n_symbols: int = 8
    name = "order"
    pooled = True

    def __post_init__(self) -> None:
        check_int("n_symbols", self.n_symbols, minimum=1)

    @property
    def vocab_size(self) -> int:
        return self.n_symbols + 2

    @property
    def n_classes(self) -> int:
        return 2

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``tokens [batch_size, seq_len]`` (int64) and ``labels [batch_size]``; ``batch_size`` even, ``seq_len ≥ 2``."""
        batch_size, seq_len = _check_batch(batch_size, seq_len, 2)
        if batch_size % 2:
            raise ValueError(f"batch_size must be even (sequences come with their swapped twins), got {batch_size}")
        half = batch_size // 2
        tokens = torch.randint(0, self.n_symbols, (half, seq_len), generator=generator)
        places = torch.rand(half, seq_len, generator=generator).argsort(dim=1)[:, :2]  # two distinct positions
        a, b = places[:, 0], places[:, 1]
        rows = torch.arange(half)
        tokens[rows, a], tokens[rows, b] = self.n_symbols, self.n_symbols + 1
        twins = tokens.clone()
        twins[rows, a], twins[rows, b] = self.n_symbols + 1, self.n_symbols
        labels = (b < a).long()  # 1 when B comes first
        return torch.cat([tokens, twins]), torch.cat([labels, 1 - labels])


@dataclass(frozen=True)
class LagTask:
    """At every position ``pos ≥ lag``, output the token ``lag`` places back (earlier positions are not scored).

    Made for causal models (the answer is always among the tokens a query may see) and for
    length studies: the rule is the same at every position, so a model that learned it
    *relatively* is right at any length, and one that tied it to absolute positions is not.
    ``lag=1`` is :class:`PreviousTokenTask`.
    """

    n_symbols: int = 8
    lag: int = 2
    name = "lag"
    pooled = False

    def __post_init__(self) -> None:
        check_int("n_symbols", self.n_symbols, minimum=2)
        check_int("lag", self.lag, minimum=1)

    @property
    def vocab_size(self) -> int:
        return self.n_symbols

    @property
    def n_classes(self) -> int:
        return self.n_symbols

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``tokens [batch_size, seq_len]`` and ``labels [batch_size, seq_len]`` (``-100`` before position ``lag``)."""
        batch_size, seq_len = _check_batch(batch_size, seq_len, self.lag + 1)
        tokens = torch.randint(0, self.n_symbols, (batch_size, seq_len), generator=generator)
        labels = torch.full_like(tokens, IGNORE)
        labels[:, self.lag :] = tokens[:, : -self.lag]
        return tokens, labels


@dataclass(frozen=True)
class PreviousTokenTask(LagTask):
    """The lag task with ``lag = 1``: at every position ``pos ≥ 1``, output the token at ``pos - 1``
    (position 0 is not scored)."""

    lag: int = field(default=1, init=False, repr=False)
    name = "previous"


Task = OrderTask | PreviousTokenTask | LagTask
TASKS: dict[str, type] = {"order": OrderTask, "previous": PreviousTokenTask, "lag": LagTask}


def make_task(name: str, **kwargs) -> Task:
    """``make_task("order")`` or ``make_task("previous", n_symbols=8)``."""
    return TASKS[check_choice("task", name, tuple(TASKS))](**kwargs)


def _check_task(task: object) -> Task:
    if not isinstance(task, (OrderTask, PreviousTokenTask, LagTask)):
        raise TypeError(
            f"task must be an OrderTask, PreviousTokenTask or LagTask (see make_task), got {type(task).__name__}"
        )
    return task


def make_model(task: Task, scheme: str, *, seed: int = 0, **kwargs) -> ToyTransformer:
    """A :class:`ToyTransformer` sized for ``task``, initialised from ``seed``.

    Torch's global RNG is restored afterwards. ``kwargs`` go to :class:`ToyTransformer`
    (``d_model``, ``n_heads``, ``n_layers``, ``max_len``).
    """
    task = _check_task(task)
    seed = check_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ToyTransformer(task.vocab_size, task.n_classes, scheme=scheme, pooled=task.pooled, **kwargs)


# --------------------------------------------------------------------------- training


@contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch on one CPU thread: reductions then add up in the same order whatever the
    machine's thread count (tiny models lose no speed), and the old setting comes back."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _loss_and_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, float]:
    logits, labels = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
    loss = F.cross_entropy(logits, labels, ignore_index=IGNORE)
    scored = labels != IGNORE
    accuracy = (logits.argmax(-1)[scored] == labels[scored]).float().mean().item()
    return loss, accuracy


def _device_of(model: nn.Module) -> torch.device:
    """Where the model's parameters live: batches are moved there."""
    return next(model.parameters()).device


def _check_model(model: object, task: Task) -> ToyTransformer:
    if not isinstance(model, ToyTransformer):
        raise TypeError(f"model must be a ToyTransformer (see make_model), got {type(model).__name__}")
    if model.vocab_size != task.vocab_size or model.n_classes != task.n_classes or model.pooled != task.pooled:
        raise ValueError(f"model does not fit the {task.name!r} task: build it with make_model(task, scheme)")
    return model


def train(
    model: ToyTransformer,
    task: Task,
    *,
    seq_len: int | tuple[int, int],
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
) -> pd.DataFrame:
    """Train ``model`` in place with AdamW on fresh batches; return one row per step.

    The learning rate falls linearly from ``lr`` (first step) to ``lr/steps`` (last step).
    ``seq_len`` is one length or an inclusive range ``(lo, hi)`` drawn per step.
    Data come from ``torch.Generator().manual_seed(seed)`` (on the CPU, so a run is the same on
    any device) and are moved to the model's device. The model trains in train mode and is left
    in the mode it came in with, also when a step raises. The frame has columns
    ``step`` (1 … steps), ``seq_len``, ``loss`` and ``accuracy`` of each training batch
    (measured before that step's update).
    """
    task = _check_task(task)
    model = _check_model(model, task)
    if isinstance(seq_len, (tuple, list)):
        if len(seq_len) != 2:
            raise ValueError(f"seq_len must be an int or a (lo, hi) pair, got {seq_len!r}")
        lo = check_int("seq_len[0]", seq_len[0], minimum=2)
        hi = check_int("seq_len[1]", seq_len[1], minimum=lo)
    else:
        lo = hi = check_int("seq_len", seq_len, minimum=2)
    steps = check_int("steps", steps, minimum=1)
    lr = check_real("lr", lr, above=0.0, below=1.0, hint="a learning rate")
    generator = torch.Generator().manual_seed(check_seed(seed))
    device = _device_of(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    # learning rate decays linearly from lr to lr/steps: the last steps settle instead of spiking
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0 - done / steps)
    was_training = model.training
    rows = []
    try:
        model.train()
        with _one_thread():
            for step in range(1, steps + 1):
                n = lo if lo == hi else int(torch.randint(lo, hi + 1, (1,), generator=generator))
                tokens, labels = task.sample(batch_size, n, generator)
                tokens, labels = tokens.to(device), labels.to(device)
                loss, accuracy = _loss_and_accuracy(model(tokens), labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                rows.append((step, n, loss.item(), accuracy))
    finally:
        model.train(was_training)  # the mode the model came in with, also when a step raises
    return pd.DataFrame(rows, columns=["step", "seq_len", "loss", "accuracy"])


def train_seeds(
    task: Task,
    scheme: str,
    seeds: Iterable[int],
    *,
    seq_len: int,
    steps: int = 200,
    batch_size: int = 32,
    lr: float = 3e-3,
    **model_kwargs: object,
) -> tuple[list[ToyTransformer], pd.DataFrame]:
    """Train one model per seed as one batch: ``make_model(task, scheme, seed=s, **model_kwargs)`` trained
    on the data of ``train(..., seed=s)``, all seeds in one vectorised step (``torch.func.vmap``).

    Each seed's model sees exactly the batches, learning rates and AdamW updates that :func:`train` would
    give it (AdamW is elementwise and the seeds' losses share no parameter, so the summed loss gives each
    model its own gradient); only the last bits differ (batched kernels add up in another order), which
    training amplifies a little. Costs about two thirds of the CPU time of training the seeds one by one.
    Returns the trained models (in the order of ``seeds``) and a frame like :func:`train`'s, with a
    ``seed`` column.
    """
    task = _check_task(task)
    seeds = [check_int("seed", s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct integers, at least one, got {seeds!r}")
    seq_len = check_int("seq_len", seq_len, minimum=2)
    steps = check_int("steps", steps, minimum=1)
    lr = check_real("lr", lr, above=0.0, below=1.0, hint="a learning rate")
    models = [make_model(task, scheme, seed=s, **model_kwargs) for s in seeds]
    template = copy.deepcopy(models[0]).to("meta")
    params = {name: nn.Parameter(value) for name, value in torch.func.stack_module_state(models)[0].items()}
    buffers = dict(models[0].named_buffers())  # fixed tables (ALiBi's slopes, sinusoids): the same for every seed

    # no token checks under vmap: they read values, which vmap cannot (sample() makes valid ids)
    template.forward = template._logits  # type: ignore[method-assign]
    batched = torch.func.vmap(
        lambda p, b, tokens: torch.func.functional_call(template, (p, b), (tokens,)), in_dims=(0, None, 0)
    )
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    optimizer = torch.optim.AdamW(params.values(), lr=float(lr))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda done: 1.0 - done / steps)
    rows: list[tuple[int, int, int, float, float]] = []
    with _one_thread():
        for step in range(1, steps + 1):
            samples = [task.sample(batch_size, seq_len, g) for g in generators]
            tokens = torch.stack([t for t, _ in samples])
            labels = torch.stack([y for _, y in samples])
            out = batched(params, buffers, tokens)
            losses, accuracies = zip(*(_loss_and_accuracy(out[i], labels[i]) for i in range(len(seeds))))
            optimizer.zero_grad(set_to_none=True)
            torch.stack(losses).sum().backward()
            optimizer.step()
            schedule.step()
            rows.extend((s, step, seq_len, loss.item(), acc) for s, loss, acc in zip(seeds, losses, accuracies))
    with torch.no_grad():
        for i, model in enumerate(models):
            for name, value in model.named_parameters():
                value.copy_(params[name][i])
    history = pd.DataFrame(rows, columns=["seed", "step", "seq_len", "loss", "accuracy"])
    return models, history


@torch.no_grad()
def evaluate(
    model: ToyTransformer,
    task: Task,
    *,
    seq_len: int,
    n: int = 512,
    seed: int = 1234,
    extend_learned: bool = False,
) -> dict[str, float]:
    """Loss and accuracy of ``model`` on ``n`` fresh sequences of length ``seq_len``.

    For a ``"learned"`` model and ``seq_len`` beyond its table: by default the table's
    ``ValueError``; with ``extend_learned=True`` a copy with untrained extra rows
    (:meth:`ToyTransformer.with_longer_table`) is evaluated instead.
    """
    task = _check_task(task)
    model = _check_model(model, task)
    seq_len = check_int("seq_len", seq_len, minimum=2)
    n = check_int("n", n, minimum=2)
    if isinstance(task, OrderTask) and n % 2:
        raise ValueError(f"n must be even for the order task (sequences come with their swapped twins), got {n}")
    extend_learned = check_bool("extend_learned", extend_learned)
    if extend_learned and isinstance(model.position, LearnedPositionalEmbedding) and seq_len > model.position.max_len:
        model = model.with_longer_table(seq_len, seed=seed)
    model.check_activations("n", n, seq_len)
    tokens, labels = task.sample(n, seq_len, torch.Generator().manual_seed(check_seed(seed)))
    device = _device_of(model)
    tokens, labels = tokens.to(device), labels.to(device)
    was_training = model.training
    try:
        model.eval()
        with _one_thread():
            loss, accuracy = _loss_and_accuracy(model(tokens), labels)
    finally:
        model.train(was_training)
    return {"loss": loss.item(), "accuracy": accuracy}


# --------------------------------------------------------------------------- layers without RoPE


def with_nope_layers(model: ToyTransformer, layers: Sequence[int]) -> ToyTransformer:
    """A copy of a ``"rotary"`` model whose attention in ``layers`` (0-based) rotates nothing: NoPE layers
    among RoPE layers, as Llama 4 and SmolLM3 interleave them (see :func:`pe_lessons.models.nope_layers`).

    The weights are copied unchanged (the rotation has no parameters), so a fresh model from
    :func:`make_model` with its NoPE layers set this way starts from the same initial weights as the
    all-RoPE model of the same seed.
    """
    if not isinstance(model, ToyTransformer):
        raise TypeError(f"model must be a ToyTransformer (see make_model), got {type(model).__name__}")
    if model.scheme != "rotary":
        raise ValueError(f"with_nope_layers needs a scheme='rotary' model, this one uses {model.scheme!r}")
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence):
        raise TypeError(f"layers must be a list of layer indices, got {type(layers).__name__}")
    n = len(model.blocks)
    chosen = set()
    for i in layers:
        i = check_int("layers item", i, minimum=0)
        if i >= n:
            raise ValueError(f"layers must be indices below the model's {n} layers, got {i}")
        chosen.add(i)
    twin = copy.deepcopy(model)
    for i in chosen:
        twin.blocks[i].attn.rotate = None
    return twin
