"""Checkers for the exercises of notebook 03 (the bug hunt)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch

from ..variants import CHEAP_TESTS, VARIANTS
from . import _feedback
from ._feedback import (
    Feedback,
    SetupError,
    attempt,
    checker,
    describe_error,
    failed,
    is_placeholder,
    not_done,
    passed,
    time_limit,
)

__all__ = ["check_bug_test", "check_mystery", "mystery_table", "check_dropout_fix"]

#: (max_len, d_model) of the tables a student's test is run on, each in float32 and float64.
SIZES = [(8, 4), (50, 16), (200, 64), (64, 512)]

_HINTS = {
    "sin_only": "Look at PE(0): the paper's row 0 is [0, 1, 0, 1, …]. Or compare column 1 with column 0.",
    "doubled_exponent": (
        "This bug keeps PE(0) = [0, 1, 0, 1, …] and every row norm at sqrt(d_model/2); only the "
        "frequencies are wrong. Measure them: asin(PE[1, 2i]) should be base^(-2i/d_model)."
    ),
    "column_exponent": "Each (sin, cos) pair should lie on the unit circle: PE[:, 2i]² + PE[:, 2i+1]² = 1.",
    "shifted_cos_exponent": "Each (sin, cos) pair should lie on the unit circle: PE[:, 2i]² + PE[:, 2i+1]² = 1.",
    "concat_halves": "In the paper's layout sin and cos of one pair sit in adjacent columns: PE(0) = [0, 1, 0, 1, …].",
    "tensor2tensor": "In the paper's layout sin and cos of one pair sit in adjacent columns: PE(0) = [0, 1, 0, 1, …].",
}


class _NotABool(Exception):
    """The student's test returned something other than one True/False."""


def _verdict(my_test: Callable[[torch.Tensor], object], table: torch.Tensor) -> bool:
    with time_limit(_feedback.TIME_LIMIT):  # a loop that never ends becomes feedback (via @checker)
        result = my_test(table.clone())
    if isinstance(result, (torch.Tensor, np.ndarray)):
        if math.prod(result.shape) != 1 or (isinstance(result, torch.Tensor) and result.device.type == "meta"):
            shape = list(result.shape)
            raise _NotABool(f"returned an array of shape {shape}; return one True/False (e.g. with .all())")
        result = result.reshape(()).item() if isinstance(result, np.ndarray) else result.item()
    if not isinstance(result, (bool, np.bool_)):  # np.True_ (from np.all, np.allclose …) is fine
        text = " ".join(repr(result).split())[:60]
        raise _NotABool(
            f"returned {text} ({type(result).__name__}); return True (table is correct) or False (bug found)"
        )
    return bool(result)


@checker
def check_bug_test(my_test: Callable[[torch.Tensor], bool] | None, bug: str) -> Feedback:
    """Check ``my_test(table) -> bool``: True for the paper's table, False for the ``bug`` variant.

    The test is run on tables of several sizes (:data:`SIZES`) in float32 and float64. The
    feedback also says which other variants the test catches and which slip through.
    """
    if not isinstance(bug, str) or bug not in VARIANTS or bug == "paper":
        raise SetupError(f"bug must be one of {[n for n in VARIANTS if n != 'paper']}, got {bug!r}")
    if is_placeholder(my_test):
        return not_done()
    if not callable(my_test):
        return failed(f"my_test must be a function table -> True/False; got {type(my_test).__name__}.")
    cases = [(n, d, dt) for n, d in SIZES for dt in (torch.float32, torch.float64)]
    try:
        for n, d, dt in cases:
            if not _verdict(my_test, VARIANTS["paper"](n, d, dtype=dt)):
                return failed(
                    f"Your test rejects the correct table (max_len={n}, d_model={d}, {str(dt)[6:]}). Too strict? "
                    "float32 values are only accurate to about 1e-7 (more at large positions): compare with a "
                    "tolerance such as torch.allclose(..., atol=1e-5), not with ==."
                )
        let_through = [(n, d, dt) for n, d, dt in cases if _verdict(my_test, VARIANTS[bug](n, d, dtype=dt))]
        caught, slipped = [], []
        for name in VARIANTS:
            if name not in ("paper", bug):
                tables = [VARIANTS[name](n, d, dtype=dt) for n, d, dt in cases]
                (slipped if any(_verdict(my_test, t) for t in tables) else caught).append(name)
    except _NotABool as err:
        return failed(f"my_test {err}.")
    except (Exception, SystemExit) as err:  # show the student their own error, briefly
        return describe_error("my_test", err)
    if let_through:
        n, d, dt = let_through[0]
        return failed(
            f"Your test lets the {bug} table through ({len(let_through)} of {len(cases)} sizes, e.g. "
            f"max_len={n}, d_model={d}, {str(dt)[6:]}). {_HINTS[bug]}"
        )
    extra = f" It also catches {', '.join(caught)}" if caught else " It catches no other variant"
    if slipped:
        extra += f"; {', '.join(slipped)} {'slips' if len(slipped) == 1 else 'slip'} through."
    else:
        extra += " — every variant in the gallery."
    return passed(f"Your test passes the correct table and catches {bug} at every size tried.{extra}")


