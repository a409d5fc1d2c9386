"""The single records writer on Cassandra: a commit as LOGGED batches, records before their events.

A commit's statements go in order — each record's rows (document, request-id row, envelope-index row, new
listing rows), then the events in sequence order, then this epoch's head row and the positions of the
inputs the commit covers — packed into LOGGED batches of at most :data:`BATCH_BYTES` (Cassandra refuses
batches above ``batch_size_fail_threshold``, 50 KiB by default in ``cassandra.yaml``; the warning threshold
is lower). A record's rows never straddle two batches, and the row counts of the listing buckets a batch
adds to travel in that batch, so counts and listing rows change together. Batches are sent one after the
other, each once the previous one was acknowledged, so across batches an event is never visible before
the record state it reports. Inside one batch Cassandra applies the partitions in no particular order
(atomic, not isolated): a reader may see the head row, or a later event, before an event of the same
batch; every event therefore carries its predecessor's time and the head row its last event's, and
readers stop before such an event instead of reporting a gap (:mod:`msgstore.replay`). A typical commit
(one record, a few events) is one batch, atomic as a whole; a crash between the batches of a large commit
leaves record states whose events were not written — the caller's retry (idempotent upserts) writes them
under new sequences.

Payloads go first, outside the batches (:mod:`msgstore.cassandra.payloads`). Fencing: see
:mod:`msgstore.cassandra.records`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from msgstore.allocation import StoredEvent, allocate
from msgstore.cassandra.listings import SUBSCRIPTION, TOPIC, Listings
from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.session import Cql
from msgstore.codec import encode_health, encode_record, encode_subscription
from msgstore.protocol import Committed
from msgstore.sequencing import bucket_of
from msgstore.settings import StoreSettings, check_lease
from msgstore.types import Event, EventDraft, Lease, Record, Subscription

__all__ = ["BATCH_BYTES", "CassandraRecordWriter"]

#: Budget of one LOGGED batch, estimated from its values: well below the 50 KiB fail threshold.
BATCH_BYTES = 24 * 1024
Stmt = tuple[str, tuple[Any, ...]]
Slot = tuple[str, str, int]  # (listing kind, key, bucket)
_LISTING = {
    TOPIC: "INSERT INTO {ks}.records_by_topic (content_topic, bucket, created_at, message_hash) "
    "VALUES (?, ?, ?, ?) USING TTL ?",
    SUBSCRIPTION: "INSERT INTO {ks}.records_by_subscription (subscription_id, bucket, created_at, "
    "message_hash) VALUES (?, ?, ?, ?) USING TTL ?",
}


def _size(stmt: Stmt) -> int:
    return 64 + sum(len(v) for v in stmt[1] if isinstance(v, bytes | str))


def _event_row(stored: StoredEvent, ttl: int) -> Stmt:
    e = stored.event
    return (
        "INSERT INTO {ks}.events (bucket, seq, prev, prev_at, type, emitted_at, message_hash, body) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        (
            bucket_of(e.sequence),
            e.sequence,
            stored.prev,
            stored.prev_at,
            int(e.type),
            e.emitted_at,
            None if e.record is None else e.record.message_hash,
            _event_body(e),
            ttl,
        ),
    )


def _event_body(event: Event) -> bytes:
    if event.record is not None:
        return encode_record(event.record)
    assert event.health is not None  # allocate() gives every event one of the two
    return encode_health(event.health)


class CassandraRecordWriter:
    """The :class:`~msgstore.protocol.RecordWriter` on Cassandra."""

    def __init__(
        self,
        cql: Cql,
        payloads: Payloads,
        listings: Listings,
        settings: StoreSettings,
        lease: Lease,
        next_sequence: int,
        last_event: int,
        last_event_at: float | None = None,
    ) -> None:
        self._cql = cql
        self._payloads = payloads
        self._listings = listings
        self._settings = settings
        self.lease = lease
        self._next = next_sequence
        self._last_event = last_event
        self._last_event_at = last_event_at
        self._counts: dict[Slot, int] = {}  # rows per listing bucket, as last written by this writer

    def update_lease(self, lease: Lease) -> None:
        """Adopt a renewal of the same lease."""
        if (lease.name, lease.owner, lease.epoch) != (self.lease.name, self.lease.owner, self.lease.epoch):
            raise ValueError("a writer keeps its lease; a new epoch needs a new writer")
        self.lease = lease

    def _ttl(self, created_at: float, now: float) -> int:
        expiry = self._settings.record_expiry(created_at)
        return 0 if expiry is None else max(1, int(expiry - now) + 1)

    async def _count(self, slot: Slot) -> int:
        if slot not in self._counts:
            rows = await self._cql.rows(
                "SELECT rows FROM {ks}.record_buckets WHERE kind = ? AND key = ? AND bucket = ?",
                slot,
                "read count",
            )
            self._counts[slot] = (rows[0][0] or 0) if rows else 0
        return self._counts[slot]

    def _record_rows(self, r: Record, prev: Record | None, now: float) -> tuple[list[Stmt], list[Slot]]:
        ttl = self._ttl(r.created_at, now)
        bucket = self._settings.record_bucket_of(r.created_at)
        stmts: list[Stmt] = [
            (
                "INSERT INTO {ks}.records (message_hash, created_at, revision, body) "
                "VALUES (?, ?, ?, ?) USING TTL ?",
                (r.message_hash, r.created_at, r.revision, encode_record(r), ttl),
            )
        ]
        if r.request_id and (prev is None or prev.request_id != r.request_id):
            stmts.append(
                (
                    "INSERT INTO {ks}.records_by_request (request_id, message_hash) "
                    "VALUES (?, ?) USING TTL ?",
                    (r.request_id, r.message_hash, ttl),
                )
            )
        if r.envelope_hash and (prev is None or prev.envelope_hash != r.envelope_hash):
            stmts.append(
                (
                    "INSERT INTO {ks}.records_by_envelope (envelope_hash, message_hash) VALUES (?, ?) "
                    "USING TTL ?",
                    (r.envelope_hash, r.message_hash, ttl),
                )
            )
        known = set(prev.subscription_ids) if prev else set()
        new = [] if prev else [(TOPIC, r.message.content_topic)]
        new += [(SUBSCRIPTION, s) for s in dict.fromkeys(r.subscription_ids) if s not in known]
        stmts += [(_LISTING[kind], (key, bucket, r.created_at, r.message_hash, ttl)) for kind, key in new]
        return stmts, [(kind, key, bucket) for kind, key in new]

    async def _flush(self, stmts: list[Stmt], slots: list[Slot], now: float) -> None:
        check_lease(self.lease, self._settings.lease_margin, now)  # before every batch, not only the first
        counts: dict[Slot, int] = {}
        for slot in slots:
            counts[slot] = counts.get(slot, await self._count(slot)) + 1
        for (kind, key, bucket), rows in counts.items():
            end = (bucket + 1) * self._settings.record_bucket
            stmts.append(
                (
                    "INSERT INTO {ks}.record_buckets (kind, key, bucket, rows) "
                    "VALUES (?, ?, ?, ?) USING TTL ?",
                    (kind, key, bucket, rows, self._ttl(end, now)),
                )
            )
        if stmts:
            await self._cql.logged(stmts, "commit records")
        self._counts.update(counts)

    async def commit(
        self,
        records: Sequence[Record],
        events: Sequence[EventDraft],
        *,
        now: float,
        positions: Mapping[str, bytes] | None = None,
    ) -> Committed:
        """Records, their listing rows and their events, in as few logged batches as fit; the inputs'
        positions in the last one, with the head row."""
        check_lease(self.lease, self._settings.lease_margin, now)
        position_rows: list[Stmt] = [
            ("INSERT INTO {ks}.positions (name, value, updated_at) VALUES (?, ?, ?)", (name, value, now))
            for name, value in (positions or {}).items()
        ]
        if not records and not events:
            await self._flush(position_rows, [], now)
            return Committed([], [])
        previous = await self._listings.records([r.message_hash for r in records], payloads=False)
        before = {r.message_hash: r for r in previous}
        fixed = [
            dataclasses.replace(r, created_at=before[r.message_hash].created_at)
            if r.message_hash in before
            else r
            for r in records
        ]
        plan = allocate(
            self.lease,
            fixed,
            events,
            next_sequence=self._next,
            last_event=self._last_event,
            now=now,
            last_event_at=self._last_event_at,
        )
        await self._payloads.put(
            [(r.message_hash, r.message.payload) for r in plan.records if r.message_hash not in before]
        )
        units: list[tuple[list[Stmt], list[Slot]]] = [
            self._record_rows(r, before.get(r.message_hash), now) for r in plan.records
        ]
        # the row counts of every listing bucket this commit adds to, read at once rather than one round
        # trip per bucket as the batches are packed (seeding 1 M records: ~100 → see docs/benchmarks.md)
        unknown = {slot for _, unit_slots in units for slot in unit_slots if slot not in self._counts}
        await asyncio.gather(*(self._count(slot) for slot in unknown))
        event_ttl = int(self._settings.event_retention) + 60
        units += [([_event_row(stored, event_ttl)], []) for stored in plan.events]
        tail: list[Stmt] = [
            ("INSERT INTO {ks}.event_buckets (part, bucket) VALUES (0, ?) USING TTL ?", (b, event_ttl))
            for b in sorted({bucket_of(s.event.sequence) for s in plan.events})
        ]
        tail.append(
            (
                "INSERT INTO {ks}.event_heads (part, epoch, last_seq, last_event, last_at) "
                "VALUES (0, ?, ?, ?, ?)",
                (self.lease.epoch, plan.next_sequence - 1, plan.last_event, plan.last_event_at),
            )
        )
        units.append((tail + position_rows, []))
        batch: list[Stmt] = []
        slots: list[Slot] = []
        size = 0
        for stmts, unit_slots in units:
            unit_size = sum(_size(s) for s in stmts) + 96 * len(unit_slots)
            if batch and size + unit_size > BATCH_BYTES:
                await self._flush(batch, slots, now)
                batch, slots, size = [], [], 0
            batch += stmts
            slots += unit_slots
            size += unit_size
        await self._flush(batch, slots, now)
        self._next, self._last_event = plan.next_sequence, plan.last_event
        self._last_event_at = plan.last_event_at
        return Committed(plan.records, [s.event for s in plan.events])

    async def append(self, events: Sequence[EventDraft], *, now: float) -> list[int]:
        """Events that report no record (``health:change``); their sequences."""
        return [e.sequence for e in (await self.commit([], events, now=now)).events]

    async def save_subscription(self, subscription: Subscription, *, now: float) -> None:
        """Upsert a subscription; an ended one ages out with the records."""
        check_lease(self.lease, self._settings.lease_margin, now)
        retention = self._settings.record_retention
        ttl = 0 if subscription.active or retention <= 0 else int(retention)
        await self._cql.execute(
            [
                (
                    "INSERT INTO {ks}.subscriptions (part, subscription_id, created_at, active, body) "
                    "VALUES (0, ?, ?, ?, ?) USING TTL ?",
                    (
                        subscription.subscription_id,
                        subscription.created_at,
                        subscription.active,
                        encode_subscription(subscription),
                        ttl,
                    ),
                )
            ],
            "save subscription",
        )
