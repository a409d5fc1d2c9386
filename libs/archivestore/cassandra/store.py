"""The Cassandra archive adapter (docs/archive.md: "Queries on Cassandra", "Cassandra adapter").

This module validates arguments and wires the backend's modules (listed in :mod:`archivestore.cassandra`)
together. Semantics are the protocol's, as pinned by tests/integration/archive/contract.py; caller errors
raise ``ValueError``, backend failures StoreError.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster, Session

from archivestore.cassandra import lookups as keys
from archivestore.cassandra.bridge import ArchiveBridge
from archivestore.cassandra.catalog import Catalog
from archivestore.cassandra.layout import check_table, validate_plan_entry
from archivestore.cassandra.maintenance import Maintenance
from archivestore.cassandra.query import QuerySettings, Row, run_query, to_envelope
from archivestore.cassandra.schema import (
    LATEST_VERSION,
    MIGRATIONS_TABLE,
    TIME_TABLE,
    TOPIC_TABLE,
    SchemaOptions,
    check_identifier,
    keyspace_cql,
    migrations_table_cql,
    pending_migrations,
)
from archivestore.cassandra.statements import Prepared
from archivestore.cassandra.writes import DEFAULT_WRITE_BATCH_BYTES, label_duplicates, plan_put
from archivestore.errors import SchemaError, StoreUnavailable, from_db
from archivestore.ordering import HASH_LEN
from archivestore.retention import RetentionPolicy
from archivestore.types import (
    BucketInfo,
    ExpireRequest,
    ExpireResult,
    PackedPage,
    PutItem,
    PutResult,
    Query,
    QueryPage,
    ShardPlanEntry,
    Stats,
    StoredEnvelope,
)
from dbkit.cassandra.bridge import replica_set
from dbkit.cassandra.cluster import ConnectOptions, build_cluster, translate
from dbkit.cassandra.credentials import Credentials
from wakucodec.constants import BLOOM_SIZE, TOPIC_LENGTH

__all__ = ["DEFAULT_SHARDS", "CassandraStore"]

#: Shards per bucket when the plan has no entry: hour buckets of the time table take every envelope, so they
#: are split 4 ways; a topic-day partition holds one topic's day and starts unsplit (the Spark job splits hot
#: ones). Both stay far below ~100 MB per partition at production rates (~10/s,
#: docs/benchmarks.md "Reference: nwaku store"; limits: docs/cassandra.md "Sources: data model").
DEFAULT_SHARDS: Mapping[str, int] = {TIME_TABLE: 4, TOPIC_TABLE: 1}


class CassandraStore:
    """:class:`archivestore.protocol.ArchiveStore` on Apache Cassandra (5.0; protocol v5).

    Args:
        contact_points: hosts of the local data centre to bootstrap from.
        port: CQL native port.
        keyspace: keyspace name (created at ``open`` with ``replication``).
        retention: global and per-topic retention; decides each row's TTL and ``expires_at``.
        consistency: consistency level of every read and write (LOCAL_QUORUM: read-your-writes with RF 3).
        bucket_seconds: width of ``envelopes_by_time`` buckets (``ARCHIVE_BUCKET_SECONDS``); divides a day.
        default_shards: shards per table when a bucket has no plan entry (``ARCHIVE_DEFAULT_SHARDS``).
        max_in_flight: requests outstanding at once on this store (backpressure on the driver).
        request_timeout: client-side timeout per request, seconds (above the server's 5 s write timeout).
        replication: keyspace replication map; SimpleStrategy RF 1 (a dev node) when None.
        local_dc: data centre whose replicas coordinate (driver picks the contact point's when None).
        write_batch_bytes: UNLOGGED batches of same-partition rows up to about this size; 0 = single inserts.
            A single-partition batch is one mutation, which Cassandra exempts from its batch size warn and
            fail thresholds (CASSANDRA-10876); the bound is the maximum mutation size (half a commit log
            segment, 16 MiB by default).
        detect_duplicates: label DUPLICATE via one ``IN`` read of envelope_keys per put (off: all INSERTED).
        bloom_topic_expansion: bloom queries matching at most this many catalogued topics read topic
            partitions; more scan the time buckets (``ARCHIVE_BLOOM_TOPIC_EXPANSION``).
        ttl_slack_s: seconds added to every physical TTL (reads still hide rows at ``expires_at``).
        protocol_version: native protocol (5: checksummed frames; 4 costs the client ~0.05 ms less a request).
        key_batch_partitions: envelope_keys rows (one partition each) per UNLOGGED batch of rows sharing a
            replica set; 1 sends them one by one.
        stats_exact_max_rows: ``stats`` is exact up to this many stored rows, estimated above (see
            ``Maintenance.stats``).
    """

    backend = "cassandra"

    def __init__(
        self,
        contact_points: Sequence[str],
        port: int = 9042,
        keyspace: str = "mailmesh",
        retention: RetentionPolicy | None = None,
        *,
        consistency: int = ConsistencyLevel.LOCAL_QUORUM,
        bucket_seconds: int = 3600,
        default_shards: Mapping[str, int] | None = None,
        max_in_flight: int = 512,
        request_timeout: float = 12.0,
        connect_timeout: float = 5.0,
        replication: Mapping[str, str | int] | None = None,
        local_dc: str | None = None,
        write_batch_bytes: int = DEFAULT_WRITE_BATCH_BYTES,
        detect_duplicates: bool = True,
        bloom_topic_expansion: int = 64,
        ttl_slack_s: int = 0,
        stats_exact_max_rows: int = 200_000,
        protocol_version: int = 5,
        key_batch_partitions: int = 10,
        credentials: Credentials | None = None,
    ) -> None:
        self.keyspace = check_identifier(keyspace)
        self.retention = retention if retention is not None else RetentionPolicy()
        shards = dict(DEFAULT_SHARDS) if default_shards is None else dict(default_shards)
        if set(shards) != set(DEFAULT_SHARDS) or min(shards.values()) < 1:
            raise ValueError(f"default_shards needs a count >= 1 for each of {sorted(DEFAULT_SHARDS)}")
        if min(max_in_flight, key_batch_partitions) < 1:
            raise ValueError("max_in_flight and key_batch_partitions must be >= 1")
        if min(write_batch_bytes, bloom_topic_expansion, ttl_slack_s) < 0:
            raise ValueError("write_batch_bytes, bloom_topic_expansion and ttl_slack_s must be >= 0")
        self.schema_options = SchemaOptions.derive(bucket_seconds, self.retention)
        self.bucket_seconds = bucket_seconds
        self.default_shards = shards
        self.replication: dict[str, str | int] = dict(
            replication or {"class": "SimpleStrategy", "replication_factor": 1}
        )
        self.write_batch_bytes = write_batch_bytes
        self.key_batch_partitions = key_batch_partitions
        self.detect_duplicates = detect_duplicates
        self.ttl_slack_s = ttl_slack_s
        self.stats_exact_max_rows = stats_exact_max_rows
        self._query_settings = QuerySettings(bucket_seconds, bloom_topic_expansion)
        self._connect = ConnectOptions(
            tuple(contact_points),
            port,
            consistency,
            request_timeout,
            connect_timeout,
            local_dc,
            max_in_flight,
            protocol_version,
            credentials,
        )
        self._cluster: Cluster | None = None
        self._claims: dict[bytes, asyncio.Future[bool]] = {}
        #: Per claimed hash, resolved once its claimer's envelope_keys read has returned (see ``put``).
        self._claim_reads: dict[bytes, asyncio.Future[None]] = {}
        self._cat: Catalog | None = None
        self._maint: Maintenance | None = None

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        """Connect, create the keyspace, apply pending migrations, prepare statements. Idempotent."""
        if self._cat is not None:
            return
        cluster = build_cluster(self._connect)
        try:
            session, q = await asyncio.to_thread(self._open_sync, cluster)
        except BaseException:
            await asyncio.to_thread(cluster.shutdown)
            raise
        self._cluster = cluster
        self._cat = Catalog(
            ArchiveBridge(session, self._connect.max_in_flight), q, self.default_shards, self.bucket_seconds
        )
        keep = [s for s in (self.retention.default_s, *self.retention.per_topic_s.values()) if s is not None]
        keep_s = None if self.retention.default_s is None else max(keep) + self.ttl_slack_s
        self._maint = Maintenance(self._cat, self.bucket_seconds, keep_s)

    def _open_sync(self, cluster: Cluster) -> tuple[Session, Prepared]:
        try:
            session = cluster.connect()
        except Exception as err:
            raise StoreUnavailable(
                f"cannot connect to Cassandra at {self._connect.contact_points}: {err}"
            ) from err
        ks = self.keyspace
        try:
            session.execute(keyspace_cql(ks, self.replication))
            session.execute(migrations_table_cql(ks))
            applied = {row[0] for row in session.execute(f"SELECT version FROM {ks}.{MIGRATIONS_TABLE}")}
            for migration in pending_migrations(applied):
                for cql in migration.statements(ks, self.schema_options):
                    session.execute(cql)
                session.execute(
                    f"INSERT INTO {ks}.{MIGRATIONS_TABLE} (version, description, applied_at) "
                    "VALUES (%s, %s, %s)",
                    (migration.version, migration.description, datetime.now(UTC)),
                )
            return session, Prepared.prepare(session, ks)
        except SchemaError:
            raise
        except Exception as err:
            mapped = from_db(translate(err, "schema migration"))
            if isinstance(mapped, StoreUnavailable):
                raise mapped from err
            raise SchemaError(f"migrating keyspace {ks} to version {LATEST_VERSION} failed: {err}") from err

    async def close(self) -> None:
        """Wait for requests in flight, then shut the driver down."""
        cat, cluster = self._cat, self._cluster
        self._cat = self._maint = None
        self._cluster = None
        if cat is not None:
            await cat.bridge.drain()
        if cluster is not None:
            await asyncio.to_thread(cluster.shutdown)

    @property
    def cat(self) -> Catalog:
        """The open store's catalog (StoreError when not open)."""
        if self._cat is None:
            raise StoreUnavailable("CassandraStore is not open")
        return self._cat

    @property
    def maint(self) -> Maintenance:
        """Maintenance operations of the open store."""
        if self._maint is None:
            raise StoreUnavailable("CassandraStore is not open")
        return self._maint

    @property
    def session(self) -> Session:
        """The driver session (tests and tools; the adapter's own statements go through the bridge)."""
        return self.cat.bridge.session

    # ------------------------------------------------------------------ writes
    async def put(self, items: Sequence[PutItem], *, now: int) -> PutResult:
        """Write a batch; returns once every statement was acknowledged at the configured consistency.

        Any failure raises StoreUnavailable/StoreError and nothing is reported: the caller retries the whole
        batch (every write is an idempotent upsert). DUPLICATE needs no read-before-write for correctness:
        one ``IN`` read of envelope_keys per 100 hashes labels envelopes a previous put acknowledged, and an
        in-process claim table labels those another put of this store has in flight (the first to claim a
        hash reports INSERTED, later ones DUPLICATE once it succeeded). Across processes the label is
        best effort; the stored data is the same either way.
        """
        for item in items:
            _check_envelope(item.envelope)
        if not items:
            return PutResult(())
        cat = self.cat
        sents = [i.envelope.sent for i in items]
        lo, hi = min(sents), max(sents)
        bs = self.bucket_seconds
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[bool] = loop.create_future()
        my_read: asyncio.Future[None] = loop.create_future()
        claimed: list[bytes] = []
        waits: dict[bytes, asyncio.Future[bool]] = {}
        their_reads: set[asyncio.Future[None]] = set()
        if self.detect_duplicates:
            for item in items:
                h = item.envelope.hash
                other = self._claims.get(h)
                if other is None:
                    self._claims[h] = mine
                    self._claim_reads[h] = my_read
                    claimed.append(h)
                elif other is not mine:
                    waits[h] = other
                    their_reads.add(self._claim_reads[h])
        try:
            stored_f = keys.stored_envelopes(cat, claimed) if claimed else _no_keys()
            try:
                time_plan, topic_plan, stored = await asyncio.gather(
                    cat.plan(TIME_TABLE, lo // bs, hi // bs),
                    cat.plan(TOPIC_TABLE, lo // 86400, hi // 86400),
                    stored_f,
                )
            finally:
                my_read.set_result(None)
            # This put also writes the key rows of hashes another put claimed; had those landed before the
            # claimer's read, the claimer would take them for an earlier put's and report DUPLICATE too (a
            # race seen under load: nobody INSERTED). So wait until every such claimer has read its keys.
            if their_reads:
                await asyncio.shield(asyncio.gather(*their_reads))
            plan = plan_put(
                items,
                now=now,
                q=cat.q,
                retention=self.retention,
                time_plan=time_plan,
                topic_plan=topic_plan,
                bucket_seconds=bs,
                batch_bytes=self.write_batch_bytes,
                ttl_slack_s=self.ttl_slack_s,
                key_batch=self.key_batch_partitions,
                replicas_of=self._replicas_of,
            )
            await cat.bridge.execute_all(plan.data, what="put")
            await cat.bridge.execute_all(plan.keys, what="put")
            mine.set_result(True)  # before waiting on others: two puts waiting on each other cannot deadlock
            for h, fut in waits.items():
                if await asyncio.shield(fut):  # the put that claimed it first acknowledged it
                    stored.add(h)
            return PutResult(tuple(label_duplicates(plan, items, stored)))
        finally:
            if not mine.done():
                mine.set_result(False)
            if not my_read.done():
                my_read.set_result(None)
            for h in claimed:
                if self._claims.get(h) is mine:
                    del self._claims[h]
                    del self._claim_reads[h]

    def _replicas_of(self, stmt: Any) -> tuple[str, ...]:
        """The replica set owning a bound statement's partition (from the driver's token map)."""
        assert self._cluster is not None
        return replica_set(self._cluster.metadata, self.keyspace, stmt)

    # ------------------------------------------------------------------ point reads
    async def get(
        self, *, envelope_hash: bytes | None = None, message_hash: bytes | None = None, now: int
    ) -> StoredEnvelope | None:
        """The visible envelope with this envelope hash, or the first (in order) with this message hash."""
        if (envelope_hash is None) == (message_hash is None):
            raise ValueError("give exactly one of envelope_hash and message_hash")
        if envelope_hash is not None:
            return await keys.get(self.cat, envelope_hash, message=False, now=now)
        assert message_hash is not None
        return await keys.get(self.cat, message_hash, message=True, now=now)

    async def contains(self, hashes: Sequence[bytes], *, now: int) -> list[bool]:
        """Per hash (envelope or message hash), whether a visible envelope has it."""
        return await keys.contains(self.cat, hashes, now)

    async def query(self, query: Query, *, now: int) -> QueryPage:
        """Envelopes matching ``query`` in ``(sent, hash)`` order (reversed backward), plus ``has_more``."""
        rows, more = await self._rows(query, now)
        return QueryPage([to_envelope(r) for r in rows], more)

    async def query_packed(self, query: Query, *, now: int) -> PackedPage:
        """:meth:`query` as columns, transposed from the merged rows in C (``zip``), no object per row."""
        rows, more = await self._rows(query, now, lean=True)
        if not rows:
            return PackedPage((), (), (), more)
        sents, hashes, _topics, _expiries, raws, *_rest = zip(*rows, strict=True)
        return PackedPage(raws, sents, hashes, more)

    async def _rows(self, query: Query, now: int, *, lean: bool = False) -> tuple[list[Row], bool]:
        """Validated ``query``'s merged rows (at most ``limit``) and whether more follow (``lean``: see
        ``run_query``)."""
        if query.limit < 1:
            raise ValueError(f"limit must be at least 1, got {query.limit}")
        if not query.topics:
            if not query.bloom:
                raise ValueError("bloom filter and topics is empty")
            if len(query.bloom) != BLOOM_SIZE:
                raise ValueError(f"bloom must be {BLOOM_SIZE} bytes, got {len(query.bloom)}")
        if query.lower > query.upper:
            return [], False
        return await run_query(self.cat, self._query_settings, query, now, lean=lean)

    # ------------------------------------------------------------------ maintenance
    async def stats(self, *, now: int) -> Stats:
        """Visible envelopes and topics, oldest/newest sent (see Maintenance.stats for exactness)."""
        return await self.maint.stats(now, self.stats_exact_max_rows)

    async def list_buckets(
        self, table: str, lower_bucket: int, upper_bucket: int
    ) -> AsyncIterator[BucketInfo]:
        """Non-empty partitions (every shard generation) with their rows and raw bytes."""
        check_table(table)
        async for info in self.maint.list_buckets(table, lower_bucket, upper_bucket):
            yield info

    async def delete_buckets(self, buckets: Sequence[BucketInfo]) -> int:
        """Delete whole partitions; returns how many held rows."""
        return await self.maint.delete_buckets(buckets)

    async def get_shard_plan(self, table: str) -> list[ShardPlanEntry]:
        """The current (newest generation) entry per bucket of ``table``."""
        check_table(table)
        latest: dict[int, ShardPlanEntry] = {}
        for e in await self.cat.plan_entries(table):
            if e.bucket not in latest or e.generation > latest[e.bucket].generation:
                latest[e.bucket] = e
        return [latest[b] for b in sorted(latest)]

    async def put_shard_plan(self, entries: Sequence[ShardPlanEntry]) -> None:
        """Publish entries; every replica reads the plan per operation, so they apply from the next one."""
        for e in entries:
            validate_plan_entry(e)
        stmts = [self.cat.q.ins_plan.bind((e.table, e.bucket, e.generation, e.shards)) for e in entries]
        await self.cat.bridge.execute_all(stmts, what="put_shard_plan")

    async def expire(self, request: ExpireRequest, *, now: int) -> ExpireResult:
        """Remove envelopes below the cutoffs: whole partitions deleted, the rest erased until their TTL."""
        return await self.maint.expire(request, now)


async def _no_keys() -> set[bytes]:
    return set()


def _check_envelope(env: StoredEnvelope) -> None:
    if len(env.hash) != HASH_LEN:
        raise ValueError(f"envelope hash must be {HASH_LEN} bytes, got {len(env.hash)}")
    if len(env.topic) != TOPIC_LENGTH:
        raise ValueError(f"topic must be {TOPIC_LENGTH} bytes, got {len(env.topic)}")
    if env.sent < 0:
        raise ValueError(f"sent must be non-negative, got {env.sent}")
