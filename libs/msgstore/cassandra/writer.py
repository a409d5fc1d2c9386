"""The single records writer on Cassandra: a commit's records in LOGGED batches sent at once, then its events.

A commit goes in three steps, each started once the previous one was acknowledged:

1. the payloads of new records (:mod:`msgstore.cassandra.payloads`), outside the batches, idempotent;
2. the records: each record's rows — document, request-id row, envelope-index row, new listing rows —
   in one LOGGED batch (a record's rows never straddle two batches), batches of at most
   :data:`BATCH_BYTES` (Cassandra refuses batches above ``batch_size_fail_threshold``, 50 KiB by default in
   ``cassandra.yaml``), all sent at once within the bridge's in-flight bound. The records are independent
   of each other, so the order in which these batches land does not matter; one after the other they ran at
   ~70 ms each, 150–280 records/s (docs/benchmarks.md "messaging");
3. the events in sequence order, then this epoch's head row and the positions of the inputs the commit
   covers, in LOGGED batches one after the other as before: no event is visible before the record state it
   reports, and the positions never run ahead of the data.

Inside one batch Cassandra applies the partitions in no particular order (atomic, not isolated): a reader
may see the head row, or a later event, before an event of the same batch; every event therefore carries
its predecessor's time and the head row its last event's, and readers stop before such an event instead of
reporting a gap (:mod:`msgstore.replay`). A typical commit (one record, a few events) is one batch of
records and one of events — two round trips where it used to be one batch, in which a reader could see an
event before its record's document; now it never can. A crash between the steps leaves record states whose
events were not written — the caller's retry (idempotent upserts) writes them under new sequences.

**Bucket counts** (``record_buckets``, the rows per listing bucket that skip/take plans from) are absolute
values kept by this writer: each bucket's new count rides in the batch of the commit's last record adding to
it, so it changes atomically with that record's rows. A record counts as new in a bucket when its previous
document (read at the start of the commit) did not list it there, so a count is exact only if it moves with
the rows it counts. When step 2 fails, some batches may have applied (a timeout may still apply) while a
count's batch did not, or the reverse; a restarted writer cannot know which. So the writer never trusts a
stored count: the first time it adds to a bucket — as a new writer, or again after a failed commit — it
counts the bucket's rows (``SELECT COUNT(*)`` of the one listing partition, before writing), and from there
on adds what it writes. A record whose batch did not apply has no document, so the caller's retry adds it
again and the count ends exact (tests/integration/msgstore ``test_bucket_counts_survive_…``).

Fencing: see :mod:`msgstore.cassandra.records`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from msgstore.allocation import StoredEvent, allocate
from msgstore.cassandra.listings import SUBSCRIPTION, TABLES, TOPIC, Listings
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
_GROUP = 50  # listing partitions per recount read (an IN over the partition key)
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

    async def _recount(self, slots: set[Slot]) -> dict[Slot, int]:
        """The rows these listing buckets hold now: the bases of this writer's counts (see the module doc);
        ``_GROUP`` buckets of one kind and time bucket per read."""
        keys: dict[tuple[str, int], list[str]] = {}
        for kind, key, bucket in sorted(slots):
            keys.setdefault((kind, bucket), []).append(key)
        reads = [
            (kind, bucket, names[i : i + _GROUP])
            for (kind, bucket), names in keys.items()
            for i in range(0, len(names), _GROUP)
        ]

        async def count(kind: str, bucket: int, names: list[str]) -> list[tuple[Slot, int]]:
            table, column = TABLES[kind]
            rows = await self._cql.rows(
                f"SELECT {column}, COUNT(*) FROM {{ks}}.{table} WHERE {column} IN ? AND bucket = ? "
                f"GROUP BY {column}, bucket",
                (names, bucket),
                "count listing rows",
            )
            return [((kind, key, bucket), int(n)) for key, n in rows]

        found = dict(pair for part in await asyncio.gather(*(count(*r) for r in reads)) for pair in part)
        return {slot: found.get(slot, 0) for slot in slots}

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

    async def _flush(self, stmts: list[Stmt], now: float) -> None:
        check_lease(self.lease, self._settings.lease_margin, now)  # before every batch, not only the first
        if stmts:
            await self._cql.logged(stmts, "commit records")

    async def _write_records(self, units: list[tuple[list[Stmt], list[Slot]]], now: float) -> None:
        """Every record's rows, one record never split, in LOGGED batches sent together; each listing
        bucket's new row count rides in the batch of the last record adding to it."""
        last = {slot: i for i, (_, slots) in enumerate(units) for slot in slots}
        counts = {slot: self._counts[slot] for slot in last if slot in self._counts}  # only this commit's
        counts.update(await self._recount(set(last) - set(counts)))
        batches: list[list[Stmt]] = [[]]
        size = 0
        for i, (stmts, slots) in enumerate(units):
            for slot in slots:
                counts[slot] += 1
            mine = [slot for slot in dict.fromkeys(slots) if last[slot] == i]
            rows = stmts + [self._count_row(slot, counts[slot], now) for slot in mine]
            unit_size = sum(_size(s) for s in rows)
            if batches[-1] and size + unit_size > BATCH_BYTES:
                batches.append([])
                size = 0
            batches[-1] += rows
            size += unit_size
        check_lease(self.lease, self._settings.lease_margin, now)
        try:
            await self._cql.logged_many([b for b in batches if b], "commit records")
        except BaseException:
            # some batches may have applied: recount these buckets when next added to
            for slot in last:
                self._counts.pop(slot, None)
            raise
        self._counts.update(counts)

    def _count_row(self, slot: Slot, rows: int, now: float) -> Stmt:
        kind, key, bucket = slot
        end = (bucket + 1) * self._settings.record_bucket
        return (
            "INSERT INTO {ks}.record_buckets (kind, key, bucket, rows) VALUES (?, ?, ?, ?) USING TTL ?",
            (kind, key, bucket, rows, self._ttl(end, now)),
        )

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
            await self._flush(position_rows, now)
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
        await self._write_records(
            [self._record_rows(r, before.get(r.message_hash), now) for r in plan.records], now
        )
        # then, once every record row is acknowledged, the events in order and the tail: one batch after
        # the other, so no event is visible before the record state it reports
        event_ttl = int(self._settings.event_retention) + 60
        units = [[_event_row(stored, event_ttl)] for stored in plan.events]
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
        units.append(tail + position_rows)
        batch: list[Stmt] = []
        size = 0
        for stmts in units:
            unit_size = sum(_size(s) for s in stmts)
            if batch and size + unit_size > BATCH_BYTES:
                await self._flush(batch, now)
                batch, size = [], 0
            batch += stmts
            size += unit_size
        await self._flush(batch, now)
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
