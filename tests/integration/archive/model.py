"""An in-memory ArchiveStore that states the storage semantics as plainly as possible — the test oracle.

Nothing here is fast or clever: every query filters and sorts all rows. The property tests in contract.py
compare a real adapter's pages with this model's. Semantics (docs/archive.md; archivestore.sqlite docstring):

- rows are physical until ``expire``/``delete_buckets``/``purge_expired`` remove them; a row is *visible*
  while ``now < expires_at`` (``None`` = forever);
- ``put`` returns EXPIRED for an item already past retention (not stored), else INSERTED the first time a
  hash is seen and DUPLICATE after, in input order;
- ``query``: topics override bloom; bloom uses Go's topic bloom and ``(filter | sample) == filter``; bounds
  inclusive; ``after`` resumes via ``ordering.is_after``; ``has_more`` = more matches past the page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from archivestore.ordering import is_after, sort_key
from archivestore.retention import RetentionPolicy
from archivestore.types import (
    BucketInfo,
    Direction,
    ExpireRequest,
    ExpireResult,
    PackedPage,
    PutItem,
    PutOutcome,
    PutResult,
    Query,
    QueryPage,
    ShardPlanEntry,
    Stats,
    StoredEnvelope,
)
from wakucodec.bloom import bloom_match, topic_to_bloom

DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class _Row:
    envelope: StoredEnvelope
    expires_at: int | None

    def visible(self, now: int) -> bool:
        return self.expires_at is None or now < self.expires_at


class ModelStore:
    """The reference semantics of :class:`archivestore.protocol.ArchiveStore`, in memory."""

    backend = "model"

    def __init__(self, retention: RetentionPolicy, *, bucket_seconds: int = 3600) -> None:
        self.retention = retention
        self.bucket_seconds = bucket_seconds
        self._rows: dict[bytes, _Row] = {}
        self._plan: dict[tuple[str, int], ShardPlanEntry] = {}

    async def open(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to close."""

    async def put(self, items: Sequence[PutItem], *, now: int) -> PutResult:
        """Insert each item unless expired or already present."""
        outcomes: list[PutOutcome] = []
        for item in items:
            env = item.envelope
            expires_at = self.retention.expires_at(env.sent, env.topic, item.retention_s)
            if expires_at is not None and expires_at <= now:
                outcomes.append(PutOutcome.EXPIRED)
            elif env.hash in self._rows:
                outcomes.append(PutOutcome.DUPLICATE)
            else:
                self._rows[env.hash] = _Row(env, expires_at)
                outcomes.append(PutOutcome.INSERTED)
        return PutResult(tuple(outcomes))

    def _visible(self, now: int) -> list[StoredEnvelope]:
        return [r.envelope for r in self._rows.values() if r.visible(now)]

    async def get(
        self, *, envelope_hash: bytes | None = None, message_hash: bytes | None = None, now: int
    ) -> StoredEnvelope | None:
        """Lookup by either hash among visible rows (first in order for a message hash)."""
        if envelope_hash is not None:
            row = self._rows.get(envelope_hash)
            return row.envelope if row is not None and row.visible(now) else None
        found = sorted((e for e in self._visible(now) if e.message_hash == message_hash), key=sort_key)
        return found[0] if found else None

    async def contains(self, hashes: Sequence[bytes], *, now: int) -> list[bool]:
        """Membership by envelope or message hash among visible rows."""
        keys = {e.hash for e in self._visible(now)} | {
            e.message_hash for e in self._visible(now) if e.message_hash is not None
        }
        return [h in keys for h in hashes]

    async def query_packed(self, query: Query, *, now: int) -> PackedPage:
        """The columns of :meth:`query`."""
        return PackedPage.of(await self.query(query, now=now))

    async def query(self, query: Query, *, now: int) -> QueryPage:
        """Filter, sort, page."""
        if query.limit < 1:
            raise ValueError("limit must be at least 1")
        if not query.topics and not query.bloom:
            raise ValueError("bloom filter and topics is empty")

        def matches(env: StoredEnvelope) -> bool:
            if query.topics:
                return env.topic in query.topics
            return bloom_match(query.bloom, topic_to_bloom(env.topic))

        hits = sorted(
            (
                e
                for e in self._visible(now)
                if query.lower <= e.sent <= query.upper
                and matches(e)
                and is_after(e, query.after, query.direction)
            ),
            key=sort_key,
            reverse=query.direction is Direction.BACKWARD,
        )
        return QueryPage(hits[: query.limit], len(hits) > query.limit)

    async def stats(self, *, now: int) -> Stats:
        """Counts over visible rows."""
        visible = self._visible(now)
        sents = [e.sent for e in visible]
        return Stats(
            envelopes=len(visible),
            topics=len({e.topic for e in visible}),
            oldest_sent=min(sents, default=None),
            newest_sent=max(sents, default=None),
            backend=self.backend,
        )

    def _bucket_of(self, table: str, env: StoredEnvelope) -> tuple[int, bytes | None]:
        if table == "envelopes_by_time":
            return env.sent // self.bucket_seconds, None
        return env.sent // DAY_S, env.topic

    async def list_buckets(
        self, table: str, lower_bucket: int, upper_bucket: int
    ) -> AsyncIterator[BucketInfo]:
        """Physical rows grouped by virtual bucket (shard 0)."""
        sizes: dict[tuple[int, bytes | None], tuple[int, int]] = {}
        for row in self._rows.values():
            key = self._bucket_of(table, row.envelope)
            if lower_bucket <= key[0] <= upper_bucket:
                n, size = sizes.get(key, (0, 0))
                sizes[key] = (n + 1, size + len(row.envelope.raw))
        for (bucket, topic), (n, size) in sorted(sizes.items(), key=lambda kv: (kv[0][0], kv[0][1] or b"")):
            yield BucketInfo(table, bucket, 0, n, size, topic)

    async def delete_buckets(self, buckets: Sequence[BucketInfo]) -> int:
        """Remove every row of the given buckets; count buckets that had rows."""
        deleted = 0
        for info in buckets:
            doomed = [
                h
                for h, row in self._rows.items()
                if info.shard == 0 and self._bucket_of(info.table, row.envelope) == (info.bucket, info.topic)
            ]
            for h in doomed:
                del self._rows[h]
            deleted += bool(doomed)
        return deleted

    async def get_shard_plan(self, table: str) -> list[ShardPlanEntry]:
        """Entries of ``table`` by bucket."""
        return sorted((e for (t, _), e in self._plan.items() if t == table), key=lambda e: e.bucket)

    async def put_shard_plan(self, entries: Sequence[ShardPlanEntry]) -> None:
        """Upsert entries."""
        for entry in entries:
            self._plan[(entry.table, entry.bucket)] = entry

    async def expire(self, request: ExpireRequest, *, now: int) -> ExpireResult:
        """Drop rows older than their topic's cutoff, or the global cutoff for other topics."""
        doomed: list[bytes] = []
        buckets: set[int] = set()
        for h, row in self._rows.items():
            env = row.envelope
            cutoff = request.topic_cutoffs.get(env.topic, request.cutoff)
            if cutoff is not None and env.sent < cutoff:
                doomed.append(h)
                buckets.add(env.sent // self.bucket_seconds)
        if not request.dry_run:
            for h in doomed:
                del self._rows[h]
        return ExpireResult(envelopes=len(doomed), partitions=len(buckets), dry_run=request.dry_run)

    async def purge_expired(self, now: int, batch: int = 1000) -> int:
        """Physically drop rows that are no longer visible."""
        doomed = [h for h, row in self._rows.items() if not row.visible(now)]
        for h in doomed:
            del self._rows[h]
        return len(doomed)
