"""The feedback object every exercise checker returns, and the helpers checkers share.

A checker must answer *any* answer with a :class:`Feedback` — never raise, never say ✅ to
NaN, inf, a wrong shape or type, or a function that raises — with a message that names the
problem. :func:`as_number` and :func:`as_integer` turn a student's answer into a plain
``float``/``int`` (or into feedback that says why it is not one), :func:`as_values` an array
answer into a float64 tensor; :func:`attempt` runs a student's function with a time limit
(:func:`time_limit`); :func:`checker` is the last safety net around a whole checker, and gives
the whole check a time limit too, so a student's loop that never ends gets feedback, not a hang.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import math
import numbers
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import EllipsisType, FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

if TYPE_CHECKING:  # the type checker's narrowing only: typing_extensions comes with mypy
    from typing_extensions import TypeIs

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


def is_placeholder(value: object) -> TypeIs[EllipsisType | None]:
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


# --------------------------------------------------------------------------- time limits on student code

#: Seconds one call of a student's function (through :func:`attempt`) may take.
TIME_LIMIT = 10.0
#: Seconds a whole check may take (it may call the student's code many times, and directly).
CHECK_TIME_LIMIT = 30.0


class TimeLimitExceeded(BaseException):
    """The student's code ran past its time limit.

    A ``BaseException`` (like ``KeyboardInterrupt``), so a student's ``except Exception:``
    inside the loop does not swallow it. (A bare ``except:`` can, as it can swallow Ctrl-C:
    the stop is raised again every 50 ms, which ends most such loops, but not one whose whole
    body is a ``try`` with a bare ``except: pass``.)
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"did not return within {seconds:g} s")
        self.seconds = seconds


def too_slow(label: str | None, seconds: float) -> Feedback:
    """Feedback for student code stopped by the time limit (``label``: the call, if known)."""
    said = f"{label}: your function" if label else "Your function"
    return Feedback(False, f"{said} did not return within {seconds:g} s: a loop that never ends?")


# The deadlines of the time limits in force on the main thread, innermost last: (deadline, seconds).
_deadlines: list[tuple[float, float]] = []
# While any is in force: the SIGALRM handler and timer we replaced, and when we replaced them.
_saved: tuple[object, float, float, float] | None = None
_REFIRE = 0.05  # if the student's code swallows the exception (a bare except), raise it again this soon


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    global _saved
    now = time.monotonic()
    if frame is not None and frame.f_code in _QUIET:  # never interrupt our own bookkeeping
        signal.setitimer(signal.ITIMER_REAL, _REFIRE)
        return
    expired = [seconds for deadline, seconds in _deadlines if deadline <= now + 1e-3]
    if expired:
        signal.setitimer(signal.ITIMER_REAL, _REFIRE)
        raise TimeLimitExceeded(expired[0])
    if _saved is not None and _saved[1] > 0 and _saved[3] + _saved[1] <= now + 1e-3:  # a timer set before ours
        handler, delay, interval, start = _saved
        _saved = (handler, interval, interval, now)  # it fires again after its interval (if it had one)
        if callable(handler):
            handler(signum, frame)
    _arm()


def _arm() -> None:
    """Point the real-time timer at the nearest deadline (ours, or the one we replaced)."""
    now = time.monotonic()
    nearest = min(deadline for deadline, _ in _deadlines)
    if _saved is not None and _saved[1] > 0:
        nearest = min(nearest, _saved[3] + _saved[1])
    signal.setitimer(signal.ITIMER_REAL, max(nearest - now, 1e-4))


