"""``mailmesh.archive.v1.ArchiveService``: proto ⇄ archivestore translation, validation, error mapping.

Every handler validates its request (INVALID_ARGUMENT with the field's name), turns it into archivestore
types, calls the store through :class:`~services.archive.lifecycle.StoreGate` inside
:func:`~services.archive.errors.store_errors` (UNAVAILABLE / INTERNAL / FAILED_PRECONDITION), and
translates the answer back. Paging under a byte budget is :mod:`~services.archive.paging`, maintenance is
:mod:`~services.archive.maintenance`. Behaviour decisions are listed in the service README.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import grpc.aio
from google.protobuf.duration_pb2 import Duration

from archivestore.retention import RetentionPolicy
from archivestore.types import BucketInfo, Direction, Position, PutItem, PutOutcome, Query, StoredEnvelope
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.archive.v1 import archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from meshcore.errors import MeshError
from services.archive import maintenance as mt
from services.archive.errors import (
    ArchiveCorrupt,
    EnvelopeNotFound,
    InvalidField,
    LimitExceeded,
    store_errors,
)
from services.archive.lifecycle import StoreGate
from services.archive.metrics import ArchiveMetrics
from services.archive.paging import Budget, PackedColumns, read_packed, read_page
from services.archive.validation import (
    CheckedEnvelope,
    EnvelopeFields,
    check_bloom,
    check_count,
    check_envelope,
    check_hash,
    check_position_hash,
    check_range,
    check_topic,
)
from wakucodec.bloom import FULL_BLOOM
from wakucodec.constants import MAX_QUERY_LIMIT, MAX_TOPIC_INTEREST, UINT32_MAX
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError
from wakucodec.pow import calculate_pow

__all__ = ["SERVICE_NAME", "ArchiveServicer", "ServicerSettings", "envelope_message", "packed_envelopes"]

SERVICE_NAME = "mailmesh.archive.v1.ArchiveService"
MAX_QUERY_BYTES = 64 * 1024 * 1024
MAX_CONTAINS = 1000
MAX_BUCKET_KEYS = 10_000
MAX_SHARDS = 1024
MAX_UPDATED_BY = 256
#: Bytes of a response kept free for everything but the envelopes (has_more, last, framing).
WIRE_MARGIN = 1024
#: Encoded overhead of one element of a repeated message field: tag + length varint.
ELEMENT_OVERHEAD = 6
#: Encoded bytes of one envelope in PackedEnvelopes besides its RLP: the hash, a sent varint (<= 5 bytes) and
#: a size varint (<= 4 bytes for the 10 MiB envelope cap).
PACKED_OVERHEAD = 32 + 5 + 4
EXPIRED_DETAIL = "expired: sent time + retention is already past, so the envelope was not archived"

T = TypeVar("T")
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
_TABLES = {pb.BUCKET_TABLE_TIME: mt.TIME_TABLE, pb.BUCKET_TABLE_TOPIC: mt.TOPIC_TABLE}
_TABLE_ENUMS = {name: value for value, name in _TABLES.items()}
_DIRECTIONS = {
    common_pb2.DIRECTION_UNSPECIFIED: Direction.FORWARD,
    common_pb2.DIRECTION_FORWARD: Direction.FORWARD,
    common_pb2.DIRECTION_BACKWARD: Direction.BACKWARD,
}
_OUTCOMES = (
    pb.PUT_OUTCOME_INSERTED,
    pb.PUT_OUTCOME_DUPLICATE,
    pb.PUT_OUTCOME_INVALID,
    pb.PUT_OUTCOME_EXPIRED,
)
_VIEWS = {
    pb.ENVELOPE_VIEW_UNSPECIFIED: "full",
    pb.ENVELOPE_VIEW_FULL: "full",
    pb.ENVELOPE_VIEW_NO_DATA: "no_data",
    pb.ENVELOPE_VIEW_KEYS: "keys",
    pb.ENVELOPE_VIEW_PACKED: "packed",
}


@dataclass(frozen=True, slots=True)
class ServicerSettings:
    """What the servicer needs from the configuration."""

    layout: mt.Layout
    default_shards: Mapping[str, int]  # per table; SQLite reports 1
    retention: RetentionPolicy
    max_put_items: int
    max_envelope_bytes: int
    query_default_max_bytes: int
    max_message_bytes: int


def envelope_message(stored: StoredEnvelope, *, view: str = "full") -> common_pb2.Envelope:
    """The proto Envelope of a stored one.

    ``full`` / ``no_data``: every field derived from its RLP, checked against its key. ``keys``: only the key
    columns and the raw RLP, which were verified when archived — no decode, no Keccak, no PoW (the hot path of
    history queries spent most of its CPU here). ``packed`` is a query-only view: one envelope gets ``keys``.
    """
    if view in ("keys", "packed"):
        return common_pb2.Envelope(
            rlp=stored.raw,
            hash=stored.hash,
            expiry=stored.expiry,
            ttl=(stored.expiry - stored.sent) & 0xFFFFFFFF,
            topic=stored.topic,
            sent=stored.sent,
        )
    with_data = view == "full"
    try:
        env = decode_envelope(stored.raw, max_size=len(stored.raw))
    except CodecError as err:
        raise ArchiveCorrupt(f"stored envelope 0x{stored.hash.hex()} does not decode: {err}") from err
    if (env.hash, env.topic, env.expiry, env.expiry - env.ttl) != (
        stored.hash,
        stored.topic,
        stored.expiry,
        stored.sent,
    ):
        raise ArchiveCorrupt(f"stored envelope 0x{stored.hash.hex()} no longer matches its key")
    return common_pb2.Envelope(
        rlp=stored.raw,
        hash=stored.hash,
        expiry=env.expiry,
        ttl=env.ttl,
        topic=env.topic,
        data=env.data if with_data else b"",
        nonce=env.nonce,
        sent=stored.sent,
        pow=calculate_pow(env),
    )


def packed_envelopes(page: PackedColumns) -> pb.PackedEnvelopes:
    """The PackedEnvelopes message of a packed page: one join or list per column."""
    return pb.PackedEnvelopes(
        rlp=b"".join(page.raws), rlp_sizes=page.sizes, sent=page.sents, hashes=b"".join(page.hashes)
    )


def _enum(field: str, value: int, known: Mapping[Any, T]) -> T:
    if value not in known:
        raise InvalidField(field, f"unknown value {value}")
    return known[value]


def _seconds(field: str, d: Duration) -> int:
    """A positive Duration as whole seconds (a fraction rounds up)."""
    if d.seconds < 0 or d.nanos < 0 or (d.seconds == 0 and d.nanos == 0):
        raise InvalidField(field, "must be > 0")
    return d.seconds + (1 if d.nanos else 0)


def _time_range(field: str, present: bool, r: common_pb2.TimeRange) -> tuple[int, int]:
    return check_range(field, r.lower, r.upper) if present else (0, UINT32_MAX)


class ArchiveServicer(archive_pb2_grpc.ArchiveServiceServicer):
    """Every RPC of ArchiveService over one archive store."""

    def __init__(
        self,
        gate: StoreGate,
        settings: ServicerSettings,
        metrics: ArchiveMetrics,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._gate = gate
        self._s = settings
        self._metrics = metrics
        self._clock = clock

    def _now(self) -> int:
        return int(self._clock())

    @contextmanager
    def _store_call(self, operation: str) -> Iterator[None]:
        def count(kind: str) -> None:
            self._metrics.store_error(operation, kind)

        with store_errors(operation, count):
            yield

    # ------------------------------------------------------------------------------------------ writes
    def _check_item(self, item: pb.PutItem) -> tuple[CheckedEnvelope, int | None] | str:
        e = item.envelope
        fields = EnvelopeFields(e.rlp, e.hash, e.expiry, e.ttl, e.topic, e.nonce, e.sent, item.message_hash)
        checked = check_envelope(fields, max_size=self._s.max_envelope_bytes)
        if isinstance(checked, str):
            return checked
        retention: int | None = None
        if item.HasField("retention"):
            try:
                retention = _seconds("retention", item.retention)
            except InvalidField as err:
                return err.message
        return checked, retention

    async def PutEnvelopes(  # noqa: N802
        self, request: pb.PutEnvelopesRequest, context: Context
    ) -> pb.PutEnvelopesResponse:
        """Integrity-check each item, store the valid ones in one batch, report per item in order."""
        check_count("items", len(request.items), 1, self._s.max_put_items)
        results: list[pb.PutResult | None] = [None] * len(request.items)
        first: dict[bytes, int] = {}  # hash -> index of the item that goes to the store
        repeats: dict[int, int] = {}  # index -> index of the first item with the same hash
        batch: list[tuple[int, PutItem, int]] = []
        for i, item in enumerate(request.items):
            checked = self._check_item(item)
            if isinstance(checked, str):
                results[i] = pb.PutResult(
                    hash=item.envelope.hash, outcome=pb.PUT_OUTCOME_INVALID, detail=checked
                )
                continue
            env, retention = checked
            h = env.envelope.hash
            if h in first:
                repeats[i] = first[h]
                continue
            first[h] = i
            batch.append((i, PutItem(env.envelope, retention), env.size))
        if batch:
            store = self._gate.store
            began = time.perf_counter()
            try:
                with self._store_call("put"):
                    stored = await store.put([p for _, p, _ in batch], now=self._now())
            except MeshError:
                self._metrics.put_failed(len(batch))
                raise
            self._metrics.put_batch(len(batch), time.perf_counter() - began)
            sizes = []
            for (i, put, size), outcome in zip(batch, stored.outcomes, strict=True):
                h = put.envelope.hash
                if outcome is PutOutcome.INSERTED:
                    results[i] = pb.PutResult(hash=h, outcome=pb.PUT_OUTCOME_INSERTED)
                    sizes.append(size)
                elif outcome is PutOutcome.DUPLICATE:
                    results[i] = pb.PutResult(hash=h, outcome=pb.PUT_OUTCOME_DUPLICATE)
                else:
                    results[i] = pb.PutResult(hash=h, outcome=pb.PUT_OUTCOME_EXPIRED, detail=EXPIRED_DETAIL)
            self._metrics.archived(sizes)
        for i, j in repeats.items():
            original = results[j]
            assert original is not None
            same = original.outcome in (pb.PUT_OUTCOME_INVALID, pb.PUT_OUTCOME_EXPIRED)
            results[i] = (
                original if same else pb.PutResult(hash=original.hash, outcome=pb.PUT_OUTCOME_DUPLICATE)
            )
        final = [r for r in results if r is not None]
        counts = {o: sum(1 for r in final if r.outcome == o) for o in _OUTCOMES}
        self._metrics.outcome("inserted", counts[pb.PUT_OUTCOME_INSERTED])
        self._metrics.outcome("duplicate", counts[pb.PUT_OUTCOME_DUPLICATE])
        self._metrics.outcome("invalid", counts[pb.PUT_OUTCOME_INVALID])
        self._metrics.outcome("expired", counts[pb.PUT_OUTCOME_EXPIRED])
        return pb.PutEnvelopesResponse(
            inserted=counts[pb.PUT_OUTCOME_INSERTED],
            duplicates=counts[pb.PUT_OUTCOME_DUPLICATE],
            invalid=counts[pb.PUT_OUTCOME_INVALID],
            expired=counts[pb.PUT_OUTCOME_EXPIRED],
            results=final,
        )

    # ------------------------------------------------------------------------------------------ reads
    async def GetEnvelope(self, request: pb.GetEnvelopeRequest, context: Context) -> pb.GetEnvelopeResponse:  # noqa: N802
        """One envelope by envelope hash or message hash; NOT_FOUND when absent."""
        key = request.WhichOneof("key")
        if key is None:
            raise InvalidField("key", "set envelope_hash or message_hash")
        value = check_hash(key, getattr(request, key))
        view = _enum("view", request.view, _VIEWS)
        store = self._gate.store
        with self._store_call("get"):
            if key == "envelope_hash":
                found = await store.get(envelope_hash=value, now=self._now())
            else:
                found = await store.get(message_hash=value, now=self._now())
        if found is None:
            raise EnvelopeNotFound(key.replace("_", " "), value)
        return pb.GetEnvelopeResponse(
            envelope=envelope_message(found, view=view), message_hash=found.message_hash or b""
        )

    def _query(self, request: pb.QueryEnvelopesRequest) -> tuple[Query, str]:
        if not request.HasField("range"):
            raise InvalidField("range", "required")
        lower, upper = check_range("range", request.range.lower, request.range.upper)
        check_count("topics", len(request.topics), 0, MAX_TOPIC_INTEREST, "topics")
        topics = frozenset(check_topic(f"topics[{i}]", t) for i, t in enumerate(request.topics))
        bloom = check_bloom("bloom", request.bloom)
        if not 1 <= request.limit <= MAX_QUERY_LIMIT:
            raise LimitExceeded("limit", f"must be 1 to {MAX_QUERY_LIMIT}, got {request.limit}")
        after = None
        if request.HasField("after"):
            after = Position(request.after.sent, check_position_hash("after.hash", request.after.hash))
        direction = _enum("direction", request.direction, _DIRECTIONS)
        kind = "topics" if topics else "bloom" if bloom else "all"
        query = Query(
            lower=lower,
            upper=upper,
            limit=request.limit,
            topics=topics,
            bloom=None if topics else (bloom or FULL_BLOOM),  # no topics, no bloom: everything (API)
            after=after,
            direction=direction,
        )
        return query, kind

    async def QueryEnvelopes(  # noqa: N802
        self, request: pb.QueryEnvelopesRequest, context: Context
    ) -> pb.QueryEnvelopesResponse:
        """A page in (sent, hash) order within ``limit`` and the byte budget, resumable after ``last``."""
        query, kind = self._query(request)
        if request.max_bytes > MAX_QUERY_BYTES:
            raise LimitExceeded("max_bytes", f"must be at most {MAX_QUERY_BYTES}, got {request.max_bytes}")
        view = _enum("view", request.view, _VIEWS)
        budget = Budget(
            rlp_bytes=request.max_bytes or self._s.query_default_max_bytes,
            wire_bytes=self._s.max_message_bytes - WIRE_MARGIN,
        )
        store = self._gate.store
        began = time.perf_counter()
        response = pb.QueryEnvelopesResponse()
        with self._store_call("query"):
            if view == "packed":
                columns = await read_packed(
                    store, query, now=self._now(), budget=budget, overhead=PACKED_OVERHEAD
                )
                response.packed.CopyFrom(packed_envelopes(columns))
                count, has_more, last = len(columns.sizes), columns.has_more, columns.last
            else:
                page = await read_page(
                    store,
                    query,
                    now=self._now(),
                    budget=budget,
                    convert=lambda e: envelope_message(e, view=view),
                    wire_size=lambda m: m.ByteSize() + ELEMENT_OVERHEAD,
                )
                response.envelopes.extend(page.items)
                count, has_more, last = len(page.items), page.has_more, page.last
        self._metrics.query(kind, count, time.perf_counter() - began)
        response.has_more = has_more
        if last is not None:
            response.last.sent = last.sent
            response.last.hash = last.hash
        return response

    async def ContainsEnvelopes(  # noqa: N802
        self, request: pb.ContainsEnvelopesRequest, context: Context
    ) -> pb.ContainsEnvelopesResponse:
        """The requested hashes that are archived, per list, in request order without duplicates."""
        total = len(request.envelope_hashes) + len(request.message_hashes)
        check_count("envelope_hashes + message_hashes", total, 0, MAX_CONTAINS, "hashes")
        envs = list(
            dict.fromkeys(
                check_hash(f"envelope_hashes[{i}]", h) for i, h in enumerate(request.envelope_hashes)
            )
        )
        msgs = list(
            dict.fromkeys(check_hash(f"message_hashes[{i}]", h) for i, h in enumerate(request.message_hashes))
        )
        unique = list(dict.fromkeys([*envs, *msgs]))
        present: set[bytes] = set()
        if unique:
            store = self._gate.store
            with self._store_call("contains"):
                flags = await store.contains(unique, now=self._now())
            present = {h for h, ok in zip(unique, flags, strict=True) if ok}
        return pb.ContainsEnvelopesResponse(
            present_envelope_hashes=[h for h in envs if h in present],
            present_message_hashes=[h for h in msgs if h in present],
        )

    # ------------------------------------------------------------------------------------------ maintenance
    async def Stats(self, request: pb.StatsRequest, context: Context) -> pb.StatsResponse:  # noqa: N802
        """Counts, bytes, sent span and partitions of the archive."""
        store = self._gate.store
        with self._store_call("stats"):
            s = await mt.collect_stats(store, self._s.layout, now=self._now(), exact=request.exact)
        response = pb.StatsResponse(
            backend=s.backend,
            envelope_count=s.envelopes,
            envelope_bytes=s.envelope_bytes,
            time_bucket_count=s.time_partitions,
            topic_bucket_count=s.topic_partitions or 0,
            exact=s.exact,
        )
        if s.oldest_sent is not None and s.newest_sent is not None:
            response.sent_span.lower = s.oldest_sent
            response.sent_span.upper = s.newest_sent
        if self._s.retention.default_s is not None:
            response.default_retention.seconds = self._s.retention.default_s
        return response

    def _bucket_message(self, info: BucketInfo) -> pb.BucketInfo:
        layout = self._s.layout
        return pb.BucketInfo(
            key=pb.BucketKey(
                table=_TABLE_ENUMS[info.table],
                bucket_start=layout.start_of(info.table, info.bucket),
                shard=info.shard,
                topic=info.topic or b"",
            ),
            width=Duration(seconds=layout.width(info.table)),
            row_count=info.rows,
            byte_estimate=info.size_bytes,
            estimated=False,
        )

    async def ListBuckets(  # noqa: N802
        self, request: pb.ListBucketsRequest, context: Context
    ) -> AsyncIterator[pb.BucketInfo]:
        """Streams the partitions matching the filters, table by table in bucket order."""
        table = request.table
        if table not in (pb.BUCKET_TABLE_UNSPECIFIED, *_TABLES):
            raise InvalidField("table", f"unknown value {table}")
        topic = check_topic("topic", request.topic) if request.topic else None
        if topic is not None and table == pb.BUCKET_TABLE_TIME:
            raise InvalidField(
                "topic", "filters BUCKET_TABLE_TOPIC buckets; it cannot be used with BUCKET_TABLE_TIME"
            )
        lower, upper = _time_range("range", request.HasField("range"), request.range)
        tables = [_TABLES[table]] if table else [mt.TOPIC_TABLE] if topic else list(mt.TABLES)
        store = self._gate.store
        with self._store_call("list_buckets"):
            listing = mt.list_buckets(
                store, self._s.layout, tables, lower, upper, topic=topic, min_bytes=request.min_bytes
            )
            async for info in listing:
                yield self._bucket_message(info)

    def _bucket_key(self, field: str, key: pb.BucketKey) -> BucketInfo:
        if key.table not in _TABLES:
            raise InvalidField(f"{field}.table", "must be BUCKET_TABLE_TIME or BUCKET_TABLE_TOPIC")
        table = _TABLES[key.table]
        bucket = self._s.layout.bucket_at(table, key.bucket_start, f"{field}.bucket_start")
        if table == mt.TIME_TABLE and key.topic:
            raise InvalidField(f"{field}.topic", "must be empty for BUCKET_TABLE_TIME")
        topic = check_topic(f"{field}.topic", key.topic) if table == mt.TOPIC_TABLE else None
        return BucketInfo(table, bucket, key.shard, 0, 0, topic)

    async def DeleteBuckets(  # noqa: N802
        self, request: pb.DeleteBucketsRequest, context: Context
    ) -> pb.DeleteBucketsResponse:
        """Deletes whole partitions (or reports what would go, with dry_run), sizes as before deletion."""
        check_count("buckets", len(request.buckets), 0, MAX_BUCKET_KEYS, "buckets")
        wanted = [self._bucket_key(f"buckets[{i}]", k) for i, k in enumerate(request.buckets)]
        store = self._gate.store
        with self._store_call("delete_buckets"):
            outcome = await mt.delete_buckets(store, wanted, dry_run=request.dry_run)
        return pb.DeleteBucketsResponse(
            deleted=[self._bucket_message(e) for e in outcome.entries],
            missing=outcome.missing,
            rows_removed=outcome.rows,
            bytes_removed=outcome.bytes,
            dry_run=request.dry_run,
        )

    async def GetShardPlan(  # noqa: N802
        self, request: pb.GetShardPlanRequest, context: Context
    ) -> pb.GetShardPlanResponse:
        """The plan: derived version, defaults, widths and the entries starting in the range."""
        lower, upper = _time_range("range", request.HasField("range"), request.range)
        layout = self._s.layout
        store = self._gate.store
        with self._store_call("get_shard_plan"):
            view = await mt.read_plan(store, self._s.default_shards)
        plan = pb.ShardPlan(
            version=view.version,
            default_time_shards=view.defaults[mt.TIME_TABLE],
            default_topic_shards=view.defaults[mt.TOPIC_TABLE],
            time_bucket_width=Duration(seconds=layout.width(mt.TIME_TABLE)),
            topic_bucket_width=Duration(seconds=layout.width(mt.TOPIC_TABLE)),
        )
        for e in view.entries:
            start = layout.start_of(e.table, e.bucket)
            if lower <= start <= upper:
                plan.entries.add(table=_TABLE_ENUMS[e.table], bucket_start=start, shards=e.shards)
        return pb.GetShardPlanResponse(plan=plan)

    def _wanted_plan(self, plan: pb.ShardPlan) -> list[mt.WantedEntry]:
        layout = self._s.layout
        for name, table in (("time_bucket_width", mt.TIME_TABLE), ("topic_bucket_width", mt.TOPIC_TABLE)):
            width: Duration = getattr(plan, name)
            if (width.seconds, width.nanos) != (layout.width(table), 0):
                raise InvalidField(
                    f"plan.{name}", f"is fixed at {layout.width(table)}s by the schema; echo it"
                )
        defaults = self._s.default_shards
        for name, table in (("default_time_shards", mt.TIME_TABLE), ("default_topic_shards", mt.TOPIC_TABLE)):
            if getattr(plan, name) != defaults[table]:
                raise InvalidField(
                    f"plan.{name}", f"is fixed at {defaults[table]} by ARCHIVE_DEFAULT_SHARDS; echo it"
                )
        if len(plan.updated_by.encode()) > MAX_UPDATED_BY:
            raise InvalidField("plan.updated_by", f"must be at most {MAX_UPDATED_BY} bytes")
        wanted = []
        for i, e in enumerate(plan.entries):
            field = f"plan.entries[{i}]"
            if e.table not in _TABLES:
                raise InvalidField(f"{field}.table", "must be BUCKET_TABLE_TIME or BUCKET_TABLE_TOPIC")
            if e.topic:
                raise InvalidField(
                    f"{field}.topic",
                    "per-topic entries are not supported: a topic-table bucket (one day) is sharded "
                    "alike for every topic; leave topic empty",
                )
            if not 1 <= e.shards <= MAX_SHARDS:
                raise InvalidField(f"{field}.shards", f"must be 1 to {MAX_SHARDS}, got {e.shards}")
            table = _TABLES[e.table]
            bucket = layout.bucket_at(table, e.bucket_start, f"{field}.bucket_start")
            wanted.append(mt.WantedEntry(table, bucket, e.shards, field))
        return wanted

    async def PutShardPlan(  # noqa: N802
        self, request: pb.PutShardPlanRequest, context: Context
    ) -> pb.PutShardPlanResponse:
        """Replace the plan if it is still at ``expected_version``; returns the version now in force."""
        if not request.HasField("plan"):
            raise InvalidField("plan", "required")
        wanted = self._wanted_plan(request.plan)
        store = self._gate.store
        with self._store_call("put_shard_plan"):
            version = await mt.write_plan(store, self._s.default_shards, wanted, request.expected_version)
        return pb.PutShardPlanResponse(version=version)

    async def Expire(self, request: pb.ExpireRequest, context: Context) -> pb.ExpireResponse:  # noqa: N802
        """Removes (or with dry_run reports) whole buckets past the global cutoff or their topic's."""
        check_count("topic_retention", len(request.topic_retention), 0, MAX_BUCKET_KEYS, "overrides")
        now = request.now.seconds if request.HasField("now") else self._now()
        cutoffs: dict[bytes, int] = {}
        for i, r in enumerate(request.topic_retention):
            topic = check_topic(f"topic_retention[{i}].topic", r.topic)
            if topic in cutoffs:
                raise InvalidField(f"topic_retention[{i}].topic", f"0x{topic.hex()} is given twice")
            cutoffs[topic] = now - _seconds(f"topic_retention[{i}].retention", r.retention)
        store = self._gate.store
        with self._store_call("expire"):
            outcome = await mt.expire(
                store,
                self._s.layout,
                cutoff=request.cutoff or None,
                topic_cutoffs=cutoffs,
                now=now,
                dry_run=request.dry_run,
            )
        return pb.ExpireResponse(
            removed=[self._bucket_message(i) for i in outcome.removed],
            kept=[self._bucket_message(i) for i in outcome.kept],
            rows_removed=outcome.rows,
            bytes_removed=outcome.bytes,
            dry_run=request.dry_run,
        )
