"""Checkers for the exercises of notebook 03 (the bug hunt)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from ..variants import VARIANTS
from . import _feedback
from ._feedback import (
    Feedback,
    SetupError,
    as_number,
    attempt,
    checker,
    describe_error,
    failed,
    is_placeholder,
    not_done,
    passed,
    time_limit,
)

__all__ = ["check_bug_test", "check_mystery", "mystery_table", "check_dropout_fix", "check_dropout_module"]

#: (max_len, d_model) of the tables a student's test is run on, each in float32 and float64.
SIZES = [(8, 4), (50, 16), (200, 64), (64, 512)]

_HINTS = {
    "sin_only": "Look at PE(0): the paper's row 0 is [0, 1, 0, 1, …]. Or compare column 1 with column 0.",
    "doubled_exponent": (
        "This bug keeps PE(0) = [0, 1, 0, 1, …] and every row norm at sqrt(d_model/2); only the "
        "frequencies are wrong, so your test must measure something that depends on them."
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
        rejected = [(n, d, dt) for n, d, dt in cases if not _verdict(my_test, VARIANTS["paper"](n, d, dtype=dt))]
        if rejected:
            n, d, dt = rejected[0]
            if all(dt == torch.float32 for _, _, dt in rejected):
                return failed(
                    f"Your test rejects the correct float32 table (max_len={n}, d_model={d}) but accepts it in "
                    "float64. Too strict? float32 values are only accurate to about 1e-7: compare with a "
                    "tolerance, not with ==."
                )
            return failed(
                f"Your test rejects the correct table at {len(rejected)} of {len(cases)} sizes, e.g. max_len={n}, "
                f"d_model={d}, {str(dt)[6:]}. Run it on VARIANTS['paper']({n}, {d}) and print the two things it "
                "compares."
            )
        let_through = [(n, d, dt) for n, d, dt in cases if _verdict(my_test, VARIANTS[bug](n, d, dtype=dt))]
        caught: list[str] = []
        slipped: list[str] = []
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


#: The mystery table's exponents: column 2i holds sin(pos / base^((a·i + b) / d_model)) with (a, b) = _EXPONENTS[0],
#: column 2i+1 holds cos(pos / base^((a·i + b) / d_model)) with (a, b) = _EXPONENTS[1].
_EXPONENTS = ((2, 0), (2, 1))
_NAME = "".join(("shifted", "_cos", "_exponent"))


def mystery_table(max_len: int = 100, d_model: int = 16) -> torch.Tensor:
    """A float32 table with sin and cos columns built from two exponent rules (which published variant it is,
    and what it does to column 7, is the exercise)."""
    i = torch.arange(d_model // 2, dtype=torch.float64)
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    (a_s, b_s), (a_c, b_c) = _EXPONENTS
    sin = torch.sin(pos * 10000.0 ** (-(a_s * i + b_s) / d_model))
    cos = torch.cos(pos * 10000.0 ** (-(a_c * i + b_c) / d_model))
    return torch.stack((sin, cos), dim=-1).flatten(1).float()


def _column_frequency(column: int, d_model: int = 16) -> float:
    a, b = _EXPONENTS[column % 2]
    return 10000.0 ** (-(a * (column // 2) + b) / d_model)


@checker
def check_mystery(answer: str | None, omega_col7: object = None) -> Feedback:
    """Check the variant that built :func:`mystery_table` and the frequency its column 7 turns at.

    The name alone is not enough (a name can be guessed among seven): the frequency of column 7, measured on the
    table or derived from the variant's formula, to 3 significant digits, is part of the answer. A wrong name
    gets no hint that narrows the list down.
    """
    if is_placeholder(answer):
        return not_done()
    if not isinstance(answer, str):
        return failed(f'Answer with the variant\'s name as a string, e.g. "sin_only", got {type(answer).__name__}.')
    if answer not in VARIANTS:
        return failed(f"Answer with one of the variant names: {', '.join(VARIANTS)}.")
    if answer != _NAME:
        return failed(
            f"Not {answer}. Run the five cheap tests of section 4 on the mystery table, then find the gallery row "
            "that fails the same ones; if two rows match, look at what differs between their formulas."
        )
    if is_placeholder(omega_col7):
        return failed("The right variant. Now the second part: the frequency column 7 turns at (omega_col7).")
    omega, problem = as_number(omega_col7, "a frequency in radians per position")
    if problem is not None:
        return problem
    assert omega is not None  # set whenever problem is None
    want, paper = _column_frequency(7), 10000.0 ** (-6 / 16)
    if abs(omega - want) <= 5e-3 * want:
        return passed(
            f"It is {_NAME}, and column 7 turns at {want:.4g} rad per position instead of the paper's {paper:.4g}: "
            "the cos column of pair 3 uses the exponent 7/16, not 6/16, so sin and cos of a pair no longer share "
            "an angle and the pair leaves the unit circle."
        )
    if abs(omega - paper) <= 5e-3 * paper:
        return failed(
            f"{omega:.4g} is the paper's ω_3, what column 7 should turn at. Measure what it does turn at: the "
            "column holds cos(pos·ω) — read ω off two of its values."
        )
    if abs(omega - 2 * math.pi / want) <= 5e-3 * 2 * math.pi / want:
        return failed(
            "That is a wavelength (positions per turn); the exercise asks for a frequency (radians per position)."
        )
    return failed(
        f"{omega:.4g} is not the frequency of column 7 (to 3 significant digits). It holds cos(pos·ω): "
        "acos(PE[pos, 7]) / pos gives ω for any pos with pos·ω < π; a pos where the angle is not tiny is more accurate."
    )


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
    outs: list[Any] = []  # whatever the student's function returned: checked below
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
        return _nothing_dropped(trained, x, want)
    kept = float((~dropped).double().mean())
    if not 0.35 <= kept <= 0.65:  # p = 0.5 on 1280 entries: about half are kept (0.35–0.65 is > 10 σ wide)
        return failed(
            f"With training=True and p = 0.5, {kept:.0%} of the entries were kept; dropout keeps each one with "
            "probability 1 − p, about half here. Use F.dropout(..., p=p, training=training) on x + table[:seq_len]."
        )
    if not torch.allclose(trained[~dropped], 2 * want[~dropped], atol=1e-5):
        return failed("Kept entries must be scaled by 1/(1-p) in training, as F.dropout does.")
    return passed("Dropout now acts only while training; at inference the output is x + PE, every time.")


def _nothing_dropped(trained: torch.Tensor, x: torch.Tensor, want: torch.Tensor) -> Feedback:
    """What is wrong when no entry of the training output is zero."""
    if torch.allclose(trained, want, atol=1e-6):
        return failed("In training the output is exactly x + table[:seq_len]: dropout never runs while training.")
    if ((trained - x).abs() < 1e-6).float().mean() > 0.2:
        return failed(
            "In training whole entries of the table vanish but x stays: dropout acts on the table alone "
            "(x + dropout(table)). The paper drops entries of the sum x + table."
        )
    return failed("In training no entry is zero: dropout zeroes a fraction p of the entries of x + table.")


@checker
def check_dropout_module(add_positions: type | None) -> Feedback:
    """Check a fixed ``AddPositions(table, p)`` module: ``forward(x)`` is ``x + table[:seq]`` after ``.eval()``
    (every call), and drops a fraction ``p`` of the sum, scaling the rest by ``1/(1-p)``, after ``.train()``."""
    if is_placeholder(add_positions):
        return not_done()
    if not callable(add_positions):
        return failed(f"Answer with the class AddPositions, got {type(add_positions).__name__}.")
    table = VARIANTS["paper"](64, 16)
    module, problem = attempt("AddPositions(table, p=0.5)", add_positions, table.clone(), 0.5)
    if problem is not None:
        return problem
    if not isinstance(module, nn.Module):
        return failed(f"AddPositions(table, p) must build an nn.Module, got {type(module).__name__}.")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 40, 16, generator=g)
    want = x + table[:40]
    torch.manual_seed(0)
    outs = {}
    for mode in ("eval", "eval again", "train"):
        getattr(module, mode.split()[0])()
        out, problem = attempt(f"module.{mode.split()[0]}() then module(x)", module, x.clone())
        if problem is not None:
            return problem
        if not isinstance(out, torch.Tensor) or out.shape != want.shape or not out.is_floating_point():
            return failed(
                f"module(x) must return a float tensor shaped like x, {list(x.shape)}; got {type(out).__name__}."
            )
        if out.device.type == "meta" or not bool(torch.isfinite(out).all()):
            return failed("module(x) must return finite values: x + the table, dropped or not.")
        outs[mode] = out.detach().cpu().float()
    for mode in ("eval", "eval again"):
        if not torch.allclose(outs[mode], want, atol=1e-6):
            if (outs[mode] == 0).any():
                return failed(
                    "After .eval() some entries are still zeroed: dropout still runs at inference. Which "
                    "training flag does your dropout read, and who sets it?"
                )
            return failed("After .eval() the output should be exactly x + table[:seq_len], at every call.")
    trained = outs["train"]
    dropped = trained == 0
    if not dropped.any():
        return _nothing_dropped(trained, x, want)
    if not torch.allclose(trained[~dropped], 2 * want[~dropped], atol=1e-5):
        return failed("In training the kept entries must be scaled by 1/(1-p) (here 2), as nn.Dropout does.")
    if not 0.3 < dropped.float().mean().item() < 0.7:
        return failed(
            f"In training {dropped.float().mean().item():.0%} of the entries are zeroed; p = 0.5 asks for about half."
        )
    return passed(
        "After .eval() the module adds exactly the table, every call; after .train() it drops. A dropout layer "
        "made inside forward is a new module each call, in training mode whatever the model's mode: the fix is a "
        "submodule made once in __init__ (model.eval() switches it), or F.dropout(..., training=self.training)."
    )
