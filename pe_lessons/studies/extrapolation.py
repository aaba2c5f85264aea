r"""Notebook 09's study: which position scheme reads past its training length, and under which settings.

The toy (:mod:`pe_lessons.toy`: a causal model, 2 layers of 4 heads, ``d_model`` 32) learns a
**lag task** at length :data:`TRAIN_LEN` = 16: at every position, output the token ``lag`` places
back. Two tasks (:data:`TASKS`): **near** (lag 1) and **far** (lag 6, where ALiBi's steepest head,
slope 1/4, already scores the answer 1.5 below the query's own token). Every scheme of
:data:`SCHEMES` — NoPE, sinusoidal, rotary at three bases, ALiBi, T5 — is trained with the same
data, learning rate and model on each task for each budget of :data:`BUDGETS` (steps), five
seeds each (:data:`SEEDS`, trained as one batch by :func:`~pe_lessons.toy.train_seeds`), then
read on :data:`EVAL_N` fresh sequences at each length of :data:`LENGTHS` (1×, 2×, 4×, 8×).
Rotary also runs at the extra bases :data:`EXTRA_BASES` on the near task with the smaller budget
(the base sweep; rotary reaches the criterion in under 60 steps).

Every measurement is one row of the results frame, with columns

- ``measure``: ``accuracy`` (share of scored tokens right), ``noise`` (standard error of that
  accuracy over the evaluation sequences), ``steps_to_criterion`` (first step at which the mean
  training accuracy over the last :data:`WINDOW` steps reaches :data:`CRITERION`; empty if never),
  ``position_accuracy`` (at 8×, per block of :data:`POSITION_BLOCK` positions; ``position`` is the
  block's first position), ``collapse`` (at 8×: the first position ≥ 16 whose accuracy is below
  0.5; empty if none), and for the largest budget, per ``layer`` and ``head`` (on
  :data:`HEAD_EVAL_N` sequences):
  ``head_target_weight`` (mean attention on the answer's key, at 1×), ``head_far_weight``
  (at 4×, queries 32…63: the weight on keys 16 or more back, offsets never seen in training),
  ``bias_far_weight`` (the same from the head's position bias alone, queries and keys zero:
  ALiBi's slopes, T5's trained table, or uniform for schemes without a bias),
  ``head_ablated_accuracy`` (accuracy at 1× with that head's output zeroed) and
  ``layer_ablated_accuracy`` (all heads of ``layer`` zeroed; ``head`` empty);
- ``task``, ``steps``, ``scheme``, ``base`` (rotary only), ``seed``, ``length``, ``position``,
  ``layer``, ``head`` (empty where they do not apply) and ``value``.

:func:`run` recomputes it (about 15 minutes of one CPU core); ``python -m pe_lessons.studies
extrapolation`` writes the committed file. Training runs on one thread, so a run repeats bit for
bit on one machine; another CPU can move the last bits, which training amplifies a little.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd
import torch

from ..toy import LagTask, ToyTransformer, attention, train_seeds

__all__ = [
    "TRAIN_LEN",
    "LENGTHS",
    "SEEDS",
    "TASKS",
    "BUDGETS",
    "SCHEMES",
    "EXTRA_BASES",
    "MODEL",
    "Setting",
    "settings",
    "run_setting",
    "run",
]

TRAIN_LEN = 16
LENGTHS = (16, 32, 64, 128)
SEEDS = (0, 1, 2, 3, 4)
LR = 5e-3
BATCH = 32
#: task name → lag (how far back the answer sits)
TASKS = {"near": 1, "far": 6}
BUDGETS = (200, 800)
#: (scheme, rotary base or None)
SCHEMES = (
    ("none", None),
    ("sinusoidal", None),
    ("rotary", 1e4),
    ("rotary", 1e5),
    ("rotary", 1e6),
    ("alibi", None),
    ("t5", None),
)
EXTRA_BASES = (1e3, 3e3, 3e4, 3e5)
MODEL = dict(causal=True, d_model=32, n_heads=4, n_layers=2, max_len=TRAIN_LEN, num_buckets=8)
EVAL_N = 256
EVAL_SEED = 1234
HEAD_EVAL_N = 128  # sequences for the per-head measures (10 ablated forwards per model)
CRITERION = 0.95
WINDOW = 20
POSITION_BLOCK = 8
COLUMNS = ["measure", "task", "steps", "scheme", "base", "seed", "length", "position", "layer", "head", "value"]


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: a task, a training budget, a scheme (and rotary base)."""

    task: str
    steps: int
    scheme: str
    base: float | None = None

    @property
    def label(self) -> str:
        """``rotary 1e+05`` for rotary, else the scheme's name."""
        return self.scheme if self.base is None else f"{self.scheme} {self.base:.0e}"


