"""Checkers for the exercises of notebook 06 (learned vs sinusoidal positions)."""

from __future__ import annotations

import math
import re

import torch
from torch import nn

from ..learned import LearnedPositionalEmbedding
from . import _feedback
from ._feedback import (
    Feedback,
    as_integer,
    as_number,
    attempt,
    checker,
    describe_error,
    failed,
    not_done,
    passed,
    time_limit,
)

__all__ = [
    "check_learned_module",
    "check_beyond_prediction",
    "check_copied_row_accuracy",
]


def _is_placeholder(value: object) -> bool:
    return value is None or value is Ellipsis


def _int_set(values: object) -> set[int] | None:
    """The integers in a list/tuple/set/array of integers, or None if it is anything else."""
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        return None
    try:
        items = list(values)  # type: ignore[call-overload]
    except Exception:
        return None
    out: set[int] = set()
    for item in items:
        value, problem = as_integer(item)
        if value is None or problem is not None:
            return None
        out.add(value)
    return out


#: (max_len, d_model) sizes the learned-module checker tries after the one it is given.
LEARNED_SIZES = ((3, 8), (10, 2))
#: Largest standard deviation, and largest root mean square, accepted for the table's start ("small random
#: values" around 0; BERT uses N(0, 0.02²), and the token embeddings of nn.Embedding start at 1).
MAX_INIT_STD = 0.2


@checker
def check_learned_module(cls: type | None, max_len: int = 6, d_model: int = 4) -> Feedback:
    """Check a student's ``cls(max_len, d_model)`` at several sizes: a trainable ``[max_len, d_model]`` table
    started at small random values, added to ``x [batch, seq, d_model]`` for every ``seq ≤ max_len`` (``seq ==
    max_len`` included), and a ``ValueError`` naming both numbers when ``seq > max_len``."""
    if cls is None or _is_placeholder(cls):
        return not_done()
    sizes = [(max_len, d_model), *[size for size in LEARNED_SIZES if size != (max_len, d_model)]]
    with torch.random.fork_rng(devices=[]):  # seeded, and the student's global RNG is left alone
        torch.manual_seed(0)
        for size in sizes:
            result = _check_learned_module(cls, *size)
            if not result.ok:
                return result
    shown = ", ".join(f"[{m}, {d}]" for m, d in sizes)
    return passed(
        f"Works at every size tried: trainable tables ({shown}) started at small random values, the first seq rows "
        "added for every seq up to max_len, gradients reach the table and x, and a clear ValueError past max_len."
    )


