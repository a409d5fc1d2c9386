"""The archive storage contract bound to the Cassandra adapter, plus what only Cassandra has.

Runs against the real local node (``make cassandra-start``). One keyspace serves the whole module: the
first store creates its schema, every test starts from empty tables (TRUNCATE, far cheaper than
DROP/CREATE), and the keyspace is dropped at the end. The contract runs in two tunings: the defaults
(small UNLOGGED batches, 4 time shards, 1 topic shard) and one that takes the other paths
(single-statement writes, bloom expansion over the limit → time-bucket scan with a topic filter, topic
partitions split 3 ways, only 3 requests in flight).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from archivestore.cassandra.layout import GENERATION_STRIDE
from archivestore.cassandra.schema import (
    GC_GRACE_TTL_S,
    KEYS_TABLE,
    MIGRATIONS_TABLE,
    TIME_TABLE,
    TOPIC_TABLE,
)
from archivestore.cassandra.store import CassandraStore
from archivestore.errors import SchemaError, StoreCorrupt, StoreUnavailable
from archivestore.protocol import ArchiveStore
from archivestore.retention import RetentionPolicy
from archivestore.types import BucketInfo, ExpireRequest, PutItem, ShardPlanEntry
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.archive.contract import (
    BASE,
    DAY,
    KEEP,
    TOPICS,
    ArchiveContract,
    StoreFactory,
    env,
    flatten,
    items,
    ordered,
    paginate,
    q,
)
from tools.cassandra import ctl
from wakucodec.bloom import FULL_BLOOM, topics_to_bloom

pytestmark = pytest.mark.cassandra

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

TUNINGS: dict[str, dict[str, Any]] = {
    "default": {},
    "fallbacks": {
        "write_batch_bytes": 0,
        "bloom_topic_expansion": 1,
        "default_shards": {TIME_TABLE: 2, TOPIC_TABLE: 3},
        "max_in_flight": 3,
    },
}


#: The contract moves ``now`` independently of the wall clock (it checks visibility "1000 s ago" of a row
#: whose real TTL is 1 s). Readers hide rows at ``expires_at`` whatever the TTL, so giving every row 10 more
#: minutes of physical life changes nothing visible and keeps simulated time from racing real expiry.
TTL_SLACK_S = 600


def open_store(
    node: ctl.NodeConfig, keyspace: str, retention: RetentionPolicy, **tuning: Any
) -> CassandraStore:
    """A CassandraStore on the local node (not opened yet)."""
    options: dict[str, Any] = {"request_timeout": 30.0, "ttl_slack_s": TTL_SLACK_S, **tuning}
    return CassandraStore([node.host], node.native_port, keyspace, retention, **options)


@pytest.fixture(scope="module")
def store_pool() -> Iterator[dict[str, CassandraStore]]:
    """Open stores kept across the module's tests (opening costs a connection, schema checks and 30 prepared
    statements; emptying the tables is what makes each test start fresh). Closed when the module ends."""
    pool: dict[str, CassandraStore] = {}
    yield pool

    async def close_all() -> None:
        for store in pool.values():
            await store.close()

    asyncio.run(close_all())  # nothing in a store is bound to an event loop between calls


class TestCassandraContract(ArchiveContract):
    """Every contract test against the module's keyspace, emptied before each test, in both tunings."""

    BUCKET_SECONDS = 3600

    @pytest.fixture(params=sorted(TUNINGS))
    async def make_store(
        self,
        request: pytest.FixtureRequest,
        cassandra_node: ctl.NodeConfig,
        cassandra_admin: Any,
        cassandra_keyspace: str,
        store_pool: dict[str, CassandraStore],
    ) -> AsyncIterator[StoreFactory]:
        """Stores on the module keyspace, emptied first; a store closed by the test is reopened on demand."""
        cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
        tuning = TUNINGS[request.param]

        async def factory(*, retention: RetentionPolicy = KEEP) -> ArchiveStore:
            key = f"{request.param}/{retention!r}"
            store = store_pool.get(key)
            if store is None:
                store = store_pool[key] = open_store(cassandra_node, cassandra_keyspace, retention, **tuning)
            await store.open()  # idempotent; reopens after the test closed it
            return store

        yield factory


# ---------------------------------------------------------------------- Cassandra only


