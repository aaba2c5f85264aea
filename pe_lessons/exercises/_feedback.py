"""The feedback object every exercise checker returns, and the helpers checkers share.

A checker must answer *any* answer with a :class:`Feedback` — never raise, never say ✅ to
NaN, inf, a wrong shape or type, or a function that raises — with a message that names the
problem. :func:`as_number` and :func:`as_integer` turn a student's answer into a plain
``float``/``int`` (or into feedback that says why it is not one); :func:`attempt` runs a
student's function; :func:`checker` is the last safety net around a whole checker.
"""

from __future__ import annotations

import functools
import linecache
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Feedback:
    """Result of checking an exercise: ``ok`` and a message that says what is wrong and why.

    It prints as one readable line (``✅ …`` or ``❌ …``) so a checker cell's output
    is the feedback itself; ``bool(feedback)`` is ``ok``.
    """

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return ("✅ " if self.ok else "❌ ") + self.message

    def __repr__(self) -> str:
        return str(self)

    def _repr_markdown_(self) -> None:  # plain text everywhere: stable under nbval
        return None


def passed(message: str = "Correct!") -> Feedback:
    return Feedback(True, message)


def failed(message: str) -> Feedback:
    return Feedback(False, message)


NOT_DONE = "Not answered yet: replace the `...` / `None` placeholder with your answer and run this cell again."


def not_done() -> Feedback:
    return Feedback(False, NOT_DONE)


def close(a: float, b: float, tol: float = 1e-3) -> bool:
    """``|a − b| ≤ tol·max(1, |b|)``: relative for large ``b``, absolute near 0."""
    return abs(a - b) <= tol * max(1.0, abs(b))


def is_placeholder(value: object) -> bool:
    """``None`` or ``...``: the exercise cell has not been filled in."""
    return value is None or value is Ellipsis


def stub(label: str) -> Feedback:
    """Feedback for a function that still raises the exercise's ``NotImplementedError``."""
    return Feedback(
        False,
        f"Not answered yet: {label} still raises NotImplementedError — replace `raise NotImplementedError` "
        "with your code and run this cell again.",
    )