def _use_alarm() -> bool:
    """SIGALRM works on POSIX in the main thread (where Jupyter runs a cell), unless a C-level handler owns it."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None
    )


@contextlib.contextmanager
def _alarm_limit(seconds: float) -> Iterator[None]:
    global _saved
    start = time.monotonic()
    if not _deadlines:
        handler = signal.signal(signal.SIGALRM, _on_alarm)
        delay, interval = signal.setitimer(signal.ITIMER_REAL, 0)
        _saved = (handler, delay, interval, start)
    _deadlines.append((start + seconds, seconds))
    try:
        _arm()
        yield
    finally:
        _release()


def _release() -> None:
    global _saved
    signal.setitimer(signal.ITIMER_REAL, 0)
    _deadlines.pop()
    if _deadlines:
        _arm()
        return
    handler, delay, interval, start = _saved  # type: ignore[misc]
    _saved = None
    signal.signal(signal.SIGALRM, handler)  # type: ignore[arg-type]
    if delay > 0:  # the timer someone set before us goes on (at once if it fell due meanwhile)
        signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - start), 1e-4), interval)


_QUIET = {
    _release.__code__,
    _arm.__code__,
    _alarm_limit.__wrapped__.__code__,  # type: ignore[attr-defined]  # the generator behind the context manager (entry and exit)
    contextlib._GeneratorContextManager.__enter__.__code__,
    contextlib._GeneratorContextManager.__exit__.__code__,
}


_tracing = threading.local()  # .deadlines: this thread's traced limits, innermost last


def _trace(frame: FrameType, event: str, arg: object) -> Any:  # sys.settrace's trace function: returns itself
    deadlines = _tracing.deadlines
    if deadlines and frame.f_code.co_filename != __file__:
        now = time.monotonic()
        expired = [seconds for deadline, seconds in deadlines if deadline <= now]
        if expired:
            raise TimeLimitExceeded(expired[0])
    return _trace


@contextlib.contextmanager
def _traced_limit(seconds: float) -> Iterator[None]:
    """Off the main thread (or without SIGALRM, e.g. on Windows): check the clock on every line
    the student's code runs. Skipped when a debugger or coverage already traces this thread."""
    current = sys.gettrace()
    if current is not None and current is not _trace:
        yield
        return
    if not hasattr(_tracing, "deadlines"):
        _tracing.deadlines = []
    _tracing.deadlines.append((time.monotonic() + seconds, seconds))
    sys.settrace(_trace)
    try:
        yield
    finally:
        _tracing.deadlines.pop()
        if not _tracing.deadlines:
            sys.settrace(None)


def time_limit(seconds: float | None) -> contextlib.AbstractContextManager[None]:
    """Context manager: raise :class:`TimeLimitExceeded` in the code it runs after ``seconds``.

    On the main thread of Linux/macOS (Jupyter's case) a real-time timer (``SIGALRM``)
    interrupts the code, even in ``time.sleep``; elsewhere a trace function checks the clock
    on every line. Limits nest (the nearest deadline fires), a timer set before is restored,
    and no timer is left armed afterwards. ``None`` (or ≤ 0) means no limit. Code that runs
    long inside one C call (a huge torch op) is stopped only when it returns to Python.
    """
    if seconds is None or not seconds > 0 or math.isinf(seconds):
        return contextlib.nullcontext()
    return _alarm_limit(seconds) if _use_alarm() else _traced_limit(seconds)


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


def attempt(
    label: str, fn: Callable[..., T], *args: object, seconds: float | None = None
) -> tuple[T | None, Feedback | None]:
    """Run the student's code with a time limit (``seconds``, default :data:`TIME_LIMIT`):
    ``(result, None)``, or ``(None, feedback)`` when it is not callable, is still a stub
    (``raise NotImplementedError``), raises — the feedback shows their error briefly — or does
    not return in time."""
    if not callable(fn):
        return None, failed(f"{label.split('(')[0]} must be a function; got {_short(fn)} ({type(fn).__name__}).")
    try:
        with time_limit(TIME_LIMIT if seconds is None else seconds):
            return fn(*args), None
    except TimeLimitExceeded as err:
        return None, too_slow(label, err.seconds)
    except (Exception, SystemExit) as err:  # the student's error, whatever it is (not Ctrl-C)
        return None, describe_error(label, err)


def _one_value(answer: object) -> object:
    """A one-element tensor or NumPy array → its Python scalar; anything else unchanged."""
    if type(answer).__module__.split(".")[0] in ("torch", "numpy") and hasattr(answer, "shape"):
        size = math.prod(answer.shape)
        if size != 1:
            raise _NotOne(f"an array of shape {list(answer.shape)}")
        array: Any = answer  # a tensor or a NumPy array (checked above)
        if hasattr(array, "detach"):
            array = array.detach()
            if array.device.type == "meta":
                raise _NotOne("a tensor on the meta device (it has no value)")
            return array.cpu().item()
        return array.reshape(()).item()
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
    """``(int(answer), None)`` for an integer in any ordinary form — ``6``, ``6.0``, a NumPy
    number, a one-element tensor (``torch.tensor(6.)`` too) — else ``(None, feedback)`` naming
    what is wrong with it (a non-integer, text, bool …)."""
    try:
        value = _one_value(answer)
    except _NotOne as err:
        return None, failed(f"Answer with {what}, got {err}.")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number) and number == math.floor(number):  # 6.0 is the integer 6
                return int(number), None
            return None, failed(f"Answer with {what}, got the non-integer {_short(value)} ({type(value).__name__}).")
        return None, failed(f"Answer with {what}, got {_kind(value)}.")
    return int(value), None


