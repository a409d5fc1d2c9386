"""Records, subscriptions and the event log on Cassandra, and their single writer.

A commit is one LOGGED batch: record rows, new listing rows and their bucket counts, the request-id row,
the events, the event-bucket rows and this epoch's head row. Cassandra applies a logged batch completely or
not at all (eventually, through the batchlog), so no reader sees an event whose record change is missing.
Payloads go first, outside the batch (see :mod:`msgstore.cassandra.payloads`).

Fencing: the writer checks its lease (with the safety margin) before each batch and numbers above
``epoch << 40`` (:mod:`msgstore.sequencing`); Cassandra cannot check the lease inside a batch without a
Paxos round, so a deposed writer's batch that lands late is numbered below its successor's instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from msgstore.allocation import allocate
from msgstore.cassandra.listings import SUBSCRIPTION, TOPIC, Listings
from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.session import Cql
from msgstore.codec import (
    decode_health,
    decode_record,
    decode_subscription,
    encode_health,
    encode_record,
    encode_subscription,
)
from msgstore.protocol import Committed
from msgstore.replay import event_page
from msgstore.sequencing import bucket_of, first_sequence
from msgstore.settings import StoreSettings, check_lease
from msgstore.types import Event, EventDraft, EventType, Gap, Lease, Record, Subscription

__all__ = ["CassandraRecordWriter", "CassandraRecords"]

_HEAD = "SELECT last_seq, last_event FROM {ks}.event_heads WHERE part = 0 LIMIT 1"
Stmt = tuple[str, tuple[Any, ...]]


class CassandraRecords:
    """The :class:`~msgstore.protocol.RecordStore` on Cassandra."""

    def __init__(self, cql: Cql, payloads: Payloads, settings: StoreSettings) -> None:
        self._cql = cql
        self._payloads = payloads
        self._settings = settings
        self.listings = Listings(cql, payloads)

    async def _head(self) -> tuple[int, int]:
        rows = await self._cql.rows(_HEAD, (), "read event head")
        return (rows[0][0], rows[0][1]) if rows else (0, 0)

    async def writer(self, lease: Lease, *, now: float) -> CassandraRecordWriter:
        """A writer numbering above the head and above the lease epoch's floor."""
        check_lease(lease, self._settings.lease_margin, now)
        last_seq, last_event = await self._head()
        return CassandraRecordWriter(self, lease, first_sequence(lease.epoch, last_seq), last_event)

    async def get(self, message_hash: bytes) -> Record | None:
        """The record of ``message_hash``."""
        found = await self.listings.records([message_hash])
        return found[0] if found else None

    async def get_by_request(self, request_id: str) -> Record | None:
        """The record of ``request_id``."""
        if not request_id:
            return None
        rows = await self._cql.rows(
            "SELECT message_hash FROM {ks}.records_by_request WHERE request_id = ?",
            (request_id,),
            "read request",
        )
        return await self.get(rows[0][0]) if rows else None

    async def list_by_topic(self, content_topic: str, skip: int | None, take: int | None) -> list[Record]:
        """Records of ``content_topic`` by (created_at, hash)."""
        return await self.listings.page(TOPIC, content_topic, skip, take)

    async def list_by_subscription(
        self, subscription_id: str, skip: int | None, take: int | None
    ) -> list[Record]:
        """Records received on ``subscription_id`` by (created_at, hash)."""
        return await self.listings.page(SUBSCRIPTION, subscription_id, skip, take)

    async def get_subscription(self, subscription_id: str) -> Subscription | None:
        """One subscription."""
        rows = await self._cql.rows(
            "SELECT body FROM {ks}.subscriptions WHERE part = 0 AND subscription_id = ?",
            (subscription_id,),
            "read subscription",
        )
        return decode_subscription(rows[0][0]) if rows else None

    async def list_subscriptions(self, *, active_only: bool = True) -> list[Subscription]:
        """Subscriptions by (created_at, id)."""
        rows = await self._cql.rows(
            "SELECT body FROM {ks}.subscriptions WHERE part = 0", (), "list subscriptions"
        )
        subs = [decode_subscription(b) for (b,) in rows]
        subs.sort(key=lambda s: (s.created_at, s.subscription_id))
        return [s for s in subs if s.active or not active_only]

    async def events_after(self, sequence: int, limit: int, *, now: float) -> list[Event] | Gap:
        """Retained events after ``sequence``, or a Gap."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        cutoff = now - self._settings.event_retention
        _, last_event = await self._head()
        buckets = await self._cql.rows(
            "SELECT bucket FROM {ks}.event_buckets WHERE part = 0 AND bucket >= ?",
            (bucket_of(sequence + 1),),
            "read event buckets",
        )
        found: list[tuple[int, int, int, float, bytes | None, bytes]] = []
        for (bucket,) in buckets:
            rows = await self._cql.rows(
                "SELECT seq, prev, type, emitted_at, message_hash, body FROM {ks}.events "
                "WHERE bucket = ? AND seq > ? LIMIT ?",
                (bucket, sequence, limit),
                "read events",
            )
            found += [tuple(r) for r in rows if r[3] > cutoff]
            if len(found) >= limit:
                break
        found = found[:limit]
        payloads = await self._payloads.get([h for *_, h, _ in found if h is not None])
        stored = [
            (_event(seq, kind, at, body, payloads.get(h or b"")), prev)
            for seq, prev, kind, at, h, body in found
        ]
        return event_page(sequence, stored, last_event)

    async def head(self) -> int:
        """The greatest sequence allocated."""
        return (await self._head())[0]


def _event(seq: int, kind: int, at: float, body: bytes, payload: bytes | None) -> Event:
    type_ = EventType(kind)
    if type_ is EventType.HEALTH_CHANGE:
        return Event(seq, type_, at, health=decode_health(body))
    return Event(seq, type_, at, record=decode_record(body, payload or b""))


class CassandraRecordWriter:
    """The :class:`~msgstore.protocol.RecordWriter` on Cassandra."""

    def __init__(self, store: CassandraRecords, lease: Lease, next_sequence: int, last_event: int) -> None:
        self._store = store
        self._cql = store._cql
        self._settings = store._settings
        self.lease = lease
        self._next = next_sequence
        self._last_event = last_event
        self._counts: dict[tuple[str, str, int], int] = {}

    def update_lease(self, lease: Lease) -> None:
        """Adopt a renewal of the same lease."""
        if (lease.name, lease.owner, lease.epoch) != (self.lease.name, self.lease.owner, self.lease.epoch):
            raise ValueError("a writer keeps its lease; a new epoch needs a new writer")
        self.lease = lease

    async def _previous(self, hashes: list[bytes]) -> dict[bytes, Record]:
        return {r.message_hash: r for r in await self._store.listings.records(hashes)} if hashes else {}

    async def _count(self, kind: str, key: str, bucket: int, added: int) -> int:
        slot = (kind, key, bucket)
        if slot not in self._counts:
            rows = await self._cql.rows(
                "SELECT rows FROM {ks}.record_buckets WHERE kind = ? AND key = ? AND bucket = ?",
                (kind, key, bucket),
                "read count",
            )
            self._counts[slot] = (rows[0][0] or 0) if rows else 0
        return self._counts[slot] + added

    def _ttl(self, created_at: float, now: float) -> int:
        expiry = self._settings.record_expiry(created_at)
        return 0 if expiry is None else max(1, int(expiry - now) + 1)

    async def commit(
        self, records: Sequence[Record], events: Sequence[EventDraft], *, now: float
    ) -> Committed:
        """Records, their listing rows and their events in one logged batch."""
        check_lease(self.lease, self._settings.lease_margin, now)
        before = await self._previous([r.message_hash for r in records])
        fixed = [
            dataclasses.replace(r, created_at=before[r.message_hash].created_at)
            if r.message_hash in before
            else r
            for r in records
        ]
        plan = allocate(
            self.lease, fixed, events, next_sequence=self._next, last_event=self._last_event, now=now
        )
        await self._store._payloads.put(
            [(r.message_hash, r.message.payload) for r in plan.records if r.message_hash not in before]
        )
        stmts: list[Stmt] = []
        added: dict[tuple[str, str, int], int] = {}
        for r in plan.records:
            ttl = self._ttl(r.created_at, now)
            bucket = self._settings.record_bucket_of(r.created_at)
            stmts.append(
                (
                    "INSERT INTO {ks}.records (message_hash, created_at, revision, body) "
                    "VALUES (?, ?, ?, ?) USING TTL ?",
                    (r.message_hash, r.created_at, r.revision, encode_record(r), ttl),
                )
            )
            prev = before.get(r.message_hash)
            if r.request_id and (prev is None or prev.request_id != r.request_id):
                stmts.append(
                    (
                        "INSERT INTO {ks}.records_by_request (request_id, message_hash) "
                        "VALUES (?, ?) USING TTL ?",
                        (r.request_id, r.message_hash, ttl),
                    )
                )
            new_rows: list[tuple[str, str]] = [] if prev else [(TOPIC, r.message.content_topic)]
            known = set(prev.subscription_ids) if prev else set()
            new_rows += [(SUBSCRIPTION, s) for s in dict.fromkeys(r.subscription_ids) if s not in known]
            for kind, key in new_rows:
                table = (
                    "records_by_topic (content_topic"
                    if kind == TOPIC
                    else "records_by_subscription (subscription_id"
                )
                stmts.append(
                    (
                        f"INSERT INTO {{ks}}.{table}, bucket, created_at, message_hash) "
                        "VALUES (?, ?, ?, ?) USING TTL ?",
                        (key, bucket, r.created_at, r.message_hash, ttl),
                    )
                )
                added[(kind, key, bucket)] = added.get((kind, key, bucket), 0) + 1
        counts = {slot: await self._count(*slot, n) for slot, n in added.items()}
        for (kind, key, bucket), n in counts.items():
            end = (bucket + 1) * self._settings.record_bucket
            stmts.append(
                (
                    "INSERT INTO {ks}.record_buckets (kind, key, bucket, rows) "
                    "VALUES (?, ?, ?, ?) USING TTL ?",
                    (kind, key, bucket, n, self._ttl(end, now)),
                )
            )
        event_ttl = int(self._settings.event_retention) + 60
        for stored in plan.events:
            e = stored.event
            body = encode_record(e.record) if e.record is not None else encode_health(e.health)  # type: ignore[arg-type]
            stmts.append(
                (
                    "INSERT INTO {ks}.events (bucket, seq, prev, type, emitted_at, message_hash, body) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?",
                    (
                        bucket_of(e.sequence),
                        e.sequence,
                        stored.prev,
                        int(e.type),
                        e.emitted_at,
                        None if e.record is None else e.record.message_hash,
                        body,
                        event_ttl,
                    ),
                )
            )
        for bucket in sorted({bucket_of(s.event.sequence) for s in plan.events}):
            stmts.append(
                (
                    "INSERT INTO {ks}.event_buckets (part, bucket) VALUES (0, ?) USING TTL ?",
                    (bucket, event_ttl),
                )
            )
        stmts.append(
            (
                "INSERT INTO {ks}.event_heads (part, epoch, last_seq, last_event) VALUES (0, ?, ?, ?)",
                (self.lease.epoch, plan.next_sequence - 1, plan.last_event),
            )
        )
        await self._cql.logged(stmts, "commit records")
        self._counts.update(counts)
        self._next, self._last_event = plan.next_sequence, plan.last_event
        return Committed(plan.records, [s.event for s in plan.events])

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
