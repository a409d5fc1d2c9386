"""Settings for every test tier.

Hypothesis' per-example deadline (200 ms by default) is a timing assertion, and tests here assert behaviour,
not speed (timings live in `make bench`). On the shared 2-core CI machine a first example that creates a
crypto context or warms a cache can take half a second, which failed a correct property test once. The
profile turns the deadline off everywhere instead of test by test.
"""

from __future__ import annotations

import pytest
from hypothesis import settings

# Shared test helpers whose asserts pytest should rewrite. Registered here, before any test directory is
# collected, because tiers import each other's helpers (health's tests start edge peers and archives with the
# edge-peer and history helpers): a registration in a later directory's conftest would come after the import.
pytest.register_assert_rewrite(
    "tests.integration.archive.contract",
    "tests.integration.archive.model",
    "tests.integration.edge_peer.edge_peer_support",
    "tests.integration.health.health_support",
    "tests.integration.history.history_support",
    "tests.integration.ingest.ingest_support",
    "tests.integration.send.send_support",
    "tests.integration.subscription.subscription_support",
)

settings.register_profile("mailmesh", deadline=None)
settings.load_profile("mailmesh")
