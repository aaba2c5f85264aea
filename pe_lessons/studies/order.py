r"""Notebooks 06 and 07's study: the order task with ten seeds per model, in range and beyond.

The toy (:mod:`pe_lessons.toy`: an encoder of 2 layers, 2 heads, ``d_model`` 32, mean pooling) learns
the **order task** (two markers A and B among filler tokens: which comes first?) on lengths
:data:`TRAIN_LENGTHS` for :data:`STEPS` steps of AdamW, exactly as notebook 06 trains it (``train(model,
task, seq_len=(8, 12), steps=300, seed=seed)``), for every model of :data:`MODELS` and every seed of
:data:`SEEDS`. Seed 0 is the run the notebooks train live. The models:

- ``sinusoidal``, ``learned``, ``rotary``: ``make_model(task, scheme, max_len=12, seed=seed)`` (the
  learned table is drawn after every other weight, so all schemes share the other weights of a seed);
- ``rotary, base 1e6``: rotary with base 10⁶ instead of 10 000 (the base intervention of notebook 07);
- ``learned, sized start``: the learned model with its table started as random rows of the sinusoids'
  row norm, ``N(0, 1/2)`` drawn from seed ``100 + seed`` (rows of norm about 4, like a sinusoidal row);
- ``learned, spread start``: the same with ``N(0, 1/10)``: rows of norm about 1.8, the norm of the
  sinusoidal rows once their shared mean is removed (how far apart the positions are);
- ``learned, sinusoid start``: the learned model with its table started *as* the sinusoids;
- ``learned, matched start``: the sinusoids' mean row plus ``N(0, 1/10)`` (seed ``100 + seed``): the
  sinusoids' size in every respect (row norm about 4, spread about 1.8, the same shared offset), no order;
- ``learned, shuffled sinusoids``: the sinusoids' very rows, in a random order (``randperm`` of seed
  ``100 + seed``): their size and their vectors, not their order.

Every measurement is one row of the results frame, with columns ``measure``, ``model``, ``seed``,
``length``, ``position`` (empty where they do not apply) and ``value``. The measures:

- ``steps_to_90``: first training step at which the mean training accuracy of the last 10 steps is ≥ 0.9;
- ``accuracy`` at each length of :data:`LENGTHS` (``evaluate``: :data:`EVAL_N` sequences of seed
  :data:`EVAL_SEED`; a learned table gets untrained extra rows beyond 12, ``extend_learned=True``);
- at length 16, on the same sequences: ``accuracy_inside`` (both markers at positions 0 … 11) and
  ``accuracy_beyond`` (a marker at 12 … 15);
- ``beyond_by_other`` (sinusoidal, learned, rotary): on :data:`PROBE_N` length-16 sequences of seed
  :data:`PROBE_SEED`, those with exactly one marker at 12 … 15, the accuracy by the other marker's
  ``position`` (0 … 11);
- learned only, on those same sequences: ``beyond_probe`` (untrained extra rows, as above),
  ``beyond_zero_rows`` (extra rows set to zero) and ``beyond_copied_row`` (every extra row a copy of
  trained row ``position``, 0 or 11);
- ``padded_accuracy`` at 24 and 48: a length-12 task sequence followed by filler tokens only, so both
  markers sit at trained positions;
- sinusoidal, rotary and ``rotary, base 1e6``: ``offset_band_accuracy``: on :data:`OFFSET_N` length-48
  sequences of seed :data:`PROBE_SEED`, the accuracy by the markers' offset, in bands of 3 offsets
  ``position`` … ``position + 2`` (:data:`OFFSET_BANDS`: 1, 4, …, 46; the last band holds 46–47 only);
- sinusoidal and rotary: ``window_accuracy`` and ``window_confidence`` (mean largest softmax probability)
  on length-48 sequences of fillers holding one length-12 task sequence at positions ``position`` …
  ``position + 11`` (:data:`WINDOW_STARTS`); ``offset_seen`` / ``offset_unseen``: accuracy at 48 on the
  ``evaluate`` sequences whose markers are at most / more than 11 apart;
- learned only, the trained table: ``table_share`` (share of the centred rows' spread along their main
  direction), ``table_order`` (|correlation| of the rows' coordinate along it with ``pos``),
  ``table_zero_position`` (where the zero vector falls along that direction, as a fractional position
  interpolated between the two rows around it),
  ``table_cosine`` (mean cosine of rows ``position`` apart) and ``table_moved`` (‖trained − initial‖ /
  ‖initial‖).

:func:`run` recomputes it (about five minutes of one CPU core); ``python -m pe_lessons.studies order``
writes the committed file. Training runs on one thread, so a run repeats bit for bit on one machine;
another CPU can move the last bits, which training amplifies a little.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd
import torch

from ..learned import LearnedPositionalEmbedding
from ..sinusoidal import sinusoidal_table
from ..toy import OrderTask, ToyTransformer, _one_thread, evaluate, make_model, train

__all__ = [
    "MAX_LEN",
    "TRAIN_LENGTHS",
    "STEPS",
    "SEEDS",
    "MODELS",
    "LENGTHS",
    "WINDOW_STARTS",
    "COLUMNS",
    "task",
    "make",
    "steps_to",
    "marker_positions",
    "padded_sample",
    "window_sample",
    "measure",
    "run_model",
    "run",
]

MAX_LEN = 12
TRAIN_LENGTHS = (8, 12)
STEPS = 300
SEEDS = tuple(range(10))
#: the models of the study (see the module's docstring)
MODELS = (
    "sinusoidal",
    "learned",
    "learned, sized start",
    "learned, spread start",
    "learned, sinusoid start",
    "learned, matched start",
    "learned, shuffled sinusoids",
    "rotary",
    "rotary, base 1e6",
)
#: the offsets between the two markers, in bands: each band's first offset (the last band ends at 47)
OFFSET_BANDS = tuple(range(1, 47, 3))
LENGTHS = (8, 10, 12, 16, 24, 48)
WINDOW_STARTS = (0, 12, 24, 36)
EVAL_N, EVAL_SEED = 512, 1234  # evaluate's defaults
PROBE_N, PROBE_SEED = 4096, 99
OFFSET_N = 8192
COLUMNS = ["measure", "model", "seed", "length", "position", "value"]


def task() -> OrderTask:
    """The order task of notebooks 06 and 07 (8 filler symbols)."""
    return OrderTask()


def _table(model: ToyTransformer) -> torch.Tensor:
    """The learned position table (a parameter) of a ``"learned"`` model."""
    assert isinstance(model.position, LearnedPositionalEmbedding)
    return model.position.weight


def make(model: str, seed: int) -> ToyTransformer:
    """The untrained model ``model`` (one of :data:`MODELS`) of ``seed``."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(map(repr, MODELS))}; got {model!r}")
    scheme = model.split(",")[0]
    kwargs = {"rope_base": 1e6} if model == "rotary, base 1e6" else {}
    net = make_model(task(), scheme, max_len=MAX_LEN, seed=seed, **kwargs)
    if scheme == "learned" and model != scheme:
        shape = (MAX_LEN, net.d_model)
        gen = torch.Generator().manual_seed(100 + seed)
        if model == "learned, sinusoid start":
            start = sinusoidal_table(*shape)
        elif model == "learned, matched start":  # the sinusoids' mean row + the spread of their centred rows
            start = sinusoidal_table(*shape).mean(0) + torch.randn(*shape, generator=gen) * math.sqrt(0.1)
        elif model == "learned, shuffled sinusoids":  # the very same rows, in another order
            start = sinusoidal_table(*shape)[torch.randperm(MAX_LEN, generator=gen)]
        else:  # the sinusoids' row norm, sqrt(d_model/2); or the spread of their centred rows, about 1.8
            variance = 0.5 if model == "learned, sized start" else 0.1
            start = torch.randn(*shape, generator=gen) * math.sqrt(variance)
        with torch.no_grad():
            _table(net).copy_(start)
    return net


