"""The feedback object every exercise checker returns."""

from __future__ import annotations

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


def attempt(label: str, fn: Callable[..., T], *args: object) -> tuple[T | None, Feedback | None]:
    """Run the student's code: ``(result, None)``, or ``(None, feedback)`` when it is still a
    placeholder (``NotImplementedError``) or raises — the feedback shows their error briefly."""
    try:
        return fn(*args), None
    except NotImplementedError:
        return None, not_done()
    except Exception as err:
        return None, failed(f"{label} raised {type(err).__name__}: {err}")
