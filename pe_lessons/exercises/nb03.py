"""Checkers for the exercises of notebook 03 (the bug hunt)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..variants import CHEAP_TESTS, VARIANTS
from ._feedback import Feedback, failed, not_done, passed

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


def _verdict(my_test: Callable[[torch.Tensor], object], table: torch.Tensor) -> bool:
    result = my_test(table.clone())
    if isinstance(result, torch.Tensor):
        if result.numel() != 1:
            raise TypeError(f"returned a tensor of shape {list(result.shape)}; return one True/False (e.g. with .all())")
        result = result.item()
    if not isinstance(result, bool) and type(result).__name__ != "bool_":  # numpy.bool_ is fine
        raise TypeError(f"returned {result!r}; return True (table is correct) or False (bug found)")
    return bool(result)


def check_bug_test(my_test: Callable[[torch.Tensor], bool] | None, bug: str) -> Feedback:
    """Check ``my_test(table) -> bool``: True for the paper's table, False for the ``bug`` variant.

    The test is run on tables of several sizes (:data:`SIZES`) in float32 and float64. The
    feedback also says which other variants the test catches and which slip through.
    """
    if bug not in VARIANTS or bug == "paper":
        raise ValueError(f"bug must be one of {[n for n in VARIANTS if n != 'paper']}, got {bug!r}")
    if my_test is None or my_test is Ellipsis:
        return not_done()
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
    except NotImplementedError:
        return not_done()
    except Exception as err:  # show the student their own error, briefly
        return failed(f"my_test raised {type(err).__name__}: {err}")
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


def check_mystery(answer: str | None) -> Feedback:
    """Check the name of the variant that built :func:`mystery_table`."""
    if answer is None or answer is Ellipsis:
        return not_done()
    if not isinstance(answer, str):
        return failed(f"Answer with the variant's name as a string, e.g. \"sin_only\", got {type(answer).__name__}.")
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


def check_dropout_fix(add_positions: Callable[..., torch.Tensor] | None) -> Feedback:
    """Check ``add_positions(x, table, p, training) -> dropout(x + table[:seq])`` with dropout only in training."""
    if add_positions is None or add_positions is Ellipsis:
        return not_done()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 40, 16, generator=g)
    table = VARIANTS["paper"](64, 16)
    want = x + table[:40]
    try:
        torch.manual_seed(0)
        evals = [add_positions(x, table, p=0.5, training=False) for _ in range(2)]
        trained = add_positions(x, table, p=0.5, training=True)
    except NotImplementedError:
        return not_done()
    except Exception as err:
        return failed(f"add_positions raised {type(err).__name__}: {err}")
    if not all(isinstance(out, torch.Tensor) and out.shape == want.shape for out in [*evals, trained]):
        return failed(f"add_positions must return a tensor shaped like x, {list(x.shape)}.")
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
    if not torch.allclose(trained[~dropped], 2 * want[~dropped], atol=1e-5):
        return failed("Kept entries must be scaled by 1/(1-p) in training, as F.dropout does.")
    return passed("Dropout now acts only while training; at inference the output is x + PE, every time.")