def _short(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (and safe: a broken ``__repr__`` gives the type)."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_stub(err: BaseException) -> bool:
    """Whether ``err`` is the exercise stub's own ``raise NotImplementedError`` — not one that torch
    raises for an unsupported operation (those are real errors of the student's code)."""
    if not isinstance(err, NotImplementedError):
        return False
    tb = err.__traceback__
    if tb is None:
        return not str(err)
    while tb.tb_next is not None:
        tb = tb.tb_next
    if str(tb.tb_frame.f_globals.get("__name__", "")).split(".")[0] in ("torch", "numpy", "einops"):
        return False
    if not str(err):
        return True
    line = linecache.getline(tb.tb_frame.f_code.co_filename, tb.tb_lineno)  # notebook cells are in linecache
    return "raise NotImplementedError" in line


def describe_error(label: str, err: BaseException) -> Feedback:
    """Feedback for an exception raised by the student's code: a stub's ``NotImplementedError``
    is "not answered yet"; anything else is shown briefly, with its type."""
    if _is_stub(err):
        return stub(label.split("(")[0].strip() or label)
    text = " ".join(str(err).split())
    if len(text) > 200:
        text = text[:199] + "…"
    return failed(f"{label} raised {type(err).__name__}" + (f": {text}" if text else "") + ".")


def attempt(label: str, fn: Callable[..., T], *args: object) -> tuple[T | None, Feedback | None]:
    """Run the student's code: ``(result, None)``, or ``(None, feedback)`` when it is not callable,
    is still a stub (``raise NotImplementedError``) or raises — the feedback shows their error briefly."""
    if not callable(fn):
        return None, failed(f"{label.split('(')[0]} must be a function; got {_short(fn)} ({type(fn).__name__}).")
    try:
        return fn(*args), None
    except (Exception, SystemExit) as err:  # the student's error, whatever it is (not Ctrl-C)
        return None, describe_error(label, err)


def _one_value(answer: object) -> object:
    """A one-element tensor or NumPy array → its Python scalar; anything else unchanged."""
    if type(answer).__module__.split(".")[0] in ("torch", "numpy") and hasattr(answer, "shape"):
        size = math.prod(answer.shape)
        if size != 1:
            raise _NotOne(f"an array of shape {list(answer.shape)}")
        if hasattr(answer, "detach"):
            answer = answer.detach()
            if answer.device.type == "meta":
                raise _NotOne("a tensor on the meta device (it has no value)")
            return answer.cpu().item()
        return answer.reshape(()).item()
    return answer


class _NotOne(Exception):
    pass


def _kind(value: object) -> str:
    """How to name a value that is not the expected kind: "the text 'abc'", "the complex number 1j" …"""
    if isinstance(value, numbers.Complex) and not isinstance(value, (bool, numbers.Real)):
        return f"the complex number {_short(value)}"
    if isinstance(value, str):
        return f"the text {_short(value)}"
    return f"{_short(value)} ({type(value).__name__})"


def as_number(answer: object, what: str = "a number") -> tuple[float | None, Feedback | None]:
    """``(float(answer), None)`` for a finite real number (a NumPy scalar or a one-element tensor
    too), else ``(None, feedback)`` naming what is wrong with it (text, bool, complex, NaN, inf …)."""
    try:
        value = _one_value(answer)
    except _NotOne as err:
        return None, failed(f"Answer with {what}, got {err}.")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None, failed(f"Answer with {what}, got {_kind(value)}.")
    try:
        number = float(value)
    except (OverflowError, ValueError, TypeError):
        return None, failed(f"Answer with {what}: {_short(value)} is too large to be one.")
    if math.isnan(number):
        return None, failed(f"Answer with {what}: got NaN (not a number) — check the computation that made it.")
    if math.isinf(number):
        return None, failed(f"Answer with {what}: {number} is infinite — check for a division by zero or an overflow.")
    return number, None


def as_integer(answer: object, what: str = "an integer") -> tuple[int | None, Feedback | None]:
    """``(int(answer), None)`` for an integer (a NumPy integer or a one-element integer tensor
    too), else ``(None, feedback)`` naming what is wrong with it (a float, text, bool …)."""
    try:
        value = _one_value(answer)
    except _NotOne as err:
        return None, failed(f"Answer with {what}, got {err}.")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return None, failed(f"Answer with {what}, got the non-integer {_short(value)} ({type(value).__name__}).")
        return None, failed(f"Answer with {what}, got {_kind(value)}.")
    return int(value), None


class SetupError(ValueError):
    """A checker called with impossible exercise settings (the notebook's mistake, not the student's)."""


#: Set to True (tests do) to let an unexpected exception inside a checker escape instead of
#: becoming feedback: the property tests then show which checker fails to handle an answer.
STRICT = False


def checker(fn: Callable[..., Feedback]) -> Callable[..., Feedback]:
    """Decorator: whatever happens inside the checker, return a :class:`Feedback`.

    An exception the checker did not foresee becomes ❌ feedback that names it (a checker never
    raises at a student), except :class:`SetupError` — a wrong exercise setting — and Ctrl-C.
    """

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> Feedback:
        try:
            result = fn(*args, **kwargs)
        except SetupError:
            raise
        except (Exception, SystemExit) as err:
            if STRICT:
                raise
            text = " ".join(str(err).split())[:200]
            return failed(
                f"This answer could not be checked: {type(err).__name__}"
                + (f": {text}" if text else "")
                + ". Check its type and shape against the exercise."
            )
        if not isinstance(result, Feedback):  # pragma: no cover - a checker bug
            return failed(f"The checker returned {type(result).__name__}; please report this.")
        return result

    return wrapper
