"""Records, subscriptions and the event log on SQLite, and the single writer that changes them."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dbkit.sqlite.migrations import in_transaction
from msgstore.allocation import allocate
from msgstore.codec import (
    decode_health,
    decode_record,
    decode_subscription,
    encode_health,
    encode_record,
    encode_subscription,
)
from msgstore.errors import LeaseLost
from msgstore.paging import window
from msgstore.protocol import Committed
from msgstore.replay import event_page
from msgstore.sequencing import first_sequence
from msgstore.settings import check_lease
from msgstore.sqlite.leases import lease_is_current
from msgstore.sqlite.outbox import put_payload
from msgstore.sqlite.schema import ENVELOPE_KEY
from msgstore.types import Event, EventDraft, EventType, Gap, Lease, Record, Subscription

if TYPE_CHECKING:
    from msgstore.sqlite.store import SqliteMsgStore

__all__ = ["SqliteRecordWriter", "SqliteRecords"]

_RECORD = "SELECT r.body, p.payload FROM records r JOIN payloads p ON p.message_hash = r.message_hash "
#: The statements of the record reads, by name (their query plans are checked by the SQLite tests: each must
#: search an index; a scan of the records is a full read of the file).
BY_HASH = _RECORD + "WHERE r.message_hash = ?"
#: ``request_id != ''`` repeats the partial index's condition (``records_request``): without it the planner
#: cannot prove that ``?`` is not empty and scans every record (1 M records: seconds per call).
BY_REQUEST = _RECORD + "WHERE r.request_id = ? AND r.request_id != '' LIMIT 1"
_HEAD = "SELECT coalesce(max(last_seq), 0), coalesce(max(last_event), 0) FROM event_heads"
#: A listing page: the keys are paged on the covering index alone (OFFSET passes index entries, not record
#: documents and payloads), then only the page's rows are read.
_PAGE = (
    "SELECT r.body, p.payload FROM ({keys}) k JOIN records r ON r.message_hash = k.message_hash "
    "JOIN payloads p ON p.message_hash = k.message_hash ORDER BY k.created_at, k.message_hash"
)
TOPIC_PAGE = _PAGE.format(
    keys="SELECT message_hash, created_at FROM records WHERE content_topic = ? "
    "ORDER BY created_at, message_hash LIMIT ? OFFSET ?"
)
SUBSCRIPTION_PAGE = _PAGE.format(
    keys="SELECT message_hash, created_at FROM records_by_subscription WHERE subscription_id = ? "
    "ORDER BY created_at, message_hash LIMIT ? OFFSET ?"
)
BY_ENVELOPES = _RECORD + f"WHERE {ENVELOPE_KEY} IN ({{marks}})"
_IN_CHUNK = 500  # below SQLite's default limit of 999 bound parameters per statement (before 3.32)


class SqliteRecords:
    """The :class:`~msgstore.protocol.RecordStore` of a :class:`SqliteMsgStore`."""

    def __init__(self, store: SqliteMsgStore) -> None:
        self._store = store

    async def writer(self, lease: Lease, *, now: float) -> SqliteRecordWriter:
        """A writer numbering above everything readable and above the lease epoch's floor."""
        check_lease(lease, self._store.settings.lease_margin, now)

        def job(conn: sqlite3.Connection) -> tuple[int, int]:
            last_seq, last_event = conn.execute(_HEAD).fetchone()
            top_event = conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
            top_rev = conn.execute("SELECT coalesce(max(revision), 0) FROM records").fetchone()[0]
            return max(last_seq, top_event, top_rev), max(last_event, top_event)

        greatest, last_event = await self._store.read(job, "read event head")
        return SqliteRecordWriter(self._store, lease, first_sequence(lease.epoch, greatest), last_event)

    async def _records(self, sql: str, params: tuple[Any, ...]) -> list[Record]:
        def job(conn: sqlite3.Connection) -> list[Record]:
            return [decode_record(b, p) for b, p in conn.execute(sql, params)]

        return await self._store.read(job, "read records")

    async def get(self, message_hash: bytes) -> Record | None:
        """The record of ``message_hash``."""
        rows = await self._records(BY_HASH, (message_hash,))
        return rows[0] if rows else None

    async def get_by_request(self, request_id: str) -> Record | None:
        """The record of ``request_id``."""
        if not request_id:
            return None
        rows = await self._records(BY_REQUEST, (request_id,))
        return rows[0] if rows else None

    async def list_by_topic(self, content_topic: str, skip: int | None, take: int | None) -> list[Record]:
        """Records of ``content_topic`` by (created_at, hash)."""
        offset, limit = window(skip, take)
        if limit == 0:
            return []
        return await self._records(TOPIC_PAGE, (content_topic, -1 if limit is None else limit, offset))

    async def list_by_subscription(
        self, subscription_id: str, skip: int | None, take: int | None
    ) -> list[Record]:
        """Records received on ``subscription_id`` by (created_at, hash)."""
        offset, limit = window(skip, take)
        if limit == 0:
            return []
        return await self._records(
            SUBSCRIPTION_PAGE, (subscription_id, -1 if limit is None else limit, offset)
        )

    async def by_envelope(self, envelope_hashes: Sequence[bytes]) -> list[Record]:
        """The records carrying these envelope hashes (index ``records_envelope``)."""
        keys = sorted({h.hex() for h in envelope_hashes if h})
        found: list[Record] = []
        for start in range(0, len(keys), _IN_CHUNK):
            chunk = keys[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            found += await self._records(BY_ENVELOPES.format(marks=marks), tuple(chunk))
        return found

    async def position(self, name: str) -> bytes | None:
        """The resume position committed under ``name``."""

        def job(conn: sqlite3.Connection) -> bytes | None:
            row = conn.execute("SELECT value FROM positions WHERE name = ?", (name,)).fetchone()
            return None if row is None else bytes(row[0])

        return await self._store.read(job, "read position")

    async def get_subscription(self, subscription_id: str) -> Subscription | None:
        """One subscription."""
        subs = await self._subscriptions("WHERE subscription_id = ?", (subscription_id,))
        return subs[0] if subs else None

    async def list_subscriptions(self, *, active_only: bool = True) -> list[Subscription]:
        """Subscriptions by (created_at, id)."""
        where = "WHERE active = 1 " if active_only else ""
        return await self._subscriptions(where + "ORDER BY created_at, subscription_id", ())

    async def _subscriptions(self, where: str, params: tuple[Any, ...]) -> list[Subscription]:
        def job(conn: sqlite3.Connection) -> list[Subscription]:
            return [
                decode_subscription(b)
                for (b,) in conn.execute("SELECT body FROM subscriptions " + where, params)
            ]

        return await self._store.read(job, "read subscriptions")

    async def events_after(self, sequence: int, limit: int, *, now: float) -> list[Event] | Gap:
        """Retained events after ``sequence`` (emitted within the retention window), or a Gap."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        cutoff = now - self._store.settings.event_retention

        def job(conn: sqlite3.Connection) -> list[Event] | Gap:
            last_event = conn.execute(_HEAD).fetchone()[1]
            rows = conn.execute(
                "SELECT e.seq, e.prev, e.type, e.emitted_at, e.body, p.payload FROM events e "
                "LEFT JOIN payloads p ON p.message_hash = e.message_hash "
                "WHERE e.seq > ? AND e.emitted_at > ? ORDER BY e.seq LIMIT ?",
                (sequence, cutoff, limit),
            ).fetchall()
            # One transaction is visible whole or not at all: a missing event can only be gone (no times).
            return event_page(
                sequence, [(_event(*row[:1], *row[2:]), row[1], None) for row in rows], last_event
            )

        return await self._store.read(job, "read events")

    async def head(self) -> int:
        """The greatest sequence allocated."""

        def job(conn: sqlite3.Connection) -> int:
            return int(conn.execute(_HEAD).fetchone()[0])

        return await self._store.read(job, "read event head")


def _event(seq: int, type_: int, emitted_at: float, body: bytes, payload: bytes | None) -> Event:
    kind = EventType(type_)
    if kind is EventType.HEALTH_CHANGE:
        return Event(seq, kind, emitted_at, health=decode_health(body))
    return Event(seq, kind, emitted_at, record=decode_record(body, payload or b""))


class SqliteRecordWriter:
    """The :class:`~msgstore.protocol.RecordWriter` on SQLite: each commit is one transaction that also
    checks, inside it, that the lease row still names this writer's epoch (a strict fence here)."""

    def __init__(self, store: SqliteMsgStore, lease: Lease, next_sequence: int, last_event: int) -> None:
        self._store = store
        self.lease = lease
        self._next = next_sequence
        self._last_event = last_event

    def update_lease(self, lease: Lease) -> None:
        """Adopt a renewal of the same lease."""
        if (lease.name, lease.owner, lease.epoch) != (self.lease.name, self.lease.owner, self.lease.epoch):
            raise ValueError("a writer keeps its lease; a new epoch needs a new writer")
        self.lease = lease

    def _fence(self, conn: sqlite3.Connection, now: float) -> None:
        check_lease(self.lease, self._store.settings.lease_margin, now)
        if not lease_is_current(conn, self.lease):
            raise LeaseLost(self.lease.name, self.lease.epoch, "taken over by another writer")

    async def commit(
        self,
        records: Sequence[Record],
        events: Sequence[EventDraft],
        *,
        now: float,
        positions: Mapping[str, bytes] | None = None,
    ) -> Committed:
        """Records, their index rows, their events and the inputs' positions in one transaction."""
        check_lease(self.lease, self._store.settings.lease_margin, now)
        settings = self._store.settings

        def job(conn: sqlite3.Connection) -> Committed:
            def body() -> Committed:
                self._fence(conn, now)
                conn.executemany(
                    "INSERT INTO positions (name, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (name) "
                    "DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                    [(name, value, now) for name, value in (positions or {}).items()],
                )
                if not records and not events:
                    return Committed([], [])
                fixed = [_keep_created(conn, r) for r in records]
                plan = allocate(
                    self.lease, fixed, events, next_sequence=self._next, last_event=self._last_event, now=now
                )
                for record in plan.records:
                    expires = settings.record_expiry(record.created_at)
                    put_payload(conn, record.message_hash, record.message.payload, expires)
                    conn.execute(
                        "INSERT INTO records (message_hash, request_id, content_topic, created_at, revision, "
                        "expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (message_hash) DO UPDATE "
                        "SET request_id = excluded.request_id, revision = excluded.revision, "
                        "body = excluded.body",
                        (
                            record.message_hash,
                            record.request_id,
                            record.message.content_topic,
                            record.created_at,
                            record.revision,
                            expires,
                            encode_record(record),
                        ),
                    )
                    conn.executemany(
                        "INSERT OR IGNORE INTO records_by_subscription (subscription_id, created_at, "
                        "message_hash, expires_at) VALUES (?, ?, ?, ?)",
                        [
                            (s, record.created_at, record.message_hash, expires)
                            for s in record.subscription_ids
                        ],
                    )
                for stored in plan.events:
                    e = stored.event
                    doc = _event_doc(e)
                    conn.execute(
                        "INSERT INTO events (seq, prev, type, emitted_at, message_hash, body) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            e.sequence,
                            stored.prev,
                            int(e.type),
                            e.emitted_at,
                            None if e.record is None else e.record.message_hash,
                            doc,
                        ),
                    )
                conn.execute(
                    "INSERT INTO event_heads (epoch, last_seq, last_event) VALUES (?, ?, ?) "
                    "ON CONFLICT (epoch) DO UPDATE SET last_seq = excluded.last_seq, "
                    "last_event = excluded.last_event",
                    (self.lease.epoch, plan.next_sequence - 1, plan.last_event),
                )
                self._next, self._last_event = plan.next_sequence, plan.last_event
                return Committed(plan.records, [s.event for s in plan.events])

            return in_transaction(conn, body)

        return await self._store.write(job, "commit records")

    async def append(self, events: Sequence[EventDraft], *, now: float) -> list[int]:
        """Events that report no record (``health:change``); their sequences."""
        return [e.sequence for e in (await self.commit([], events, now=now)).events]

    async def save_subscription(self, subscription: Subscription, *, now: float) -> None:
        """Upsert a subscription; an ended one ages out with the records."""
        retention = self._store.settings.record_retention
        expires = (
            None if subscription.active or retention <= 0 else (subscription.ended_at or now) + retention
        )

        def job(conn: sqlite3.Connection) -> None:
            def body() -> None:
                self._fence(conn, now)
                conn.execute(
                    "INSERT INTO subscriptions (subscription_id, created_at, active, expires_at, body) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (subscription_id) DO UPDATE SET "
                    "active = excluded.active, expires_at = excluded.expires_at, body = excluded.body",
                    (
                        subscription.subscription_id,
                        subscription.created_at,
                        int(subscription.active),
                        expires,
                        encode_subscription(subscription),
                    ),
                )

            in_transaction(conn, body)

        await self._store.write(job, "save subscription")


def _event_doc(event: Event) -> bytes:
    if event.record is not None:
        return encode_record(event.record)
    assert event.health is not None  # allocate() builds every event with one of the two
    return encode_health(event.health)


def _keep_created(conn: sqlite3.Connection, record: Record) -> Record:
    """``record`` with the created_at already stored for it: the listing order never changes."""
    row = conn.execute(
        "SELECT created_at FROM records WHERE message_hash = ?", (record.message_hash,)
    ).fetchone()
    if row is None or row[0] == record.created_at:
        return record
    return dataclasses.replace(record, created_at=row[0])
