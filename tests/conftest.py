"""Settings for every test tier.

Hypothesis' per-example deadline (200 ms by default) is a timing assertion, and tests here assert behaviour,
not speed (timings live in `make bench`). On the shared 2-core CI machine a first example that creates a
crypto context or warms a cache can take half a second, which failed a correct property test once. The
profile turns the deadline off everywhere instead of test by test.
"""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("mailmesh", deadline=None)
settings.load_profile("mailmesh")