_MYSTERY = "shifted_cos_exponent"


def mystery_table(max_len: int = 100, d_model: int = 16) -> torch.Tensor:
    """A float32 table built by one of the variants (which one is the exercise)."""
    return VARIANTS[_MYSTERY](max_len, d_model)


@checker
def check_mystery(answer: str | None) -> Feedback:
    """Check the name of the variant that built :func:`mystery_table`."""
    if is_placeholder(answer):
        return not_done()
    if not isinstance(answer, str):
        return failed(f'Answer with the variant\'s name as a string, e.g. "sin_only", got {type(answer).__name__}.')
    if answer == _MYSTERY:
        return passed(
            f"It is {_MYSTERY}: PE(0) and the sin-column frequencies are right, but the pairs leave the "
            "unit circle — the cos column turns at another frequency than its sin column."
        )
    if answer not in VARIANTS:
        return failed(f"Answer with one of the variant names: {', '.join(VARIANTS)}.")
    table = mystery_table()
    for label, test in CHEAP_TESTS.items():
        theirs, ours = test(VARIANTS[answer](100, 16)), test(table)
        if theirs != ours:
            return failed(
                f"Not {answer}: a {answer} table {'passes' if theirs else 'fails'} the cheap test "
                f"'{label}', but the mystery table {'passes' if ours else 'fails'} it."
            )
    return failed(f"Not {answer}: its values differ from the mystery table's.")  # pragma: no cover


@checker
def check_dropout_fix(add_positions: Callable[..., torch.Tensor] | None) -> Feedback:
    """Check ``add_positions(x, table, p, training) -> dropout(x + table[:seq])`` with dropout only in training."""
    if is_placeholder(add_positions):
        return not_done()
    if not callable(add_positions):
        kind = type(add_positions).__name__
        return failed(f"add_positions must be a function (x, table, p, training) -> tensor; got {kind}.")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 40, 16, generator=g)
    table = VARIANTS["paper"](64, 16)
    want = x + table[:40]
    torch.manual_seed(0)
    outs = []
    for training in (False, False, True):
        run = lambda t=training: add_positions(x.clone(), table.clone(), p=0.5, training=t)  # noqa: E731
        out, problem = attempt("add_positions", run)
        if problem is not None:
            return problem
        outs.append(out)
    if not all(isinstance(out, torch.Tensor) and out.shape == want.shape for out in outs):
        return failed(f"add_positions must return a tensor shaped like x, {list(x.shape)}.")
    if not all(out.is_floating_point() and out.device.type != "meta" for out in outs):
        return failed(
            "add_positions must return real floating values (x + the table), with data (not on the meta device)."
        )
    evals, trained = [out.detach().cpu().float() for out in outs[:2]], outs[2].detach().cpu().float()
    if not all(bool(torch.isfinite(out).all()) for out in outs):
        return failed(
            "add_positions returned NaN or inf: x + table[:seq_len] is finite, and dropout only zeroes and scales."
        )
    if not all(torch.allclose(out, want, atol=1e-6) for out in evals):
        if any((out == 0).any() for out in evals):
            return failed(
                "With training=False some entries are still zeroed: dropout is on at inference. "
                "F.dropout defaults to training=True; pass training=training."
            )
        return failed("With training=False the output should be exactly x + table[:seq_len].")
    dropped = trained == 0
    if not dropped.any():
        return failed("With training=True nothing was dropped: dropout must still act while training.")
    kept = float((~dropped).double().mean())
    if not 0.35 <= kept <= 0.65:  # p = 0.5 on 1280 entries: about half are kept (0.35–0.65 is > 10 σ wide)
        return failed(
            f"With training=True and p = 0.5, {kept:.0%} of the entries were kept; dropout keeps each one with "
            "probability 1 − p, about half here. Use F.dropout(..., p=p, training=training) on x + table[:seq_len]."
        )
    if not torch.allclose(trained[~dropped], 2 * want[~dropped], atol=1e-5):
        return failed("Kept entries must be scaled by 1/(1-p) in training, as F.dropout does.")
    return passed("Dropout now acts only while training; at inference the output is x + PE, every time.")