def settings() -> list[Setting]:
    """Every setting of the sweep, in the order of the results file."""
    main = [Setting(task, steps, s, b) for task in TASKS for steps in BUDGETS for s, b in SCHEMES]
    return main + [Setting("near", min(BUDGETS), "rotary", b) for b in EXTRA_BASES]


def _task(name: str) -> LagTask:
    return LagTask(n_symbols=8, lag=TASKS[name])


def _model_kwargs(setting: Setting) -> dict:
    return {**MODEL, **({"rope_base": setting.base} if setting.base is not None else {})}


def train_setting(setting: Setting, seeds: Iterable[int] = SEEDS) -> tuple[list[ToyTransformer], pd.DataFrame]:
    """The trained models of ``setting`` (one per seed) and their training history."""
    return train_seeds(
        _task(setting.task),
        setting.scheme,
        seeds,
        seq_len=TRAIN_LEN,
        steps=setting.steps,
        batch_size=BATCH,
        lr=LR,
        **_model_kwargs(setting),
    )


def steps_to_criterion(accuracy: pd.Series) -> float:
    """First step at which the mean training accuracy of the last :data:`WINDOW` steps is ≥ :data:`CRITERION`."""
    reached = accuracy.rolling(WINDOW).mean().to_numpy() >= CRITERION
    return float(reached.argmax() + 1) if reached.any() else math.nan