def _check_learned_module(cls: type, max_len: int, d_model: int) -> Feedback:
    name = getattr(cls, "__name__", None)
    name = name if isinstance(name, str) else "your class"
    if not callable(cls):
        return failed(f"Pass the class itself (class MyLearned(nn.Module): …), got {type(cls).__name__}.")
    module, problem = attempt(f"{name}({max_len}, {d_model})", cls, max_len, d_model)
    if problem is not None:
        return problem
    if not isinstance(module, nn.Module):
        return failed(
            "Make it an nn.Module (class MyLearned(nn.Module), with super().__init__()) so the optimizer finds its table."
        )
    if any(isinstance(m, LearnedPositionalEmbedding) for m in module.modules()):
        return failed(
            "This uses the package's LearnedPositionalEmbedding; the exercise is to write the table yourself "
            "(an nn.Parameter of shape [max_len, d_model], or an nn.Embedding)."
        )
    tables = [p for p in module.parameters() if p.shape == (max_len, d_model)]
    if not tables:
        buffers = [b for b in module.buffers() if b.shape == (max_len, d_model)]
        shapes = [list(p.shape) for p in module.parameters()]
        if buffers:
            return failed("The table is a buffer, so it never trains: wrap it in nn.Parameter (or use nn.Embedding).")
        return failed(
            f"No trainable table of shape [max_len, d_model] = [{max_len}, {d_model}] found (parameters: {shapes})."
        )
    table = tables[0]
    std = table.detach().double().std().item() if table.numel() > 1 else abs(table.detach().double().item())
    if not math.isfinite(std) or std > MAX_INIT_STD:
        return failed(
            f"With max_len = {max_len}, d_model = {d_model}, your table starts with standard deviation {std:.3g}: start "
            f"it at small random values (BERT uses 0.02), so that positions start as a small nudge to the token "
            f"embeddings, not as large as they are."
        )
    rms = table.detach().double().square().mean().sqrt().item()
    if rms > MAX_INIT_STD:  # small spread, large offset: every row far from zero
        mean = table.detach().double().mean().item()
        return failed(
            f"With max_len = {max_len}, d_model = {d_model}, your table's entries are small in spread but average "
            f"{mean:.3g}: draw them around 0 (BERT: mean 0, standard deviation 0.02), so that positions start as a "
            f"small nudge to the token embeddings, not a large shared offset."
        )
    if max_len > 1 and torch.pdist(table.detach().double()).min().item() == 0:
        return failed(
            "Two rows of your table start equal, so those positions start indistinguishable: draw every entry at "
            "random (a constant or repeated row is not random)."
        )
    x = torch.randn(2, max(1, max_len - 2), d_model)
    x_leaf = x.clone().requires_grad_(True)  # gradients for x land here
    x_in = x_leaf.clone()  # what forward gets: a non-leaf, as token embeddings are
    out, problem = attempt(f"forward on x of shape {list(x.shape)}", module, x_in)
    if problem is not None:
        return problem
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return failed(f"forward must return a tensor shaped like x, {list(x.shape)}; got {shape}.")
    if not out.is_floating_point() or out.device != x.device:
        return failed(
            f"forward must return real floating values on x's device ({x.device}); got {out.dtype} on {out.device}."
        )
    if not bool(torch.isfinite(out.detach()).all()):
        return failed(
            "forward returned NaN or inf: x + weight[:seq] is finite when the table is "
            "(initialise it with finite values)."
        )
    if not torch.equal(x_in.detach(), x.detach()):
        return failed(
            "forward changed its input in place (x += … or x.add_): the caller's tensor changes too, and autograd "
            "refuses that when x is a leaf that needs a gradient. Return a new tensor: x + the rows."
        )
    added = (out - x).detach().to(table.dtype)
    seq = x.shape[1]
    if not torch.allclose(added, table[:seq].detach().expand_as(added), atol=1e-6):
        if torch.allclose(added, table[-seq:].detach().expand_as(added), atol=1e-6):
            return failed("You added the last seq rows; position pos gets row pos, i.e. weight[:seq].")
        if torch.allclose(out, x, atol=1e-6):
            return failed(
                "The output equals x: the table is never added (or it is all zeros — initialise it randomly, e.g. N(0, 0.02²))."
            )
        return failed(
            "out - x should be weight[:seq] (the same rows for every batch item): row pos is added at position pos. "
            "x is [batch, seq, d_model], so seq is x.shape[1]."
        )
    if torch.count_nonzero(table) == 0:
        return failed(
            "The table starts as all zeros; initialise it randomly (e.g. torch.randn(...) * 0.02) so positions differ from the start."
        )
    no_grad = "No gradient reaches the table: do not detach it or wrap the addition in torch.no_grad()."
    if not out.requires_grad:  # detached, or computed under torch.no_grad(): backward would raise
        return failed(no_grad)
    table.grad = None
    try:
        out.sum().backward()
    except (Exception, SystemExit) as err:
        return describe_error("backward through your forward", err)
    if table.grad is None or not table.grad[:seq].any():
        return failed(no_grad)
    if x_leaf.grad is None or not torch.equal(x_leaf.grad, torch.ones_like(x_leaf)):
        return failed(
            "No gradient reaches x through your forward (did you detach x?): the token embeddings below it "
            "would never train. Return x + the rows, with x as it came in."
        )
    for seq in sorted({1, max_len - 1, max_len} - {0}):
        result = _check_forward(module, table, max_len, d_model, seq)
        if result is not None:
            return result
    for too_long in (max_len + 1, max_len + 3):
        result = _check_too_long(module, max_len, d_model, too_long)
        if result is not None:
            return result
    return passed(f"[{max_len}, {d_model}] works.")


def _check_too_long(module: nn.Module, max_len: int, d_model: int, too_long: int) -> Feedback | None:
    """None when ``module`` refuses ``too_long`` positions with a ValueError naming both numbers, else feedback."""
    try:
        with time_limit(_feedback.TIME_LIMIT):  # a loop that never ends: feedback (via @checker)
            module(torch.randn(1, too_long, d_model))
    except NotImplementedError as err:
        return describe_error(f"forward on {too_long} positions", err)
    except ValueError as err:
        numbers = set(re.findall(r"\d+", str(err)))
        if not {str(too_long), str(max_len)} <= numbers:
            return failed(
                f"Right exception, but say which numbers clash: the message should contain the length {too_long} "
                f"and max_len {max_len}; yours is {str(err)!r}."
            )
    except (IndexError, RuntimeError) as err:
        return failed(
            f"seq = {too_long} > max_len = {max_len} crashed with {type(err).__name__} from torch; "
            "check seq against max_len first and raise ValueError naming both numbers."
        )
    except Exception as err:
        return failed(
            f"seq = {too_long} > max_len = {max_len} raised {type(err).__name__}; raise ValueError naming both numbers."
        )
    else:
        return failed(
            f"A sequence of {too_long} positions ran through a table with {max_len} rows without an error: "
            "it must raise ValueError (a silent wrong result is worse than a crash)."
        )
    return None