def steps_to(history: pd.DataFrame, level: float = 0.9) -> float:
    """First step at which the mean training accuracy of the last 10 steps reaches ``level`` (NaN if never)."""
    reached = history["accuracy"].rolling(10).mean() >= level
    return float(history["step"][reached].iloc[0]) if reached.any() else math.nan


def marker_positions(tokens: torch.Tensor, n_symbols: int = 8) -> torch.Tensor:
    """``[n, 2]``: the positions of the two markers (tokens ``≥ n_symbols``) of each sequence, in order."""
    return (tokens >= n_symbols).nonzero()[:, 1].view(-1, 2)


def padded_sample(seq_len: int, n: int = EVAL_N, seed: int = EVAL_SEED) -> tuple[torch.Tensor, torch.Tensor]:
    """Order-task sequences of length 12 (markers at positions 0 … 11) followed by filler tokens up to ``seq_len``."""
    gen = torch.Generator().manual_seed(seed)
    tokens, labels = task().sample(n, MAX_LEN, gen)
    filler = torch.randint(0, task().n_symbols, (n, seq_len - MAX_LEN), generator=gen)
    return torch.cat([tokens, filler], dim=1), labels


def window_sample(
    start: int, seq_len: int = 48, n: int = EVAL_N, seed: int = EVAL_SEED
) -> tuple[torch.Tensor, torch.Tensor]:
    """Length-``seq_len`` sequences of fillers holding one length-12 order-task sequence at ``start`` … ``start+11``."""
    gen = torch.Generator().manual_seed(seed)
    window, labels = task().sample(n, MAX_LEN, gen)
    tokens = torch.randint(0, task().n_symbols, (n, seq_len), generator=gen)  # fillers only: no markers outside
    tokens[:, start : start + MAX_LEN] = window
    return tokens, labels


