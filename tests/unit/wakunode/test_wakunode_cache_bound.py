"""The relay cache's byte bound (EDGE_RELAY_CACHE_BYTES): a flood of envelopes evicts, soonest expiry first,
and the cache never holds more than its bound (docs/security.md "Denial of service")."""

from __future__ import annotations

from tests.unit.wakunode.support import envelope
from wakunode.cache import EnvelopeCache


def test_the_cache_stays_within_its_bytes_evicting_the_soonest_expiring() -> None:
    long_lived = [envelope(i, ttl=1000) for i in range(3)]
    short_lived = envelope(9, ttl=10)
    cache = EnvelopeCache(max_bytes=sum(e.size for e in long_lived))
    for env in (long_lived[0], short_lived, long_lived[1]):
        cache.add(env, 1.0, 0)
    _, evicted = cache.add(long_lived[2], 1.0, 0)
    assert [e.envelope.hash for e in evicted] == [short_lived.hash]
    assert short_lived.hash not in cache and all(e.hash in cache for e in long_lived)
    for i in range(100, 200):  # a flood: the bound holds throughout
        cache.add(envelope(i, ttl=500 + i), 1.0, 0)
        assert cache.bytes <= cache.max_bytes
    assert len(cache) == 3
