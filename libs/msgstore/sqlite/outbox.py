"""The send service's outbox on SQLite: requests, the open-request index, per-shard change logs."""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import TYPE_CHECKING, Any

from dbkit.sqlite.migrations import in_transaction
from msgstore.codec import decode_entry, encode_entry
from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.paging import window
from msgstore.replay import merge_changes
from msgstore.settings import check_lease
from msgstore.sharding import ResumePosition, lease_name, shard_of
from msgstore.sqlite.leases import lease_is_current
from msgstore.sqlite.schema import FINAL_STATES
from msgstore.types import Lease, OutboxChange, OutboxChanges, OutboxEntry, OutboxFilter

if TYPE_CHECKING:
    from msgstore.sqlite.store import SqliteMsgStore

__all__ = ["SqliteOutbox", "put_payload"]

_ENTRY = (
    "SELECT o.body, p.payload FROM outbox o JOIN payloads p ON p.message_hash = o.message_hash "
    "WHERE o.expires_at > ? "
)


def put_payload(
    conn: sqlite3.Connection, message_hash: bytes, payload: bytes, expires_at: float | None
) -> None:
    """Store a message payload once; a later writer can only lengthen its life (NULL = forever)."""
    conn.execute(
        "INSERT INTO payloads (message_hash, expires_at, payload) VALUES (?, ?, ?) "
        "ON CONFLICT (message_hash) DO UPDATE SET expires_at = CASE "
        "WHEN payloads.expires_at IS NULL OR excluded.expires_at IS NULL THEN NULL "
        "ELSE max(payloads.expires_at, excluded.expires_at) END",
        (message_hash, expires_at, payload),
    )