def _runner(model: ToyTransformer, seq_len: int) -> ToyTransformer:
    """The model as ``evaluate(..., extend_learned=True)`` runs it at ``seq_len``."""
    if model.scheme == "learned" and seq_len > MAX_LEN:
        return model.with_longer_table(seq_len, seed=EVAL_SEED)
    return model


def _right(model: ToyTransformer, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens).argmax(-1) == labels


def _mean(mask: torch.Tensor) -> float:
    return mask.float().mean().item()


def _position_on_line(coordinates: torch.Tensor, value: float) -> float:
    """The (fractional) position whose coordinate along the rows' main direction is ``value``: linear
    interpolation between the two neighbouring rows whose coordinates bracket it (NaN if none do)."""
    c = coordinates.tolist()
    for k in range(len(c) - 1):
        lo, hi = sorted((c[k], c[k + 1]))
        if lo <= value <= hi and c[k] != c[k + 1]:
            return k + (value - c[k]) / (c[k + 1] - c[k])
    return math.nan


def _table_measures(trained: torch.Tensor, initial: torch.Tensor) -> list[tuple[str, int | None, float]]:
    table = trained.double()
    centred = table - table.mean(0)
    _, singular_values, directions = torch.linalg.svd(centred, full_matrices=False)
    spread = singular_values**2
    along = centred @ directions[0]
    order = torch.corrcoef(torch.stack([torch.arange(len(table), dtype=along.dtype), along]))[0, 1].item()
    unit = table / table.norm(dim=1, keepdim=True)
    sim = unit @ unit.T
    zero = (-table.mean(0)) @ directions[0]  # where the zero vector falls on that direction
    rows: list[tuple[str, int | None, float]] = [
        ("table_share", None, (spread[0] / spread.sum()).item()),
        ("table_zero_position", None, _position_on_line(along, zero.item())),
        ("table_order", None, abs(order)),
        ("table_moved", None, ((table - initial.double()).norm() / initial.double().norm()).item()),
    ]
    rows += [("table_cosine", k, torch.diagonal(sim, k).mean().item()) for k in range(1, len(table))]
    return rows


