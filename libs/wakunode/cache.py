"""The relay's seen/expiry cache: envelopes by hash, in acceptance order, pruned as they expire
(protocol-notes §1.5, §3.8).

geth/status-go keep ``envelopes map[hash]*Envelope`` plus ``expirations map[expiry]set`` and re-scan the
whole map for every peer every 300 ms. Here each entry also gets a sequence number, and the forwarder keeps a
per-peer high-water mark, so a round only looks at entries added since that peer's last round (a peer that
changes its PoW/bloom/topic interest is re-scanned from the start; its known-set prevents duplicates).

Memory: bounded by ``max_bytes`` (sum of ``size()``); when a new envelope does not fit, the soonest-expiring
entries are evicted first — they would be pruned soonest anyway.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field

from wakucodec.envelope import Envelope

__all__ = ["CachedEnvelope", "EnvelopeCache"]


@dataclass(slots=True, eq=False)
class CachedEnvelope:
    """One cached envelope and what the forwarder needs to filter it quickly."""

    envelope: Envelope
    """The envelope (its ``raw`` bytes are what is forwarded)."""
    pow: float
    """PoW computed on acceptance (compared with each peer's requirement, §3.8)."""
    bloom: int
    """The topic's bloom as an integer, for subset tests."""
    seq: int
    """Position in acceptance order (strictly increasing)."""
    alive: bool = True
    """False once pruned or evicted."""
    holders: set[int] = field(default_factory=set)
    """Session ids of the peers known to have it (it came from them or was sent to them): status-go's
    per-peer known-sets, kept on the envelope so they vanish with it when it is pruned."""
    delivered: bool | None = None
    """Whether the node's :class:`~wakunode.ports.EnvelopeSink` took it: None while it is being handed over,
    True once taken, False when refused — then the next copy from any peer is handed over again. Only
    envelopes with True are confirmed without an error (§3.6)."""


class EnvelopeCache:
    """Envelopes by hash, in sequence order, with expiry pruning and a byte bound."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._by_hash: dict[bytes, CachedEnvelope] = {}
        self._seqs: list[int] = []  # ascending; parallel to _order
        self._order: list[CachedEnvelope] = []
        self._expiries: list[tuple[int, int, bytes]] = []  # heap of (expiry, seq, hash)
        self._dead = 0
        self._next_seq = 1
        #: Sum of ``envelope.size`` of live entries.
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._by_hash)

    def __contains__(self, envelope_hash: bytes) -> bool:
        return envelope_hash in self._by_hash

    def get(self, envelope_hash: bytes) -> CachedEnvelope | None:
        """The live entry for a hash, if cached."""
        return self._by_hash.get(envelope_hash)

    @property
    def last_seq(self) -> int:
        """Sequence number of the newest entry (0 when none was ever added)."""
        return self._next_seq - 1

    def add(self, env: Envelope, pow_value: float, bloom: int) -> tuple[CachedEnvelope, list[CachedEnvelope]]:
        """Cache a new envelope (the caller checked it is not cached); return it and the entries evicted."""
        evicted: list[CachedEnvelope] = []
        while self._by_hash and self.bytes + env.size > self.max_bytes:
            victim = self._pop_soonest()
            if victim is not None:
                evicted.append(victim)
        entry = CachedEnvelope(env, pow_value, bloom, self._next_seq)
        self._next_seq += 1
        self._by_hash[env.hash] = entry
        self._seqs.append(entry.seq)
        self._order.append(entry)
        heapq.heappush(self._expiries, (env.expiry, entry.seq, env.hash))
        self.bytes += env.size
        return entry, evicted

    def _remove(self, entry: CachedEnvelope) -> None:
        entry.alive = False
        del self._by_hash[entry.envelope.hash]
        self.bytes -= entry.envelope.size
        self._dead += 1

    def _pop_soonest(self) -> CachedEnvelope | None:
        _, seq, envelope_hash = heapq.heappop(self._expiries)
        entry = self._by_hash.get(envelope_hash)
        if entry is None or entry.seq != seq:
            return None
        self._remove(entry)
        return entry

    def prune(self, now: int) -> list[CachedEnvelope]:
        """Remove every envelope with ``Expiry < now`` (status-go ``expire``); return them."""
        removed: list[CachedEnvelope] = []
        while self._expiries and self._expiries[0][0] < now:
            entry = self._pop_soonest()
            if entry is not None:
                removed.append(entry)
        if self._dead > 1024 and self._dead * 2 > len(self._order):
            self._compact()
        return removed

    def _compact(self) -> None:
        self._order = [e for e in self._order if e.alive]
        self._seqs = [e.seq for e in self._order]
        self._dead = 0

    def since(self, seq: int) -> Iterator[CachedEnvelope]:
        """Live entries with a sequence number above ``seq``, oldest first.

        Safe against concurrent additions (they are yielded too) but not against compaction, so callers must
        not await while iterating.
        """
        order = self._order
        for index in range(bisect.bisect_right(self._seqs, seq), len(order)):
            entry = order[index]
            if entry.alive:
                yield entry
