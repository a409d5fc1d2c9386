"""The send service's outbox on SQLite: requests, the open-request index, per-shard change logs."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Sequence
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

#: A request's payload is kept this long beyond its row's retention when written, so the saves of a request
#: that finishes within half of it (nearly all) never rewrite or extend the payload row.
_PAYLOAD_SLACK = 86_400.0
_ENTRY = (
    "SELECT o.body, p.payload FROM outbox o JOIN payloads p ON p.message_hash = o.message_hash "
    "WHERE o.expires_at > ? "
)


def _fenced(conn: sqlite3.Connection, lease: Lease, margin: float, now: float) -> LeaseLost | None:
    """Why a write under ``lease`` is refused now (within its safety margin, or taken over), or None."""
    try:
        check_lease(lease, margin, now)
    except LeaseLost as err:
        return err
    if not lease_is_current(conn, lease):
        return LeaseLost(lease.name, lease.epoch, "taken over by another owner")
    return None


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

    def _upsert(
        self, conn: sqlite3.Connection, entry: OutboxEntry, body: bytes, now: float, *, new: bool = False
    ) -> bool:
        """Write the request's row; ``new``: only if no row has its id (False when one has)."""
        expires = now + self._store.settings.outbox_retention
        conflict = (
            "DO NOTHING"
            if new
            else "DO UPDATE SET state = excluded.state, expires_at = excluded.expires_at, "
            "body = excluded.body"
        )
        cursor = conn.execute(
            "INSERT INTO outbox (request_id, shard, message_hash, scheduled_at, state, content_topic, "
            f"expires_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (request_id) {conflict}",
            (
                entry.request_id,
                shard_of(entry.request_id, self.shards),
                entry.message_hash,
                entry.progress.scheduled_at,
                int(entry.state),
                entry.message.content_topic,
                expires,
                body,
            ),
        )
        return cursor.rowcount == 1

    async def add(self, entry: OutboxEntry, *, now: float) -> tuple[OutboxEntry, bool]:
        """Insert a new request; a repeat returns the stored one, a different message conflicts."""
        [outcome] = await self.add_many([entry], now=now)
        if isinstance(outcome, RequestIdConflict):
            raise outcome
        return outcome

    async def add_many(
        self, entries: Sequence[OutboxEntry], *, now: float
    ) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
        """:meth:`add` for each entry, in one transaction (group commit)."""
        retention = self._store.settings.outbox_retention

        def job(conn: sqlite3.Connection) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
            def body() -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
                out: list[tuple[OutboxEntry, bool] | RequestIdConflict] = []
                added: dict[str, OutboxEntry] = {}
                for entry in entries:
                    rid = entry.request_id
                    stored = added.get(rid)
                    # Nearly every id is new (generated): insert first, and read only when the id is taken.
                    if stored is None and not self._upsert(
                        conn, entry, doc := encode_entry(entry), now, new=True
                    ):
                        row = conn.execute(_ENTRY + "AND o.request_id = ?", (now, rid)).fetchone()
                        if row is None:  # a row past its retention holds the id: it is a new request now
                            conn.execute("DELETE FROM outbox WHERE request_id = ?", (rid,))
                            self._upsert(conn, entry, doc, now, new=True)
                        else:
                            stored = decode_entry(row[0], row[1])
                    if stored is not None:
                        out.append(
                            (stored, False) if stored.repeats(entry) else RequestIdConflict(entry.request_id)
                        )
                        continue
                    # The payload outlives the request's row by _PAYLOAD_SLACK, so a save need not touch it
                    # again unless the request stays open that long (save_many).
                    put_payload(
                        conn, entry.message_hash, entry.message.payload, now + retention + _PAYLOAD_SLACK
                    )
                    added[entry.request_id] = entry
                    out.append((entry, True))
                return out

            return in_transaction(conn, body)

        return await self._store.write(job, "add send requests")

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
        [outcome] = await self.save_many([(entry, lease)], now=now)
        if isinstance(outcome, LeaseLost):
            raise outcome
        return outcome

    async def save_many(
        self, items: Sequence[tuple[OutboxEntry, Lease]], *, now: float
    ) -> list[OutboxEntry | LeaseLost]:
        """:meth:`save` for each (entry, lease), in order, in one transaction (group commit): one shard row
        update per shard, the message payload touched only when the request outlived its slack."""
        margin = self._store.settings.lease_margin
        retention = self._store.settings.outbox_retention
        for entry, lease in items:
            shard = shard_of(entry.request_id, self.shards)
            if lease.name != lease_name(shard):
                raise ValueError(
                    f"request {entry.request_id} is in shard {shard}, not under lease {lease.name}"
                )

        def job(conn: sqlite3.Connection) -> list[OutboxEntry | LeaseLost]:
            def body() -> list[OutboxEntry | LeaseLost]:
                current: dict[tuple[str, int], LeaseLost | None] = {}
                last: dict[int, int] = {}
                out: list[OutboxEntry | LeaseLost] = []
                for entry, lease in items:
                    key = (lease.name, lease.epoch)
                    if key not in current:
                        current[key] = _fenced(conn, lease, margin, now)
                    lost = current[key]
                    if lost is not None:
                        out.append(lost)
                        continue
                    shard = shard_of(entry.request_id, self.shards)
                    if shard not in last:
                        row = conn.execute(
                            "SELECT last_seq FROM outbox_shards WHERE shard = ?", (shard,)
                        ).fetchone()
                        last[shard] = row[0] if row else 0
                    last[shard] += 1
                    saved = dataclasses.replace(entry, sequence=last[shard])
                    doc = encode_entry(saved)
                    self._upsert(conn, saved, doc, now)
                    conn.execute(
                        "INSERT INTO outbox_changes (shard, seq, changed_at, message_hash, body) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (shard, saved.sequence, now, saved.message_hash, doc),
                    )
                    if now - saved.progress.scheduled_at > _PAYLOAD_SLACK / 2:
                        expires = now + retention + _PAYLOAD_SLACK
                        conn.execute(
                            "UPDATE payloads SET expires_at = ? WHERE message_hash = ? "
                            "AND expires_at IS NOT NULL AND expires_at < ?",
                            (expires, saved.message_hash, now + retention),
                        )
                    out.append(saved)
                conn.executemany(
                    "INSERT INTO outbox_shards (shard, last_seq) VALUES (?, ?) "
                    "ON CONFLICT (shard) DO UPDATE SET last_seq = excluded.last_seq",
                    list(last.items()),
                )
                return out

            return in_transaction(conn, body)

        return await self._store.write(job, "save send requests")

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

    async def head(self, *, now: float) -> bytes:
        """Each shard's last sequence, as a position."""

        def job(conn: sqlite3.Connection) -> bytes:
            lasts = dict(conn.execute("SELECT shard, last_seq FROM outbox_shards").fetchall())
            return ResumePosition(tuple(lasts.get(s, 0) for s in range(self.shards))).encode()

        return await self._store.read(job, "read outbox head")

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
