"""Exercise checkers: one per exercise, each returning :class:`Feedback` that says what is wrong.

One module per notebook (``nb01``, ``nb02``, …); everything is re-exported here.
"""

from ._feedback import Feedback
from .nb01 import *  # noqa: F401,F403
from .nb01 import __all__ as _nb01
from .nb02 import *  # noqa: F401,F403
from .nb02 import __all__ as _nb02

__all__ = ["Feedback", *_nb01, *_nb02]
