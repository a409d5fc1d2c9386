"""The send service's outbox on Cassandra.

- ``outbox`` holds each request's document; ``payloads`` its message payload (written first).
- ``outbox_open`` lists every request of a (shard, scheduling day) with its state, *updated* on each save
  and never deleted (TTL); ``outbox_shards.watermark_day`` is the oldest day that may still hold an open
  request, so a new owner's ``open_requests`` reads a few day partitions, not the whole retention.
- ``outbox_changes`` is each shard's change log in partitions of 1,024 sequences; the shard row's
  ``last_seq`` says where the log ends, and a new owner continues at ``last_seq + 1``. Each change carries
  its predecessor's time (``prev_at``) and the shard row its last change's (``last_at``): a reader that sees
  the shard row before the change row of the same batch (a batch is not isolated) waits for it instead of
  reporting a gap (:mod:`msgstore.replay`).

Fencing here is by the lease's expiry only (``check_lease`` with the safety margin): a conditional write
per save would put a Paxos round on every attempt. A save is one LOGGED batch (document, index row, change,
shard row), so a crash never leaves a change without its state or the reverse; the saves of one shard in
one ``save_many`` share a batch where they fit (a new request's QUEUED and SENDING changes: one round trip).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

from msgstore.cassandra.payloads import Payloads
from msgstore.cassandra.session import Cql
from msgstore.codec import decode_entry, encode_entry
from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.paging import window
from msgstore.replay import merge_changes
from msgstore.settings import StoreSettings, check_lease
from msgstore.sharding import ResumePosition, day_of, lease_name, shard_of
from msgstore.types import Lease, OutboxChange, OutboxChanges, OutboxEntry, OutboxFilter

__all__ = ["CassandraOutbox"]

CHANGE_BUCKET = 1024
#: Budget of one save batch, estimated from its values: well below the 50 KiB ``batch_size_fail_threshold``.
BATCH_BYTES = 24 * 1024
_INDEX = (
    "INSERT INTO {ks}.outbox_open (shard, day, scheduled_at, request_id, open, state, content_topic) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?"
)
_DOC = (
    "INSERT INTO {ks}.outbox (request_id, shard, message_hash, scheduled_at, body) "
    "VALUES (?, ?, ?, ?, ?) USING TTL ?"
)


class CassandraOutbox:
    """The :class:`~msgstore.protocol.OutboxStore` on Cassandra."""

    def __init__(self, cql: Cql, payloads: Payloads, settings: StoreSettings) -> None:
        self._cql = cql
        self._payloads = payloads
        self._settings = settings
        self.shards = settings.shards
        self._ttl = int(settings.outbox_retention)
        self._last_seq: dict[tuple[int, int], int] = {}  # (shard, epoch) → last sequence this owner wrote
        self._last_at: dict[tuple[int, int], float | None] = {}  # … and when

    def _rows(self, entry: OutboxEntry) -> list[tuple[str, tuple[object, ...]]]:
        shard = shard_of(entry.request_id, self.shards)
        at = entry.progress.scheduled_at
        return [
            (_DOC, (entry.request_id, shard, entry.message_hash, at, encode_entry(entry), self._ttl)),
            (
                _INDEX,
                (
                    shard,
                    day_of(at),
                    at,
                    entry.request_id,
                    not entry.state.is_final,
                    int(entry.state),
                    entry.message.content_topic,
                    self._ttl,
                ),
            ),
        ]

    async def add(self, entry: OutboxEntry, *, now: float) -> tuple[OutboxEntry, bool]:
        """Insert a new request; a repeat returns the stored one, a different message conflicts.

        Read-then-write, not a lightweight transaction: two *different* messages racing for one
        caller-chosen id within the same instant are not detected (the later write wins).
        """
        stored = await self.get(entry.request_id, now=now)
        if stored is not None:
            if not stored.repeats(entry):
                raise RequestIdConflict(entry.request_id)
            return stored, False
        await self._payloads.put([(entry.message_hash, entry.message.payload)])
        by_hash = (
            "INSERT INTO {ks}.outbox_by_hash (message_hash, scheduled_at, request_id) "
            "VALUES (?, ?, ?) USING TTL ?",
            (entry.message_hash, entry.progress.scheduled_at, entry.request_id, self._ttl),
        )
        await self._cql.logged([*self._rows(entry), by_hash], "add send request")
        return entry, True

    async def add_many(
        self, entries: Sequence[OutboxEntry], *, now: float
    ) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
        """:meth:`add` for each entry, concurrently (each is its own read and logged batch; a batch across
        requests would span partitions for nothing). A request id repeated within ``entries`` is added once
        and its later occurrences are answered as repeats of it."""

        async def one(entry: OutboxEntry) -> tuple[OutboxEntry, bool] | RequestIdConflict:
            try:
                return await self.add(entry, now=now)
            except RequestIdConflict as err:
                return err

        first: dict[str, OutboxEntry] = {}
        for entry in entries:
            first.setdefault(entry.request_id, entry)
        outcomes = dict(zip(first, await asyncio.gather(*(one(e) for e in first.values())), strict=True))
        out: list[tuple[OutboxEntry, bool] | RequestIdConflict] = []
        for entry in entries:
            outcome = outcomes[entry.request_id]
            if entry is first[entry.request_id] or isinstance(outcome, RequestIdConflict):
                out.append(outcome)
            elif outcome[0].repeats(entry):
                out.append((outcome[0], False))
            else:
                out.append(RequestIdConflict(entry.request_id))
        return out

    async def get(self, request_id: str, *, now: float) -> OutboxEntry | None:
        """The request, if held."""
        got = await self._get_many([request_id])
        return got[0] if got else None

    async def _get_many(self, request_ids: list[str]) -> list[OutboxEntry]:
        results = await asyncio.gather(
            *(
                self._cql.rows(
                    "SELECT message_hash, body FROM {ks}.outbox WHERE request_id = ?", (r,), "read request"
                )
                for r in request_ids
            )
        )
        docs = [rows[0] for rows in results if rows]
        payloads = await self._payloads.get([h for h, _ in docs])
        return [decode_entry(body, payloads.get(h, b"")) for h, body in docs]

    async def latest_for_hash(self, message_hash: bytes, *, now: float) -> OutboxEntry | None:
        """The most recently scheduled request of ``message_hash``."""
        rows = await self._cql.rows(
            "SELECT request_id FROM {ks}.outbox_by_hash WHERE message_hash = ? LIMIT 1",
            (message_hash,),
            "read hash",
        )
        return await self.get(rows[0][0], now=now) if rows else None

    async def save(self, entry: OutboxEntry, lease: Lease, *, now: float) -> OutboxEntry:
        """Write the new state and its change in one logged batch."""
        self._check(entry, lease, now)
        return (await self._save_run(shard_of(entry.request_id, self.shards), lease, [entry], now))[0]

    def _check(self, entry: OutboxEntry, lease: Lease, now: float) -> None:
        shard = shard_of(entry.request_id, self.shards)
        if lease.name != lease_name(shard):
            raise ValueError(f"request {entry.request_id} is in shard {shard}, not under lease {lease.name}")
        check_lease(lease, self._settings.lease_margin, now)

    async def _save_run(
        self, shard: int, lease: Lease, entries: Sequence[OutboxEntry], now: float
    ) -> list[OutboxEntry]:
        """Consecutive saves of one shard under one lease: LOGGED batches of at most :data:`BATCH_BYTES`,
        one after the other, each holding its changes, the latest state of each request it touches (two
        writes of one row in one batch share a timestamp, so the larger value, not the later, would win)
        and the shard row."""
        key = (shard, lease.epoch)
        if key not in self._last_seq:
            self._last_seq[key], self._last_at[key], _ = await self._shard_meta(shard)
        change_ttl = int(self._settings.change_retention) + 60
        saved: list[OutboxEntry] = []
        run: list[OutboxEntry] = []
        changes: list[tuple[str, tuple[object, ...]]] = []
        size = 0
        for index, entry in enumerate(entries):
            done = dataclasses.replace(entry, sequence=self._last_seq[key] + len(run) + 1)
            body = encode_entry(done)
            changes.append(
                (
                    "INSERT INTO {ks}.outbox_changes (shard, bucket, seq, changed_at, prev_at, message_hash, "
                    "body) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ?",
                    (
                        shard,
                        done.sequence // CHANGE_BUCKET,
                        done.sequence,
                        now,
                        now if run else self._last_at.get(key),
                        done.message_hash,
                        body,
                        change_ttl,
                    ),
                )
            )
            run.append(done)
            size += 2 * len(body) + 256
            if size < BATCH_BYTES and index < len(entries) - 1:
                continue
            latest = {e.request_id: e for e in run}
            await self._cql.logged(
                [
                    *(row for e in latest.values() for row in self._rows(e)),
                    *changes,
                    (
                        "UPDATE {ks}.outbox_shards SET last_seq = ?, last_at = ? WHERE shard = ?",
                        (run[-1].sequence, now, shard),
                    ),
                ],
                "save send request",
            )
            self._last_seq[key], self._last_at[key] = run[-1].sequence, now
            saved += run
            run, changes, size = [], [], 0
        return saved

    async def save_many(
        self, items: Sequence[tuple[OutboxEntry, Lease]], *, now: float
    ) -> list[OutboxEntry | LeaseLost]:
        """:meth:`save` for each (entry, lease): one shard's saves in order (each numbered from the one
        before) and together — one LOGGED batch where they fit, so a request's QUEUED and SENDING changes
        are one round trip —, different shards concurrently."""
        by_shard: dict[int, list[int]] = {}
        for index, (entry, _) in enumerate(items):
            by_shard.setdefault(shard_of(entry.request_id, self.shards), []).append(index)
        out: list[OutboxEntry | LeaseLost | None] = [None] * len(items)

        async def shard_saves(shard: int, indexes: list[int]) -> None:
            run: list[int] = []  # consecutive saves under one lease epoch

            async def flush() -> None:
                saved = await self._save_run(shard, items[run[0]][1], [items[i][0] for i in run], now)
                for i, done in zip(run, saved, strict=True):
                    out[i] = done
                run.clear()

            for index in indexes:
                entry, lease = items[index]
                try:
                    self._check(entry, lease, now)
                except LeaseLost as err:
                    out[index] = err
                    continue
                if run and items[run[0]][1].epoch != lease.epoch:
                    await flush()
                run.append(index)
            if run:
                await flush()

        await asyncio.gather(*(shard_saves(shard, indexes) for shard, indexes in by_shard.items()))
        return [o for o in out if o is not None]

    async def _shard_meta(self, shard: int) -> tuple[int, float | None, int | None]:
        """(last sequence, when it was written, watermark day) of ``shard``."""
        rows = await self._cql.rows(
            "SELECT last_seq, last_at, watermark_day FROM {ks}.outbox_shards WHERE shard = ?",
            (shard,),
            "read shard",
        )
        return (rows[0][0] or 0, rows[0][1], rows[0][2]) if rows else (0, None, None)

    async def _index_days(
        self, shard: int, first: int, last: int
    ) -> list[tuple[int, list[tuple[float, str, bool, int, str]]]]:
        results = await asyncio.gather(
            *(
                self._cql.rows(
                    "SELECT scheduled_at, request_id, open, state, content_topic FROM {ks}.outbox_open "
                    "WHERE shard = ? AND day = ?",
                    (shard, day),
                    "read open requests",
                )
                for day in range(first, last + 1)
            )
        )
        return [
            (day, [tuple(r) for r in rows]) for day, rows in zip(range(first, last + 1), results, strict=True)
        ]

    async def open_requests(self, shard: int, lease: Lease, *, now: float) -> list[OutboxEntry]:
        """Unfinished requests of ``shard``: days from the watermark to tomorrow, then their documents.

        The watermark then moves up to the oldest day still holding one, but never past yesterday: a
        request another replica adds "now" lands on today (clocks within a day of each other).
        """
        if lease.name != lease_name(shard):
            raise ValueError(f"lease {lease.name} does not own shard {shard}")
        check_lease(lease, self._settings.lease_margin, now)
        today = day_of(now)
        *_, watermark = await self._shard_meta(shard)
        first = watermark if watermark is not None else day_of(now - self._settings.outbox_retention)
        days = await self._index_days(shard, min(first, today - 1), today + 1)
        open_ids = [(at, rid) for _, rows in days for at, rid, is_open, _, _ in rows if is_open]
        oldest = min((day for day, rows in days if any(r[2] for r in rows)), default=today - 1)
        entries = await self._get_many([rid for _, rid in sorted(open_ids)])
        new_mark = min(oldest, today - 1)
        if new_mark != watermark:
            await self._cql.execute(
                [("UPDATE {ks}.outbox_shards SET watermark_day = ? WHERE shard = ?", (new_mark, shard))],
                "move watermark",
            )
        return [e for e in entries if not e.state.is_final]

    async def head(self, *, now: float) -> bytes:
        """Each shard's last sequence (its ``outbox_shards`` row), as a position."""
        metas = await asyncio.gather(*(self._shard_meta(s) for s in range(self.shards)))
        return ResumePosition(tuple(last for last, _, _ in metas)).encode()

    async def changes_after(self, position: bytes, limit: int, *, now: float) -> OutboxChanges:
        """Retained changes after ``position``, merged across shards."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        start = ResumePosition.decode(position, self.shards)
        cutoff = now - self._settings.change_retention
        # The shard rows first, then the changes: msgstore.replay tells a change still being written from
        # one past retention by the times the rows carry.
        metas = await asyncio.gather(*(self._shard_meta(s) for s in range(self.shards)))
        lasts = [last for last, _, _ in metas]
        per_shard = await asyncio.gather(
            *(self._shard_changes(s, start.sequences[s], lasts[s], cutoff, limit) for s in range(self.shards))
        )
        return merge_changes(
            start,
            [[c for c, _ in changes] for changes in per_shard],
            lasts,
            limit,
            cutoff=cutoff,
            last_times=[at for _, at, _ in metas],
            prev_times=[[at for _, at in changes] for changes in per_shard],
        )

    async def _shard_changes(
        self, shard: int, after: int, last: int, cutoff: float, limit: int
    ) -> list[tuple[OutboxChange, float | None]]:
        """Retained changes of ``shard`` after ``after`` with their predecessors' times."""
        docs: list[tuple[int, float, float | None, bytes, bytes]] = []
        bucket = (after + 1) // CHANGE_BUCKET
        while after < last and len(docs) < limit and bucket <= last // CHANGE_BUCKET:
            rows = await self._cql.rows(
                "SELECT seq, changed_at, prev_at, message_hash, body FROM {ks}.outbox_changes "
                "WHERE shard = ? AND bucket = ? AND seq > ? LIMIT ?",
                (shard, bucket, after, limit - len(docs)),
                "read outbox changes",
            )
            docs += [tuple(r) for r in rows if r[1] > cutoff]
            bucket += 1
        payloads = await self._payloads.get([h for _, _, _, h, _ in docs])
        return [
            (OutboxChange(shard, seq, at, decode_entry(body, payloads.get(h, b""))), prev_at)
            for seq, at, prev_at, h, body in docs
        ]

    async def list(
        self, flt: OutboxFilter, skip: int | None, take: int | None, *, now: float
    ) -> list[OutboxEntry]:
        """Matching requests by (scheduled_at, request id) with skip/take."""
        offset, limit = window(skip, take)
        if limit == 0:
            return []
        if flt.request_ids or flt.message_hash:
            ids = list(flt.request_ids)
            if not ids:
                rows = await self._cql.rows(
                    "SELECT request_id FROM {ks}.outbox_by_hash WHERE message_hash = ?",
                    (flt.message_hash,),
                    "list",
                )
                ids = [r[0] for r in rows]
            entries = [e for e in await self._get_many(list(dict.fromkeys(ids))) if _matches(e, flt)]
            entries.sort(key=lambda e: (e.progress.scheduled_at, e.request_id))
            return entries[offset : None if limit is None else offset + limit]
        first, last = day_of(now - self._settings.outbox_retention), day_of(now) + 1
        keys: list[tuple[float, str]] = []
        for shard in range(self.shards):
            for _, rows in await self._index_days(shard, first, last):
                keys += [
                    (at, rid)
                    for at, rid, _, state, topic in rows
                    if (not flt.states or state in flt.states)
                    and (not flt.content_topic or topic == flt.content_topic)
                ]
        keys.sort()
        page = keys[offset : None if limit is None else offset + limit]
        return await self._get_many([rid for _, rid in page])


def _matches(entry: OutboxEntry, flt: OutboxFilter) -> bool:
    return (
        (not flt.request_ids or entry.request_id in flt.request_ids)
        and (not flt.message_hash or entry.message_hash == flt.message_hash)
        and (not flt.content_topic or entry.message.content_topic == flt.content_topic)
        and (not flt.states or entry.state in flt.states)
    )
