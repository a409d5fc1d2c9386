"""Records, subscriptions and the event log on Cassandra: the reads, and the writer's start.

Fencing: a writer checks its lease (with the safety margin) before each commit and numbers above
``epoch << 40`` (:mod:`msgstore.sequencing`). Cassandra cannot check the lease inside a batch without a
Paxos round per commit, so a deposed writer's batch that lands late is numbered below its successor's
instead of being refused. The writer itself is :mod:`msgstore.cassandra.writer`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from msgstore.cassandra.listings import SUBSCRIPTION, TOPIC, Listings
from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.session import Cql
from msgstore.cassandra.writer import CassandraRecordWriter
from msgstore.codec import (
    decode_health,
    decode_record,
    decode_subscription,
)
from msgstore.replay import event_page
from msgstore.sequencing import bucket_of, first_sequence
from msgstore.settings import StoreSettings, check_lease
from msgstore.types import Event, EventType, Gap, Lease, Record, Subscription

__all__ = ["CassandraRecords"]

_HEAD = "SELECT last_seq, last_event, last_at FROM {ks}.event_heads WHERE part = 0 LIMIT 1"
_GROUP = 50  # keys per IN read
Stmt = tuple[str, tuple[Any, ...]]


class CassandraRecords:
    """The :class:`~msgstore.protocol.RecordStore` on Cassandra."""

    def __init__(self, cql: Cql, payloads: Payloads, settings: StoreSettings) -> None:
        self._cql = cql
        self._payloads = payloads
        self._settings = settings
        self.listings = Listings(cql, payloads)

    async def _head(self) -> tuple[int, int, float | None]:
        rows = await self._cql.rows(_HEAD, (), "read event head")
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else (0, 0, None)

    async def writer(self, lease: Lease, *, now: float) -> CassandraRecordWriter:
        """A writer numbering above the head and above the lease epoch's floor."""
        check_lease(lease, self._settings.lease_margin, now)
        last_seq, last_event, last_at = await self._head()
        return CassandraRecordWriter(
            self._cql,
            self._payloads,
            self.listings,
            self._settings,
            lease,
            first_sequence(lease.epoch, last_seq),
            last_event,
            last_at,
        )

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

    async def by_envelope(self, envelope_hashes: Sequence[bytes]) -> list[Record]:
        """The records carrying these envelope hashes (``records_by_envelope``)."""
        keys = sorted({h for h in envelope_hashes if h})
        groups = [keys[i : i + _GROUP] for i in range(0, len(keys), _GROUP)]
        found = await asyncio.gather(
            *(
                self._cql.rows(
                    "SELECT message_hash FROM {ks}.records_by_envelope WHERE envelope_hash IN ?",
                    (g,),
                    "read envelope index",
                )
                for g in groups
            )
        )
        hashes = list(dict.fromkeys(h for rows in found for (h,) in rows))
        return await self.listings.records(hashes)

    async def position(self, name: str) -> bytes | None:
        """The resume position committed under ``name``."""
        rows = await self._cql.rows(
            "SELECT value FROM {ks}.positions WHERE name = ?", (name,), "read position"
        )
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

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
        _, last_event, last_at = await self._head()  # before the events: see msgstore.replay
        buckets = await self._cql.rows(
            "SELECT bucket FROM {ks}.event_buckets WHERE part = 0 AND bucket >= ?",
            (bucket_of(sequence + 1),),
            "read event buckets",
        )
        found: list[tuple[int, int, float | None, int, float, bytes | None, bytes]] = []
        for (bucket,) in buckets:
            rows = await self._cql.rows(
                "SELECT seq, prev, prev_at, type, emitted_at, message_hash, body FROM {ks}.events "
                "WHERE bucket = ? AND seq > ? LIMIT ?",
                (bucket, sequence, limit),
                "read events",
            )
            found += [tuple(r) for r in rows if r[4] > cutoff]
            if len(found) >= limit:
                break
        found = found[:limit]
        payloads = await self._payloads.get([h for *_, h, _ in found if h is not None])
        stored = [
            (_event(seq, kind, at, body, payloads.get(h or b"")), prev, prev_at)
            for seq, prev, prev_at, kind, at, h, body in found
        ]
        return event_page(sequence, stored, last_event, last_at=last_at, cutoff=cutoff)

    async def head(self) -> int:
        """The greatest sequence allocated."""
        return (await self._head())[0]


def _event(seq: int, kind: int, at: float, body: bytes, payload: bytes | None) -> Event:
    type_ = EventType(kind)
    if type_ is EventType.HEALTH_CHANGE:
        return Event(seq, type_, at, health=decode_health(body))
    return Event(seq, type_, at, record=decode_record(body, payload or b""))