def measure(name: str, seed: int, model: ToyTransformer, history: pd.DataFrame) -> list[tuple]:
    """The rows of the results frame for the trained ``model`` (``name``, ``seed``) and its training ``history``."""
    rows: list[tuple] = []

    def add(measure_: str, value: float, length: int | None = None, position: int | None = None) -> None:
        rows.append((measure_, name, seed, length, position, None if math.isnan(value) else float(value)))

    order_task = task()
    add("steps_to_90", steps_to(history))
    for n in LENGTHS:
        add("accuracy", evaluate(model, order_task, seq_len=n, extend_learned=True)["accuracy"], n)
    model.eval()
    with _one_thread():
        tokens, labels = order_task.sample(EVAL_N, 16, torch.Generator().manual_seed(EVAL_SEED))
        right, inside = _right(_runner(model, 16), tokens, labels), (marker_positions(tokens) < MAX_LEN).all(1)
        add("accuracy_inside", _mean(right[inside]), 16)
        add("accuracy_beyond", _mean(right[~inside]), 16)
        if name in ("sinusoidal", "learned", "rotary"):
            tokens, labels = order_task.sample(PROBE_N, 16, torch.Generator().manual_seed(PROBE_SEED))
            places = marker_positions(tokens)
            one_out = (places[:, 0] < MAX_LEN) & (places[:, 1] >= MAX_LEN)
            right = _right(_runner(model, 16), tokens, labels)
            for p in range(MAX_LEN):
                add("beyond_by_other", _mean(right[one_out & (places[:, 0] == p)]), 16, p)
            if name == "learned":
                add("beyond_probe", _mean(right[one_out]), 16)
                longer = _runner(model, 16)
                table = _table(longer)
                for label, source in (("beyond_zero_rows", None), ("beyond_copied_row", 0), ("beyond_copied_row", 11)):
                    with torch.no_grad():
                        table[MAX_LEN:] = 0.0 if source is None else table[source]
                    add(label, _mean(_right(longer, tokens, labels)[one_out]), 16, source)
        for n in (24, 48):
            tokens, labels = padded_sample(n)
            add("padded_accuracy", _mean(_right(_runner(model, n), tokens, labels)), n)
        if name in ("sinusoidal", "rotary", "rotary, base 1e6"):
            tokens, labels = order_task.sample(OFFSET_N, 48, torch.Generator().manual_seed(PROBE_SEED))
            places = marker_positions(tokens)
            offset = places[:, 1] - places[:, 0]
            right = _right(model, tokens, labels)
            for first in OFFSET_BANDS:
                add("offset_band_accuracy", _mean(right[(offset >= first) & (offset < first + 3)]), 48, first)
        if name in ("sinusoidal", "rotary"):
            for start in WINDOW_STARTS:
                tokens, labels = window_sample(start)
                with torch.no_grad():
                    probs = model(tokens).softmax(-1)
                add("window_accuracy", _mean(probs.argmax(-1) == labels), 48, start)
                add("window_confidence", probs.max(-1).values.mean().item(), 48, start)
            tokens, labels = order_task.sample(EVAL_N, 48, torch.Generator().manual_seed(EVAL_SEED))
            places = marker_positions(tokens)
            seen = (places[:, 1] - places[:, 0]) < MAX_LEN
            right = _right(model, tokens, labels)
            add("offset_seen", _mean(right[seen]), 48)
            add("offset_unseen", _mean(right[~seen]), 48)
    if name == "learned":
        initial = _table(make(name, seed)).detach()
        for label, position, value in _table_measures(_table(model).detach(), initial):
            add(label, value, None, position)
    return rows


def run_model(name: str, seeds: Iterable[int] = SEEDS) -> pd.DataFrame:
    """Train and measure model ``name`` for every seed of ``seeds``: its rows of the results frame."""
    rows = []
    for seed in seeds:
        model = make(name, seed)
        history = train(model, task(), seq_len=TRAIN_LENGTHS, steps=STEPS, seed=seed)
        rows += measure(name, seed, model, history)
    return _frame(rows)


def _frame(rows: list) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["value"] = frame["value"].astype(float).round(4)
    for column in ("length", "position"):
        frame[column] = frame[column].astype("Int64")
    return frame


def run(only: Iterable[str] | None = None) -> pd.DataFrame:
    """The whole study (or the models ``only``), as the results frame."""
    return pd.concat([run_model(name) for name in (MODELS if only is None else only)], ignore_index=True)