@pytest.fixture
async def cstore(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> AsyncIterator[CassandraStore]:
    """A default CassandraStore on the emptied module keyspace."""
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    store = open_store(cassandra_node, cassandra_keyspace, KEEP)
    await store.open()
    yield store
    await store.close()


async def test_schema_is_versioned_with_twcs_and_short_gc_grace(
    cstore: CassandraStore, cassandra_admin: Any
) -> None:
    ks = cstore.keyspace
    assert [r.version for r in cassandra_admin.execute(f"SELECT version FROM {ks}.{MIGRATIONS_TABLE}")] == [1]
    for table in (TIME_TABLE, TOPIC_TABLE):
        row = cassandra_admin.execute(
            "SELECT compaction, gc_grace_seconds FROM system_schema.tables "
            "WHERE keyspace_name = %s AND table_name = %s",
            (ks, table),
        ).one()
        assert row.compaction["class"].endswith("TimeWindowCompactionStrategy")
        assert row.compaction["compaction_window_unit"] == "HOURS"
        assert int(row.compaction["compaction_window_size"]) % 24 == 0  # whole days: buckets never straddle
        assert row.gc_grace_seconds == GC_GRACE_TTL_S
    replication = cassandra_admin.execute(
        "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (ks,)
    ).one()
    assert replication.replication["class"].endswith("SimpleStrategy")


async def test_open_refuses_a_newer_schema(
    cstore: CassandraStore, cassandra_admin: Any, cassandra_node: ctl.NodeConfig
) -> None:
    ks = cstore.keyspace
    cassandra_admin.execute(
        f"INSERT INTO {ks}.{MIGRATIONS_TABLE} (version, description) VALUES (2, 'future')"
    )
    try:
        with pytest.raises(SchemaError, match="newer"):
            await open_store(cassandra_node, ks, KEEP).open()
    finally:
        cassandra_admin.execute(f"DELETE FROM {ks}.{MIGRATIONS_TABLE} WHERE version = 2")


async def test_open_is_idempotent_and_close_twice_is_harmless(cstore: CassandraStore) -> None:
    await cstore.open()
    await cstore.close()
    await cstore.close()
    await cstore.open()
    assert (await cstore.put(items([env(BASE)]), now=BASE)).inserted == 1


async def test_unreachable_contact_point_is_unavailable() -> None:
    store = CassandraStore(["127.0.0.1"], 1, "mmt_unreachable", KEEP, connect_timeout=1.0)
    with pytest.raises(StoreUnavailable):
        await store.open()
    with pytest.raises(StoreUnavailable):
        await store.put(items([env(BASE)]), now=BASE)


async def test_caller_errors_are_value_errors(cstore: CassandraStore) -> None:
    bad = env(BASE)
    with pytest.raises(ValueError):
        await cstore.put(
            [PutItem(type(bad)(bad.sent, bad.hash[:31], bad.topic, bad.expiry, bad.raw))], now=BASE
        )
    with pytest.raises(ValueError):
        await cstore.query(q(bloom=b"\xff" * 63), now=BASE)
    with pytest.raises(ValueError):
        await cstore.get(now=BASE)
    with pytest.raises(ValueError):
        _ = [b async for b in cstore.list_buckets("envelopes", 0, 1)]
    with pytest.raises(ValueError):
        await cstore.put_shard_plan([ShardPlanEntry(TIME_TABLE, 1, 40_000, 4)])


async def test_get_refuses_a_row_whose_bytes_changed(cstore: CassandraStore, cassandra_admin: Any) -> None:
    e = env(BASE)
    await cstore.put(items([e]), now=BASE)
    bucket = BASE // 3600
    row = cassandra_admin.execute(
        f"SELECT shard FROM {cstore.keyspace}.{TIME_TABLE} WHERE bucket = %s ALLOW FILTERING", (bucket,)
    ).one()
    cassandra_admin.execute(
        f"UPDATE {cstore.keyspace}.{TIME_TABLE} SET raw = %s WHERE bucket = %s AND shard = %s AND sent = %s "
        "AND hash = %s",
        (e.raw[:-1] + b"\x00", bucket, row.shard, e.sent, e.hash),
    )
    with pytest.raises(StoreCorrupt, match="no longer hashes"):
        await cstore.get(envelope_hash=e.hash, now=BASE)


async def test_rows_carry_ttl_from_retention(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    store = open_store(cassandra_node, cassandra_keyspace, RetentionPolicy(default_s=3 * DAY))
    await store.open()
    try:
        e = env(BASE)
        await store.put(items([e]), now=BASE + DAY)  # 2 days of retention left at "now"
        ks = store.keyspace
        ttl = cassandra_admin.execute(
            f"SELECT TTL(raw) FROM {ks}.{TOPIC_TABLE} WHERE topic = %s AND day = %s AND shard = 0",
            (e.topic, BASE // DAY),
        ).one()[0]
        assert 2 * DAY - 60 + TTL_SLACK_S <= ttl <= 2 * DAY + TTL_SLACK_S
        key_ttl = cassandra_admin.execute(
            f"SELECT TTL(kind) FROM {ks}.{KEYS_TABLE} WHERE key = %s", (e.hash,)
        ).one()[0]
        assert 2 * DAY - 60 + TTL_SLACK_S <= key_ttl <= 2 * DAY + TTL_SLACK_S
    finally:
        await store.close()


async def test_reads_merge_every_shard_generation(cstore: CassandraStore) -> None:
    """A plan flip moves new writes to the new generation; rows of the old one stay readable (and unique)."""
    bucket = BASE // 3600
    old = [env(BASE + i, TOPICS[i % 3], i) for i in range(40)]
    await cstore.put(items(old), now=BASE)
    await cstore.put_shard_plan(
        [ShardPlanEntry(TIME_TABLE, bucket, 1, 7), ShardPlanEntry(TOPIC_TABLE, BASE // DAY, 2, 5)]
    )
    new = [env(BASE + i, TOPICS[i % 3], 100 + i) for i in range(40)]
    await cstore.put(items(new + old[:10]), now=BASE)  # old[:10] is now copied into generation 1 as well
    shards = {b.shard // GENERATION_STRIDE async for b in cstore.list_buckets(TIME_TABLE, bucket, bucket)}
    assert shards == {0, 1}
    everything = ordered(old + new)
    assert flatten(await paginate(cstore, q(bloom=FULL_BLOOM, limit=9))) == everything
    assert flatten(await paginate(cstore, q(topics=TOPICS[:3], limit=9))) == everything
    assert flatten(await paginate(cstore, q(bloom=topics_to_bloom(TOPICS[:3]), limit=9))) == everything
    assert (await cstore.stats(now=BASE)).envelopes == 80
    assert await cstore.get(envelope_hash=old[20].hash, now=BASE) == old[20]


async def test_deleting_an_old_generation_keeps_the_envelopes(cstore: CassandraStore) -> None:
    """What the Spark job does after a repartition: the old generation's partitions go, the rows stay."""
    bucket = BASE // 3600
    envs = [env(BASE + i, TOPICS[i % 2], i) for i in range(30)]
    await cstore.put(items(envs), now=BASE)
    await cstore.put_shard_plan([ShardPlanEntry(TIME_TABLE, bucket, 1, 3)])
    await cstore.put(items(envs), now=BASE)  # the rewrite into generation 1
    old = [b async for b in cstore.list_buckets(TIME_TABLE, bucket, bucket) if b.shard < GENERATION_STRIDE]
    assert sum(b.rows for b in old) == 30
    assert await cstore.delete_buckets(old) == len(old)
    left = [b async for b in cstore.list_buckets(TIME_TABLE, bucket, bucket)]
    assert {b.shard // GENERATION_STRIDE for b in left} == {1} and sum(b.rows for b in left) == 30
    assert flatten(await paginate(cstore, q(bloom=FULL_BLOOM, limit=7))) == ordered(envs)
    assert await cstore.contains([e.hash for e in envs], now=BASE) == [True] * 30


async def test_expire_deletes_whole_partitions_and_hides_the_rest(
    cstore: CassandraStore, cassandra_admin: Any
) -> None:
    hour = 3600
    envs = [env(BASE + h * hour + i, t, i) for h in range(4) for i, t in enumerate([TOPICS[0], TOPICS[1]])]
    await cstore.put(items(envs), now=BASE)
    cutoff = (BASE // hour + 2) * hour + 1  # two whole buckets below, one row of the third
    result = await cstore.expire(ExpireRequest(cutoff), now=BASE)
    assert result.envelopes == len([e for e in envs if e.sent < cutoff])
    ks = cstore.keyspace
    # Physically gone: the two whole buckets. Still there (hidden, left to TTL): the straddling bucket's row.
    for h, present in [(0, False), (1, False), (2, True), (3, True)]:
        count = sum(
            cassandra_admin.execute(
                f"SELECT COUNT(*) FROM {ks}.{TIME_TABLE} WHERE bucket = %s AND shard = %s",
                (BASE // hour + h, s),
            ).one()[0]
            for s in range(4)
        )
        assert (count > 0) is present, h
    assert await cstore.contains([e.hash for e in envs], now=BASE) == [e.sent >= cutoff for e in envs]
    # A re-put after the erasure is a new write: the envelope is back, as after a real delete.
    again = [e for e in envs if e.sent < cutoff][:2]
    assert (await cstore.put(items(again), now=BASE)).inserted == 2
    assert await cstore.contains([e.hash for e in again], now=BASE) == [True, True]


async def test_put_skips_nothing_when_duplicate_detection_is_off(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    store = open_store(cassandra_node, cassandra_keyspace, KEEP, detect_duplicates=False)
    await store.open()
    try:
        envs = [env(BASE + i, n=i, size=1024) for i in range(20)]
        assert (await store.put(items(envs), now=BASE)).inserted == 20
        assert (await store.put(items(envs), now=BASE)).inserted == 20  # labels off: blind upserts only
        assert (await store.stats(now=BASE)).envelopes == 20
    finally:
        await store.close()


async def test_bucket_info_of_a_missing_partition_deletes_nothing(cstore: CassandraStore) -> None:
    await cstore.put(items([env(BASE)]), now=BASE)
    assert await cstore.delete_buckets([BucketInfo(TIME_TABLE, BASE // 3600 + 5, 0, 0, 0)]) == 0
    assert (await cstore.stats(now=BASE)).envelopes == 1


async def test_stats_above_the_exact_limit_is_estimated_from_server_counts(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    store = open_store(cassandra_node, cassandra_keyspace, KEEP, stats_exact_max_rows=0)
    await store.open()
    try:
        envs = [env(BASE + i * 600, TOPICS[i % 4], i) for i in range(30)]  # 5 hours, 4 topics
        await store.put(items(envs), now=BASE)
        stats = await store.stats(now=BASE)
        assert (stats.envelopes, stats.topics) == (30, 4)
        assert (stats.oldest_sent, stats.newest_sent) == (BASE, BASE + 29 * 600)
        assert stats.detail["estimated"] == 1
    finally:
        await store.close()