def _check_forward(module: nn.Module, table: torch.Tensor, max_len: int, d_model: int, seq: int) -> Feedback | None:
    """None when ``module`` adds the first ``seq`` rows of ``table`` to an ``x`` of that length, else feedback."""
    x = torch.randn(2, seq, d_model)
    out, problem = attempt(f"forward on x of shape {list(x.shape)}", module, x)
    if problem is not None:
        if seq == max_len and "Not answered" not in problem.message:
            return failed(
                f"A sequence of exactly max_len = {max_len} positions failed ({problem.message}) The table has a row "
                f"for each of positions 0 … {max_len - 1}, so seq = max_len must work: is your length check off by one?"
            )
        return problem
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        shape = list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return failed(f"forward must return a tensor shaped like x, {list(x.shape)}; got {shape}.")
    added = (out - x).detach().to(table.dtype)
    if not torch.allclose(added, table[:seq].detach().expand_as(added), atol=1e-6):
        return failed(
            f"With seq = {seq} (max_len = {max_len}), out - x is not weight[:seq]: row pos goes to position pos."
        )
    return None


def _copied_row_accuracy(row: int, max_len: int) -> float:
    """Expected accuracy on order-task sequences with exactly one marker past a learned table of ``max_len`` rows
    whose extra rows are copies of trained row ``row``, for a model that reads that marker as sitting at ``row``
    and orders every pair of distinct trained positions right: the other marker sits at ``p`` uniform in
    ``0 … max_len-1``; ``p < row``: right; ``p > row``: wrong; ``p == row``: the twins look alike, one of two right."""
    return (row + 0.5) / max_len


def _accuracy_answer(label: str, fn: object, *args: object) -> tuple[float | None, Feedback | None]:
    """``fn(*args)`` read as one accuracy: ``(value, None)``, or ``(None, feedback)`` when it fails, is not done yet
    or is not one number."""
    out, problem = attempt(label, fn, *args)  # type: ignore[arg-type]
    if problem is not None:
        return None, problem
    if _is_placeholder(out):
        return None, not_done()
    value, problem = as_number(out, "an accuracy (a number between 0 and 1)")
    if problem is not None:
        return None, failed(f"{label}: {problem.message}")
    return value, None


#: (row, max_len) settings the copied-row checker tries.
COPIED_ROW_CASES = ((8, 12), (0, 12), (11, 12), (3, 8), (20, 64))


@checker
def check_copied_row_accuracy(my_accuracy: object) -> Feedback:
    """Check ``my_accuracy(row, max_len)``: the accuracy of the learned model of notebook 06 on sequences with one
    marker past its ``max_len`` trained rows, when every extra row is a copy of trained row ``row`` and the model
    reads the marker there as sitting at ``row``: ``(row + 1/2) / max_len``, on several settings (to 1e-6)."""
    if _is_placeholder(my_accuracy):
        return not_done()
    for row, max_len in COPIED_ROW_CASES:
        label = f"my_accuracy({row}, {max_len})"
        value, problem = _accuracy_answer(label, my_accuracy, row, max_len)
        if problem is not None:
            return problem
        assert value is not None  # set whenever problem is None
        want = _copied_row_accuracy(row, max_len)
        if abs(value - want) <= 1e-6:
            continue
        if not 0 <= value <= 1:
            return failed(f"{label}: {value:.6g} is not an accuracy (a share of sequences, between 0 and 1).")
        if abs(value - row / max_len) <= 1e-6 or abs(value - (row + 1) / max_len) <= 1e-6:
            return failed(
                f"{label}: close. Look at the one case you may have counted as all right or all wrong: the other "
                "marker sitting exactly at that row. What does the model see then, and what do twins imply?"
            )
        if abs(value - (1 - want)) <= 1e-6 or abs(value - (max_len - 1 - row + 0.5) / max_len) <= 1e-6:
            return failed(
                f"{label}: backwards. The marker past the table is, in truth, the later one: the model is right "
                "exactly when it also reads the other marker as the earlier one."
            )
        if abs(value - 0.5) <= 1e-6:
            return failed(
                f"{label}: a coin flip would be right for rows that carry no information; a copied trained row "
                "tells the model a definite position. Where does the other marker sit relative to it?"
            )
        return failed(
            f"{label}: {value:.6g} is not it. Count, over the {max_len} equally likely places of the other marker, "
            "when the model's reading of the two places gives the right order."
        )
    return passed(
        f"Right on all {len(COPIED_ROW_CASES)} settings: (row + 1/2) / max_len. Copies of row 0 make the model almost "
        "always wrong, copies of the last row almost always right: what it does past its table is what the rows "
        "there look like."
    )


