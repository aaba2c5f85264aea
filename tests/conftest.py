"""Shared test settings.

Hypothesis profiles: "dev" (default, quick) and "ci" (more examples, derandomized so
a CI run is repeatable; `python3 course.py test` selects it).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=40, deadline=None)
settings.register_profile(
    "ci", max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