def precision(answer: object) -> float:
    """The machine epsilon of the answer's own floating type: 2⁻²³ for a float32 tensor or array,
    2⁻¹⁰ for float16 …, 2⁻⁵² for Python floats, lists of them and float64 — so a checker can
    compare an answer at the precision it was computed in."""
    dtype = getattr(answer, "dtype", None)
    if dtype is not None:
        try:
            if isinstance(dtype, torch.dtype):
                return torch.finfo(dtype).eps if dtype.is_floating_point else 2.0**-52
            return float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else 2.0**-52
        except (TypeError, ValueError):
            return 2.0**-52
    return 2.0**-52


def as_values(answer: object, what: str = "an array of numbers") -> tuple[torch.Tensor | None, Feedback | None]:
    """``(float64 CPU tensor, None)`` for real numbers in any ordinary container — a tensor, a
    NumPy array, a (nested) list or tuple of Python or NumPy numbers or 0-d tensors — converted
    without a float32 round trip; else ``(None, feedback)`` naming what it is (text, complex,
    booleans, ragged lists, a tensor on the meta device …). NaN and inf are kept: the checker
    says what they mean."""
    if isinstance(answer, (str, bytes)):
        return None, failed(f"Answer with {what}, got {_kind(answer)}.")
    try:
        if isinstance(answer, torch.Tensor):
            if answer.device.type == "meta":
                return None, failed(f"Answer with {what}, got a tensor on the meta device (it has no values).")
            values = answer.detach().cpu()
        elif isinstance(answer, (list, tuple)):
            values = torch.tensor(_plain_floats(answer), dtype=torch.float64)
        else:
            array = np.asarray(answer)
            if array.dtype == object or array.dtype.kind not in "biuf":
                return None, failed(f"Answer with {what}, got {_kind(answer)}.")
            values = torch.from_numpy(array.copy())
    except (TypeError, ValueError, RuntimeError, OverflowError, _NotOne):
        return None, failed(f"Answer with {what} (a tensor, an array or a list of numbers), got {_short(answer)}.")
    if values.is_complex() or values.dtype == torch.bool:
        return None, failed(f"Answer with {what} (real numbers), got {values.dtype} values.")
    return values.to(torch.float64), None


def _plain_floats(values: object) -> object:
    """A nested list/tuple of numbers as nested lists of Python floats (0-d tensors and NumPy
    numbers too); raises ``TypeError`` for anything else."""
    if isinstance(values, (list, tuple)):
        return [_plain_floats(v) for v in values]
    value = _one_value(values)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"not a real number: {_short(value)}")
    return float(value)


class SetupError(ValueError):
    """A checker called with impossible exercise settings (the notebook's mistake, not the student's)."""


#: Set to True (tests do) to let an unexpected exception inside a checker escape instead of
#: becoming feedback: the property tests then show which checker fails to handle an answer.
STRICT = False


def checker(fn: Callable[..., Feedback]) -> Callable[..., Feedback]:
    """Decorator: whatever happens inside the checker, return a :class:`Feedback`.

    An exception the checker did not foresee becomes ❌ feedback that names it (a checker never
    raises at a student), except :class:`SetupError` — a wrong exercise setting — and Ctrl-C.
    The whole check runs under :func:`time_limit` (:data:`CHECK_TIME_LIMIT`), so student code
    a checker calls directly (a module's ``forward``, a test inside a loop) cannot hang it either.
    """

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> Feedback:
        try:
            with time_limit(CHECK_TIME_LIMIT):
                result = fn(*args, **kwargs)
        except TimeLimitExceeded as err:
            return too_slow(None, err.seconds)
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