class SqliteOutbox:
    """The :class:`~msgstore.protocol.OutboxStore` of a :class:`SqliteMsgStore`."""

    def __init__(self, store: SqliteMsgStore) -> None:
        self._store = store
        self.shards = store.settings.shards

    def _upsert(self, conn: sqlite3.Connection, entry: OutboxEntry, now: float) -> None:
        expires = now + self._store.settings.outbox_retention
        conn.execute(
            "INSERT INTO outbox (request_id, shard, message_hash, scheduled_at, state, content_topic, "
            "expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) DO UPDATE SET "
            "state = excluded.state, expires_at = excluded.expires_at, body = excluded.body",
            (
                entry.request_id,
                shard_of(entry.request_id, self.shards),
                entry.message_hash,
                entry.progress.scheduled_at,
                int(entry.state),
                entry.message.content_topic,
                expires,
                encode_entry(entry),
            ),
        )
        put_payload(conn, entry.message_hash, entry.message.payload, expires)

    async def add(self, entry: OutboxEntry, *, now: float) -> tuple[OutboxEntry, bool]:
        """Insert a new request; a repeat returns the stored one, a different message conflicts."""

        def job(conn: sqlite3.Connection) -> tuple[OutboxEntry, bool]:
            def body() -> tuple[OutboxEntry, bool]:
                row = conn.execute(_ENTRY + "AND o.request_id = ?", (now, entry.request_id)).fetchone()
                if row is not None:
                    stored = decode_entry(row[0], row[1])
                    if not stored.repeats(entry):
                        raise RequestIdConflict(entry.request_id)
                    return stored, False
                self._upsert(conn, entry, now)
                return entry, True

            return in_transaction(conn, body)

        return await self._store.write(job, "add send request")

    async def get(self, request_id: str, *, now: float) -> OutboxEntry | None:
        """The request, if held."""
        rows = await self._select("AND o.request_id = ?", (now, request_id))
        return rows[0] if rows else None

    async def latest_for_hash(self, message_hash: bytes, *, now: float) -> OutboxEntry | None:
        """The most recently scheduled request of ``message_hash``."""
        rows = await self._select(
            "AND o.message_hash = ? ORDER BY o.scheduled_at DESC, o.request_id DESC LIMIT 1",
            (now, message_hash),
        )
        return rows[0] if rows else None

    async def _select(self, where: str, params: tuple[Any, ...]) -> list[OutboxEntry]:
        def job(conn: sqlite3.Connection) -> list[OutboxEntry]:
            return [decode_entry(b, p) for b, p in conn.execute(_ENTRY + where, params)]

        return await self._store.read(job, "read send requests")

    async def save(self, entry: OutboxEntry, lease: Lease, *, now: float) -> OutboxEntry:
        """Write the new state and its change under the shard's lease."""
        shard = shard_of(entry.request_id, self.shards)
        if lease.name != lease_name(shard):
            raise ValueError(f"request {entry.request_id} is in shard {shard}, not under lease {lease.name}")
        check_lease(lease, self._store.settings.lease_margin, now)

        def job(conn: sqlite3.Connection) -> OutboxEntry:
            def body() -> OutboxEntry:
                if not lease_is_current(conn, lease):
                    raise LeaseLost(lease.name, lease.epoch, "taken over by another owner")
                row = conn.execute("SELECT last_seq FROM outbox_shards WHERE shard = ?", (shard,)).fetchone()
                saved = dataclasses.replace(entry, sequence=(row[0] if row else 0) + 1)
                self._upsert(conn, saved, now)
                conn.execute(
                    "INSERT INTO outbox_changes (shard, seq, changed_at, message_hash, body) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (shard, saved.sequence, now, saved.message_hash, encode_entry(saved)),
                )
                conn.execute(
                    "INSERT INTO outbox_shards (shard, last_seq) VALUES (?, ?) "
                    "ON CONFLICT (shard) DO UPDATE SET last_seq = excluded.last_seq",
                    (shard, saved.sequence),
                )
                return saved

            return in_transaction(conn, body)

        return await self._store.write(job, "save send request")

    async def open_requests(self, shard: int, lease: Lease, *, now: float) -> list[OutboxEntry]:
        """Unfinished requests of ``shard`` (the partial index ``outbox_open``)."""
        if lease.name != lease_name(shard):
            raise ValueError(f"lease {lease.name} does not own shard {shard}")
        check_lease(lease, self._store.settings.lease_margin, now)
        return await self._select(
            f"AND o.shard = ? AND o.state NOT IN {FINAL_STATES} ORDER BY o.scheduled_at, o.request_id",
            (now, shard),
        )

    async def list(
        self, flt: OutboxFilter, skip: int | None, take: int | None, *, now: float
    ) -> list[OutboxEntry]:
        """Matching requests by (scheduled_at, request id) with skip/take."""
        offset, limit = window(skip, take)
        if limit == 0:
            return []
        where, params = "", list[Any]([now])
        if flt.request_ids:
            where += f"AND o.request_id IN ({','.join('?' * len(flt.request_ids))}) "
            params += flt.request_ids
        if flt.message_hash:
            where += "AND o.message_hash = ? "
            params.append(flt.message_hash)
        if flt.content_topic:
            where += "AND o.content_topic = ? "
            params.append(flt.content_topic)
        if flt.states:
            where += f"AND o.state IN ({','.join(str(int(s)) for s in flt.states)}) "
        where += "ORDER BY o.scheduled_at, o.request_id LIMIT ? OFFSET ?"
        params += [-1 if limit is None else limit, offset]
        return await self._select(where, tuple(params))

    async def changes_after(self, position: bytes, limit: int, *, now: float) -> OutboxChanges:
        """Retained changes after ``position``, merged across shards."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        start = ResumePosition.decode(position, self.shards)
        cutoff = now - self._store.settings.change_retention

        def job(conn: sqlite3.Connection) -> OutboxChanges:
            lasts = dict(conn.execute("SELECT shard, last_seq FROM outbox_shards").fetchall())
            per_shard: list[list[OutboxChange]] = []
            for shard, after in enumerate(start.sequences):
                rows = conn.execute(
                    "SELECT c.seq, c.changed_at, c.body, p.payload FROM outbox_changes c "
                    "JOIN payloads p ON p.message_hash = c.message_hash "
                    "WHERE c.shard = ? AND c.seq > ? AND c.changed_at > ? ORDER BY c.seq LIMIT ?",
                    (shard, after, cutoff, limit),
                )
                per_shard.append([OutboxChange(shard, s, at, decode_entry(b, p)) for s, at, b, p in rows])
            return merge_changes(start, per_shard, [lasts.get(s, 0) for s in range(self.shards)], limit)

        return await self._store.read(job, "read outbox changes")
