"""``mailmesh.archive.v1.ArchiveService``: each handler translates, calls the logic, translates back.

Requests become archivestore / logic types in :mod:`~services.archive.translate`; writes are
:mod:`~services.archive.writes`, pages under a byte budget :mod:`~services.archive.paging`, maintenance
:mod:`~services.archive.maintenance`. The store is reached through the
:class:`~services.archive.lifecycle.StoreGate` inside :func:`~services.archive.errors.store_errors`, which
turns storage errors into the service's errors; the shared meshcore interceptor maps those to status codes.
Behaviour decisions are listed in the service README.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import grpc.aio
from google.protobuf.duration_pb2 import Duration

from archivestore.retention import RetentionPolicy
from archivestore.types import BucketInfo, PutItem, PutResult
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.archive.v1 import archive_pb2_grpc
from meshcore.errors import MeshError
from services.archive import maintenance as mt
from services.archive import translate as tr
from services.archive.errors import EnvelopeNotFound, InvalidField, LimitExceeded, store_errors
from services.archive.lifecycle import StoreGate
from services.archive.metrics import ArchiveMetrics
from services.archive.paging import Budget, read_packed, read_page
from services.archive.validation import check_count, check_hash, check_topic
from services.archive.writes import WriteOutcome, write_batch

__all__ = ["SERVICE_NAME", "ArchiveServicer", "ServicerSettings"]

SERVICE_NAME = "mailmesh.archive.v1.ArchiveService"
MAX_QUERY_BYTES = 64 * 1024 * 1024
MAX_CONTAINS = 1000
MAX_BUCKET_KEYS = 10_000
#: Bytes of a response kept free for everything but the envelopes (has_more, last, framing).
WIRE_MARGIN = 1024
#: Encoded overhead of one element of a repeated message field: tag + length varint.
ELEMENT_OVERHEAD = 6
#: Encoded bytes of one envelope in PackedEnvelopes besides its RLP: the hash, a sent varint (<= 5 bytes) and
#: a size varint (<= 4 bytes for the 10 MiB envelope cap).
PACKED_OVERHEAD = 32 + 5 + 4

Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"


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
    async def PutEnvelopes(  # noqa: N802
        self, request: pb.PutEnvelopesRequest, context: Context
    ) -> pb.PutEnvelopesResponse:
        """Integrity-check each item, store the valid ones in one batch, report per item in order."""
        check_count("items", len(request.items), 1, self._s.max_put_items)
        limit = self._s.max_envelope_bytes
        candidates = [tr.candidate_of(item, max_envelope_bytes=limit) for item in request.items]
        store = self._gate.store
        now = self._now()

        async def put(batch: list[PutItem]) -> PutResult:
            began = time.perf_counter()
            try:
                with self._store_call("put"):
                    result = await store.put(batch, now=now)
            except MeshError:
                self._metrics.put_failed(len(batch))
                raise
            self._metrics.put_batch(len(batch), time.perf_counter() - began)
            return result

        report = await write_batch(candidates, put)
        self._metrics.archived(report.inserted_sizes)
        counts = {o: report.count(o) for o in WriteOutcome}
        for outcome, count in counts.items():
            self._metrics.outcome(outcome.value, count)
        return pb.PutEnvelopesResponse(
            inserted=counts[WriteOutcome.INSERTED],
            duplicates=counts[WriteOutcome.DUPLICATE],
            invalid=counts[WriteOutcome.INVALID],
            expired=counts[WriteOutcome.EXPIRED],
            results=[
                pb.PutResult(hash=r.hash, outcome=tr.OUTCOMES[r.outcome], detail=r.detail)
                for r in report.results
            ],
        )

    # ------------------------------------------------------------------------------------------ reads
    async def GetEnvelope(self, request: pb.GetEnvelopeRequest, context: Context) -> pb.GetEnvelopeResponse:  # noqa: N802
        """One envelope by envelope hash or message hash; NOT_FOUND when absent."""
        key = request.WhichOneof("key")
        if key is None:
            raise InvalidField("key", "set envelope_hash or message_hash")
        value = check_hash(key, getattr(request, key))
        view = tr.enum_value("view", request.view, tr.VIEWS)
        store = self._gate.store
        with self._store_call("get"):
            if key == "envelope_hash":
                found = await store.get(envelope_hash=value, now=self._now())
            else:
                found = await store.get(message_hash=value, now=self._now())
        if found is None:
            raise EnvelopeNotFound(key.replace("_", " "), value)
        return pb.GetEnvelopeResponse(
            envelope=tr.envelope_message(found, view=view), message_hash=found.message_hash or b""
        )

    async def QueryEnvelopes(  # noqa: N802
        self, request: pb.QueryEnvelopesRequest, context: Context
    ) -> pb.QueryEnvelopesResponse:
        """A page in (sent, hash) order within ``limit`` and the byte budget, resumable after ``last``."""
        query, kind = tr.query_of(request)
        if request.max_bytes > MAX_QUERY_BYTES:
            raise LimitExceeded("max_bytes", f"must be at most {MAX_QUERY_BYTES}, got {request.max_bytes}")
        view = tr.enum_value("view", request.view, tr.VIEWS)
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
                response.packed.CopyFrom(tr.packed_envelopes(columns))
                count, has_more, last = len(columns.sizes), columns.has_more, columns.last
            else:
                page = await read_page(
                    store,
                    query,
                    now=self._now(),
                    budget=budget,
                    convert=lambda e: tr.envelope_message(e, view=view),
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
        return tr.bucket_message(self._s.layout, info)

    async def ListBuckets(  # noqa: N802
        self, request: pb.ListBucketsRequest, context: Context
    ) -> AsyncIterator[pb.BucketInfo]:
        """Streams the partitions matching the filters, table by table in bucket order."""
        table = request.table
        if table not in (pb.BUCKET_TABLE_UNSPECIFIED, *tr.TABLES):
            raise InvalidField("table", f"unknown value {table}")
        topic = check_topic("topic", request.topic) if request.topic else None
        if topic is not None and table == pb.BUCKET_TABLE_TIME:
            raise InvalidField(
                "topic", "filters BUCKET_TABLE_TOPIC buckets; it cannot be used with BUCKET_TABLE_TIME"
            )
        lower, upper = tr.time_range("range", request.HasField("range"), request.range)
        tables = [tr.TABLES[table]] if table else [mt.TOPIC_TABLE] if topic else list(mt.TABLES)
        store = self._gate.store
        with self._store_call("list_buckets"):
            listing = mt.list_buckets(
                store, self._s.layout, tables, lower, upper, topic=topic, min_bytes=request.min_bytes
            )
            async for info in listing:
                yield self._bucket_message(info)

    async def DeleteBuckets(  # noqa: N802
        self, request: pb.DeleteBucketsRequest, context: Context
    ) -> pb.DeleteBucketsResponse:
        """Deletes whole partitions (or reports what would go, with dry_run), sizes as before deletion."""
        check_count("buckets", len(request.buckets), 0, MAX_BUCKET_KEYS, "buckets")
        wanted = [tr.bucket_key(self._s.layout, f"buckets[{i}]", k) for i, k in enumerate(request.buckets)]
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
        lower, upper = tr.time_range("range", request.HasField("range"), request.range)
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
                plan.entries.add(table=tr.TABLE_ENUMS[e.table], bucket_start=start, shards=e.shards)
        return pb.GetShardPlanResponse(plan=plan)

    async def PutShardPlan(  # noqa: N802
        self, request: pb.PutShardPlanRequest, context: Context
    ) -> pb.PutShardPlanResponse:
        """Replace the plan if it is still at ``expected_version``; returns the version now in force."""
        if not request.HasField("plan"):
            raise InvalidField("plan", "required")
        wanted = tr.wanted_plan(self._s.layout, self._s.default_shards, request.plan)
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
            cutoffs[topic] = now - tr.seconds_of(f"topic_retention[{i}].retention", r.retention)
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
