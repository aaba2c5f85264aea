r"""Notebook 10's study: a toy RoPE model trained on length ``L`` and read at ``2L`` and ``4L``.

The toy (:mod:`pe_lessons.toy`, ``scheme="rotary"``, heads of width 16) learns the order task on
lengths 8…16 (``L = 16``), then is read at 16, 32 and 64 positions with each context-extension
rule of :func:`rules`, set for ``s = 4``:

- **zero-shot** (the trained weights, the rule switched on): accuracy on :data:`EVAL_N` fresh
  sequences per length, and the mean entropy of the attention weights;
- **fine-tuned**: the same after :data:`FINE_TUNE` (20 steps at ``4L`` with the rule in place),
  read again at every length, in range included;
- **base sweep**: the same model trained with each base of :data:`BASES`, read zero-shot with no
  rule and with PI, and after the fine-tune with no rule (long-context training at that base).

Besides, for every seed, how far the first layer's attention logits leave the range they take at
trained distances (:func:`logit_excess`): at distances up to ``4L`` read plainly (extrapolation)
and read with PI (interpolation).

Every measurement is one row of the results frame: ``experiment`` (zero-shot, fine-tuned, logit
excess), ``base``, ``rule``, ``seed``, ``length``, ``accuracy``, ``entropy`` (zero-shot only) and
``excess`` (logit excess only); the columns a row does not measure are empty.
:func:`run` recomputes it; ``python -m pe_lessons.studies context`` writes the committed file.
Training runs on one thread (see :mod:`pe_lessons.toy`), so a run repeats bit for bit on one
machine; another CPU can move an accuracy by a few sequences.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import torch

from ..rotary import apply_rope, rope_frequencies
from ..toy import ToyTransformer, evaluate, make_model, make_task, train

__all__ = [
    "TRAINED_LEN",
    "FACTOR",
    "HEAD_DIM",
    "SEEDS",
    "LENGTHS",
    "BASES",
    "EVAL_N",
    "TRAIN",
    "FINE_TUNE",
    "TEMPERATURE",
    "FINE_TUNED_RULES",
    "per_pair",
    "rules",
    "attention_entropy",
    "logit_excess",
    "trained_model",
    "measure",
    "run",
]

TRAINED_LEN = 16  #: L: the toy trains on lengths 8 … 16
FACTOR = 4  #: s: every rule is set for 4L
HEAD_DIM = 16  #: d_model 32, 2 heads
BASE = 10000.0
SEEDS = (0, 1, 2, 3, 4)
LENGTHS = (16, 32, 64)
BASES = (1e2, 1e3, 1e4, 1e5, 1e6)
EVAL_N = 1024  #: sequences per accuracy: its standard error is at most 0.5/√1024 ≈ 0.016 (0.011 at 0.85)
ENTROPY_N = 256  #: sequences per attention entropy
TRAIN: dict[str, Any] = {"seq_len": (8, TRAINED_LEN), "steps": 200}
FINE_TUNE: dict[str, Any] = {"seq_len": FACTOR * TRAINED_LEN, "steps": 20, "batch_size": 16, "lr": 1e-3}
TEMPERATURE = 0.1 * math.log(FACTOR) + 1  #: YaRN's factor on cos and sin for s = 4
FINE_TUNED_RULES = ("none", "PI", "NTK", "YaRN", "ABF")


def per_pair(divisors: Iterable[float], temperature: float = 1.0) -> dict:
    """A rule that divides pair ``i``'s frequency by ``divisors[i]`` and multiplies cos and sin by ``temperature``.

    Written as a LongRoPE rule (one divisor per pair, the same short and long ones): the general
    form of every rule here, so any set of pairs can be interpolated alone.
    """
    factors = [float(f) for f in divisors]
    return {
        "rope_type": "longrope",
        "short_factor": factors,
        "long_factor": factors,
        "original_max_position_embeddings": TRAINED_LEN,
        "factor": float(FACTOR),  # (LongRoPE's context ratio: unused when attention_factor is given)
        "attention_factor": float(temperature),
    }


def rules(base: float = BASE) -> dict[str, dict]:
    """The rules of the study, each as keyword arguments of :meth:`ToyTransformer.with_rope`.

    ``none``; ``PI``; ``NTK`` (base ``base·s^{d/(d-2)}``); ``dynamic NTK`` (Hugging Face's, factor
    s); ``YaRN`` (with its temperature); ``ABF`` (base raised to 10⁶, Xiong et al.); the
    temperature switched on for PI and NTK and off for YaRN; and the interventions: interpolate
    (divide by s) only pair 0, only the critical pair ``c`` (the first that never completes a turn
    in training), only the pairs after it, or every pair from ``c`` on.
    """
    n = HEAD_DIM // 2
    theta = rope_frequencies(HEAD_DIM, base)
    ntk_base = base * FACTOR ** (HEAD_DIM / (HEAD_DIM - 2))
    ntk = (theta / rope_frequencies(HEAD_DIM, ntk_base)).tolist()
    critical = int((TRAINED_LEN * theta / (2 * math.pi) < 1).nonzero()[0])
    yarn = {"rope_type": "yarn", "factor": float(FACTOR), "original_max_position_embeddings": TRAINED_LEN}

    def only(pairs: range) -> dict:
        return {"scaling": per_pair(FACTOR if i in pairs else 1.0 for i in range(n))}

    return {
        "none": {},
        "PI": {"scaling": {"rope_type": "linear", "factor": float(FACTOR)}},
        "NTK": {"base": ntk_base},
        "dynamic NTK": {
            "scaling": {
                "rope_type": "dynamic",
                "factor": float(FACTOR),
                "original_max_position_embeddings": TRAINED_LEN,
            }
        },
        "YaRN": {"scaling": yarn},
        "ABF": {"base": 1e6},
        "PI + temperature": {"scaling": per_pair([FACTOR] * n, TEMPERATURE)},
        "NTK + temperature": {"scaling": per_pair(ntk, TEMPERATURE)},
        "YaRN − temperature": {"scaling": {**yarn, "attention_factor": 1.0}},
        "pair 0 only": only(range(0, 1)),
        f"pair {critical} only": only(range(critical, critical + 1)),
        f"pairs {critical + 1}–{n - 1}": only(range(critical + 1, n)),
        f"pairs {critical}–{n - 1}": only(range(critical, n)),
    }


@torch.no_grad()
def attention_entropy(model: ToyTransformer, task, length: int, *, n: int = ENTROPY_N, seed: int = 999) -> float:
    """Mean entropy (nats) of the attention weights of every query, head and layer, on ``n`` sequences."""
    tokens, _ = task.sample(n, length, torch.Generator().manual_seed(seed))
    weights = model.attention_weights(tokens)
    return float(-(weights * weights.clamp_min(1e-30).log()).sum(-1).mean())


@torch.no_grad()
def first_layer_logits(model: ToyTransformer, distances: torch.Tensor) -> torch.Tensor:
    """The first layer's attention logit of every (query token, key token) pair at each relative distance.

    The query and key vectors of each token (embedding, LayerNorm, projection; as at the input of
    the first layer) are rotated as if the query sat ``distance`` positions after the key, with
    the model's own rule. Returns ``[heads, vocab, vocab, len(distances)]`` (float64).
    """
    block = model.blocks[0]
    heads, width = block.attn.n_heads, block.attn.head_dim
    vocab = model.vocab_size
    q, k, _ = block.attn.qkv(block.norm1(model.embed.weight)).double().view(vocab, 3, heads, width).unbind(1)
    rope = model.rope
    assert rope is not None, "a rotary model has a rotary hook"
    turned = apply_rope(
        q.transpose(0, 1)[:, :, None, :].expand(heads, vocab, len(distances), width).contiguous(),
        distances.double(),
        base=rope.base,
        scaling=rope.scaling,
    )
    key = apply_rope(k.transpose(0, 1)[:, :, None, :], [0], base=rope.base, scaling=rope.scaling)[:, :, 0]
    return torch.einsum("hadf,hbf->habd", turned, key) / math.sqrt(width)


def logit_excess(model: ToyTransformer, *, factor: int = FACTOR) -> dict[str, float]:
    """How far the first layer's logits leave, at distances ``L ≤ |Δ| < factor·L``, the range they take
    at the trained distances ``|Δ| < L`` (per token pair and head; mean over them).

    ``"extrapolation"`` reads the far distances as they are; ``"interpolation"`` reads them divided by
    ``factor`` (PI), which puts them between trained distances.
    """
    near = torch.arange(-(TRAINED_LEN - 1), TRAINED_LEN, dtype=torch.float64)
    far = torch.cat(
        [torch.arange(-(factor * TRAINED_LEN - 1), -TRAINED_LEN + 1), torch.arange(TRAINED_LEN, factor * TRAINED_LEN)]
    ).double()
    inside = first_layer_logits(model, near)
    low, high = inside.min(-1).values, inside.max(-1).values
    out = {}
    for name, distances in (("extrapolation", far), ("interpolation", far / factor)):
        v = first_layer_logits(model, distances)
        out[name] = float(torch.maximum(v.max(-1).values - high, low - v.min(-1).values).clamp(min=0).mean())
    return out


def trained_model(seed: int, base: float = BASE) -> ToyTransformer:
    """The toy rotary model of the study, trained on the order task with :data:`TRAIN`."""
    task = make_task("order")
    model = make_model(task, "rotary", seed=seed, rope_base=base)
    train(model, task, **TRAIN, seed=seed)
    return model


def measure(
    model: ToyTransformer,
    *,
    seed: int,
    base: float,
    names: Iterable[str],
    lengths: Iterable[int] = LENGTHS,
    fine_tuned: Iterable[str] = (),
    entropy: bool = True,
    n: int = EVAL_N,
) -> list[dict]:
    """Rows for one trained model: each rule of ``names`` zero-shot, each of ``fine_tuned`` after the fine-tune."""
    task = make_task("order")
    table: Mapping[str, dict] = rules(base)
    lengths = tuple(lengths)
    rows = []
    for name in names:
        reader = model.with_rope(**table[name])
        for length in lengths:
            row = {"experiment": "zero-shot", "base": base, "rule": name, "seed": seed, "length": length}
            row["accuracy"] = evaluate(reader, task, seq_len=length, n=n)["accuracy"]
            row["entropy"] = attention_entropy(reader, task, length) if entropy else float("nan")
            rows.append(row)
    for name in fine_tuned:
        tuned = model.with_rope(**table[name])
        train(tuned, task, **FINE_TUNE, seed=100 + seed)
        for length in lengths:
            acc = evaluate(tuned, task, seq_len=length, n=n)["accuracy"]
            rows.append(
                {
                    "experiment": "fine-tuned",
                    "base": base,
                    "rule": name,
                    "seed": seed,
                    "length": length,
                    "accuracy": acc,
                }
            )
    return rows


def run(seeds: Iterable[int] = SEEDS, bases: Iterable[float] = BASES) -> pd.DataFrame:
    """The whole study (a few CPU minutes): every rule at base 10 000, and the base sweep."""
    rows = []
    for seed in seeds:
        for base in bases:
            print(f"seed {seed}, base {base:g}", file=sys.stderr, flush=True)
            model = trained_model(seed, base)
            if base == BASE:
                rows += measure(model, seed=seed, base=base, names=rules(base), fine_tuned=FINE_TUNED_RULES)
                for reading, excess in logit_excess(model).items():
                    rows.append(
                        {"experiment": "logit excess", "base": base, "rule": reading, "seed": seed, "excess": excess}
                    )
            else:
                rows += measure(
                    model, seed=seed, base=base, names=("none", "PI"), lengths=(16, 64), fine_tuned=("none",)
                )
    frame = pd.DataFrame(rows)
    frame["accuracy"] = frame["accuracy"].round(6)
    frame["entropy"] = frame["entropy"].round(4)
    frame["excess"] = frame["excess"].round(4)
    return frame