def _far_weight(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight on keys ≥ TRAIN_LEN back, queries 2·TRAIN_LEN … end: ``[..., seq, seq]`` → ``[...]``."""
    seq = weights.shape[-1]
    far = torch.ones(seq, seq).tril(-TRAIN_LEN).bool()
    return (weights * far).sum(-1)[..., 2 * TRAIN_LEN :].mean(-1)


def _target_weight(weights: torch.Tensor, lag: int) -> torch.Tensor:
    """Mean weight on the key ``lag`` before each query (queries ≥ lag): ``[..., seq, seq]`` → ``[...]``."""
    q = torch.arange(lag, weights.shape[-1])
    return weights[..., q, q - lag].mean(-1)


def bias_only_weights(model: ToyTransformer, seq_len: int) -> torch.Tensor:
    """The attention weights ``[heads, seq, seq]`` a causal head of ``model`` would give from its position
    bias alone (queries and keys zero): ALiBi's or T5's bias, uniform over the visible keys otherwise."""
    heads = model.blocks[0].attn.n_heads
    zeros = torch.zeros(1, heads, seq_len, 1)
    eye = torch.eye(seq_len).expand(1, heads, seq_len, seq_len)
    with torch.no_grad():
        bias = None if model.relative is None else model.relative(seq_len, seq_len)
        return attention(zeros, zeros, eye, bias=bias, causal=True)[0]


def _accuracy(model: ToyTransformer, tokens: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token correctness ``[n, seq]`` (float, NaN where not scored) and the scored mask."""
    with torch.no_grad():
        right = (model(tokens).argmax(-1) == labels).float()
    scored = labels != -100
    return right.masked_fill(~scored, math.nan), scored


def measure(setting: Setting, models: list[ToyTransformer], history: pd.DataFrame, seeds: Iterable[int]) -> list:
    """The rows of the results frame for ``setting``'s trained ``models`` (one per seed of ``seeds``)."""
    task, lag = _task(setting.task), TASKS[setting.task]
    key = (setting.task, setting.steps, setting.scheme, setting.base)
    rows = []

    def add(
        measure_: str, seed: int, value: float | torch.Tensor, length=None, position=None, layer=None, head=None
    ) -> None:
        value = float(value)
        rows.append((measure_, *key, seed, length, position, layer, head, None if math.isnan(value) else value))

    data = {n: task.sample(EVAL_N, n, torch.Generator().manual_seed(EVAL_SEED)) for n in LENGTHS}
    longest = max(LENGTHS)
    for seed, model in zip(seeds, models):
        model.eval()
        add("steps_to_criterion", seed, steps_to_criterion(history.loc[history["seed"] == seed, "accuracy"]))
        for n, (tokens, labels) in data.items():
            right, scored = _accuracy(model, tokens, labels)
            add("accuracy", seed, right.nansum() / scored.sum(), length=n)
            per_sequence = right.nanmean(-1)
            add("noise", seed, per_sequence.std() / math.sqrt(EVAL_N), length=n)
            if n == longest:
                per_position = right.nanmean(0)  # [seq]; NaN before position lag
                below = (per_position[TRAIN_LEN:] < 0.5).nonzero()
                add("collapse", seed, TRAIN_LEN + below[0, 0].item() if len(below) else math.nan, length=n)
                for start in range(0, n, POSITION_BLOCK):
                    block = per_position[max(start, lag) : start + POSITION_BLOCK]
                    add("position_accuracy", seed, block.mean(), length=n, position=start)
        if setting.steps != max(BUDGETS) or setting not in _main_settings():
            continue
        tokens16, labels16 = (t[:HEAD_EVAL_N] for t in data[TRAIN_LEN])
        w16 = model.attention_weights(tokens16).mean(1)  # [layers, heads, q, k]
        w64 = model.attention_weights(data[4 * TRAIN_LEN][0]).mean(1)
        target, far = _target_weight(w16, lag), _far_weight(w64)
        bias_far = _far_weight(bias_only_weights(model, 4 * TRAIN_LEN))  # [heads]: the bias is shared by layers
        layers, heads = target.shape
        for layer in range(layers):
            for head in range(heads):
                hk = dict(layer=layer, head=head)
                add("head_target_weight", seed, target[layer, head], length=TRAIN_LEN, **hk)
                add("head_far_weight", seed, far[layer, head], length=4 * TRAIN_LEN, **hk)
                add("bias_far_weight", seed, bias_far[head], length=4 * TRAIN_LEN, **hk)
                right, scored = _accuracy(model.without_heads([(layer, head)]), tokens16, labels16)
                add("head_ablated_accuracy", seed, right.nansum() / scored.sum(), length=TRAIN_LEN, **hk)
            right, scored = _accuracy(model.without_heads([(layer, h) for h in range(heads)]), tokens16, labels16)
            add("layer_ablated_accuracy", seed, right.nansum() / scored.sum(), length=TRAIN_LEN, layer=layer)
    return rows


def _main_settings() -> set[Setting]:
    return {Setting(task, steps, s, b) for task in TASKS for steps in BUDGETS for s, b in SCHEMES}


def run_setting(setting: Setting, seeds: Iterable[int] = SEEDS) -> pd.DataFrame:
    """Train and measure one setting (all ``seeds``): its rows of the results frame."""
    seeds = list(seeds)
    models, history = train_setting(setting, seeds)
    return _frame(measure(setting, models, history, seeds))


def _frame(rows: list) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = frame["value"].astype(float).round(4)
    return frame


def run(only: Iterable[Setting] | None = None, *, progress: bool = False) -> pd.DataFrame:
    """The whole sweep (or the settings ``only``), as the results frame."""
    frames = []
    for i, setting in enumerate(settings() if only is None else only):
        frames.append(run_setting(setting))
        if progress:
            print(f"[{i + 1}] {setting.task} {setting.steps} steps {setting.label}", flush=True)
    return pd.concat(frames, ignore_index=True)