#: (seq_len, max_len, in_range, one_out) settings the beyond-prediction checker tries.
BEYOND_CASES = (
    (16, 12, 0.98, 0.43),
    (24, 12, 1.0, 0.4),
    (48, 12, 0.9, 0.3),
    (9, 6, 0.95, 0.2),
    (12, 12, 0.97, 0.43),
    (7, 2, 0.8, 0.1),
)


def _marker_shares(seq_len: int, max_len: int) -> tuple[float, float, float]:
    """Shares of sequences with 0, 1 and 2 of their two markers (two distinct random places among ``seq_len``)
    at positions ``max_len`` and beyond."""
    pairs = seq_len * (seq_len - 1)
    inside = min(seq_len, max_len)
    outside = seq_len - inside
    return inside * (inside - 1) / pairs, 2 * inside * outside / pairs, outside * (outside - 1) / pairs


def _beyond_prediction(seq_len: int, max_len: int, in_range: float, one_out: float) -> float:
    none, one, both = _marker_shares(seq_len, max_len)
    return none * in_range + one * one_out + both * 0.5


@checker
def check_beyond_prediction(my_prediction: object) -> Feedback:
    """Check ``my_prediction(seq_len, max_len, in_range, one_out)``: the learned model's accuracy on order-task
    sequences of ``seq_len`` (two markers at distinct random places) when it scores ``in_range`` on sequences with
    both markers below ``max_len``, ``one_out`` on those with exactly one at ``max_len`` or beyond, and reads two
    markers past its table as sitting at the same place (twins: one half). On several settings, to 1e-6."""
    if _is_placeholder(my_prediction):
        return not_done()
    for seq_len, max_len, in_range, one_out in BEYOND_CASES:
        label = f"my_prediction({seq_len}, {max_len}, {in_range}, {one_out})"
        value, problem = _accuracy_answer(label, my_prediction, seq_len, max_len, in_range, one_out)
        if problem is not None:
            return problem
        assert value is not None  # set whenever problem is None
        want = _beyond_prediction(seq_len, max_len, in_range, one_out)
        if abs(value - want) <= 1e-6:
            continue
        if not 0 <= value <= 1:
            return failed(f"{label}: {value:.6g} is not an accuracy (a share of sequences, between 0 and 1).")
        if seq_len <= max_len:
            return failed(f"{label}: at {seq_len} tokens (no more than max_len = {max_len}) every marker is in range.")
        none, one, both = _marker_shares(seq_len, max_len)
        f = max_len / seq_len  # a slip: the two places drawn independently (with replacement)
        if abs(value - (f * f * in_range + 2 * f * (1 - f) * one_out + (1 - f) ** 2 * 0.5)) <= 1e-6:
            return failed(
                f"{label}: close, but the two markers never share a place: once the first sits somewhere, the "
                f"second has only {seq_len} − 1 places left."
            )
        if (
            abs(value - (none * in_range + (1 - none) * one_out)) <= 1e-6
            or abs(value - (none * in_range + one * one_out)) <= 1e-6
        ):
            return failed(
                f"{label}: what about the sequences with *both* markers past the table? Both rows there are (nearly) "
                "the same vector, so the model reads both markers at the same place: what do twins imply?"
            )
        if abs(value - (none * in_range + (1 - none) * 0.5)) <= 1e-6:
            return failed(
                f"{label}: with exactly one marker past the table the model does not flip a coin: section 4 measured "
                "that accuracy, and it is the argument one_out."
            )
        if abs(value - none * in_range) <= 1e-6 or abs(value - none) <= 1e-6:
            return failed(
                f"{label}: that is (about) the share of sequences with both markers in range; the others count too."
            )
        return failed(
            f"{label}: {value:.6g} is not it. Split the sequences by how many of their two markers sit at {max_len} "
            "or beyond (0, 1 or 2): the three shares add up to 1, and each group has its own accuracy."
        )
    return passed(
        f"Right on all {len(BEYOND_CASES)} settings: the shares of sequences with 0, 1 and 2 markers past the table, "
        "weighted by in_range, one_out and one half. Now compare it with what the models do."
    )
