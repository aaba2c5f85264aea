"""Exercise checkers: one per exercise, each returning :class:`Feedback` that says what is wrong.

One module per notebook (``nb01``, ``nb02``, …); everything is re-exported here.
"""

from . import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08, nb09, nb10, nb11
from ._feedback import Feedback
from .nb01 import *  # noqa: F401,F403
from .nb02 import *  # noqa: F401,F403
from .nb03 import *  # noqa: F401,F403
from .nb04 import *  # noqa: F401,F403
from .nb05 import *  # noqa: F401,F403
from .nb06 import *  # noqa: F401,F403
from .nb07 import *  # noqa: F401,F403
from .nb08 import *  # noqa: F401,F403
from .nb09 import *  # noqa: F401,F403
from .nb10 import *  # noqa: F401,F403
from .nb11 import *  # noqa: F401,F403

__all__ = [
    "Feedback",
    *nb01.__all__,
    *nb02.__all__,
    *nb03.__all__,
    *nb04.__all__,
    *nb05.__all__,
    *nb06.__all__,
    *nb07.__all__,
    *nb08.__all__,
    *nb09.__all__,
    *nb10.__all__,
    *nb11.__all__,
]
