"""The messaging store contract bound to the Cassandra backend, on the real local node.

One keyspace serves the module (``mmt_msgstore_cassandra_<pid>``, dropped at the end; the node itself is
shared and never touched); every test starts from empty tables (TRUNCATE).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from msgstore.cassandra import outbox as outbox_module
from msgstore.cassandra.schema import DATA_TABLES
from msgstore.cassandra.store import CassandraMsgStore
from msgstore.config import StoreConfig
from msgstore.errors import StoreUnavailable
from msgstore.factory import create_store, open_store
from msgstore.protocol import MsgStore
from msgstore.settings import StoreSettings
from msgstore.sharding import DAY_S, day_of, shard_of
from msgstore.types import OutboxEntry, SendState
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.msgstore.contract import (
    SETTINGS,
    SHARDS,
    T0,
    Interleave,
    MsgStoreContract,
    Observer,
    StoreFactory,
)
from tests.integration.msgstore.contract_data import advanced, entry, record, shard_lease, writer_of
from tools.cassandra import ctl

pytestmark = pytest.mark.cassandra

Slot = tuple[str, str, int]

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace


def _empty(admin: Any, keyspace: str) -> None:
    existing = {
        row[0]
        for row in cf.admin_execute(
            admin, "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
        )
    }
    for future in [admin.execute_async(f"TRUNCATE {keyspace}.{t}") for t in DATA_TABLES if t in existing]:
        future.result()


class TestCassandraContract(MsgStoreContract):
    """Every contract test against the module's keyspace, emptied before each test."""

    @pytest.fixture
    async def make_store(
        self, cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
    ) -> AsyncIterator[StoreFactory]:
        """Open CassandraMsgStores on the module keyspace; all are closed at teardown."""
        _empty(cassandra_admin, cassandra_keyspace)
        opened: list[CassandraMsgStore] = []

        async def factory(settings: StoreSettings = SETTINGS) -> MsgStore:
            store = CassandraMsgStore(
                [cassandra_node.host],
                cassandra_node.native_port,
                cassandra_keyspace,
                settings,
                request_timeout=30.0,
            )
            await store.open()
            opened.append(store)
            return store

        yield factory
        for store in opened:
            await store.close()

    @pytest.fixture
    def interleave(self, monkeypatch: pytest.MonkeyPatch) -> Interleave:
        """Apply every LOGGED batch one statement at a time, last statement first, observing between
        them: Cassandra applies a batch's partitions in no set order (atomic, not isolated), so any of
        these states can be what a concurrent reader sees. Batches sent together (``logged_many``) land
        in any order too: last batch first."""

        @contextlib.asynccontextmanager
        async def split_batches(store: MsgStore, observe: Observer) -> AsyncIterator[None]:
            assert isinstance(store, CassandraMsgStore)
            cql = store._cql  # the statement layer under every part (test seam)
            assert cql is not None

            async def one_by_one(statements: Sequence[tuple[str, Sequence[Any]]], what: str) -> None:
                for statement in reversed(statements):
                    await cql.execute([statement], what)
                    await observe()

            async def many_one_by_one(
                batches: Sequence[Sequence[tuple[str, Sequence[Any]]]], what: str
            ) -> None:
                for batch in reversed(batches):
                    await one_by_one(batch, what)

            monkeypatch.setattr(cql, "logged", one_by_one)
            monkeypatch.setattr(cql, "logged_many", many_one_by_one)
            try:
                yield
            finally:
                monkeypatch.undo()

        return split_batches


async def test_factory_builds_a_cassandra_store(
    cassandra_node: ctl.NodeConfig, cassandra_keyspace: str
) -> None:
    config = StoreConfig.from_env(
        {
            "MSGSTORE_BACKEND": "cassandra",
            "MSGSTORE_CASSANDRA_HOSTS": cassandra_node.host,
            "MSGSTORE_CASSANDRA_PORT": str(cassandra_node.native_port),
            "MSGSTORE_CASSANDRA_KEYSPACE": cassandra_keyspace,
        }
    )
    store = create_store(config)
    assert store.backend == "cassandra"
    with pytest.raises(StoreUnavailable):
        _ = store.outbox  # not open yet
    await store.open()
    try:
        assert store.outbox.shards == 16 and await store.records.head() >= 0
    finally:
        await store.close()


async def test_a_keyspace_the_store_creates_takes_the_replication_dcs(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    """MSGSTORE_CASSANDRA_REPLICATION_DCS makes the keyspace NetworkTopologyStrategy, as the archive's."""
    dc = cf.admin_execute(cassandra_admin, "SELECT data_center FROM system.local").one().data_center
    keyspace = f"{cassandra_keyspace}_nts"
    config = StoreConfig.from_env(
        {
            "MSGSTORE_BACKEND": "cassandra",
            "MSGSTORE_CASSANDRA_HOSTS": cassandra_node.host,
            "MSGSTORE_CASSANDRA_PORT": str(cassandra_node.native_port),
            "MSGSTORE_CASSANDRA_KEYSPACE": keyspace,
            "MSGSTORE_CASSANDRA_REPLICATION_DCS": f"{dc}=1",
        }
    )
    cf.admin_execute(cassandra_admin, f"DROP KEYSPACE IF EXISTS {keyspace}")
    try:
        async with open_store(config) as store:
            assert await store.records.head() >= 0  # migrated and usable
        replication = (
            cf.admin_execute(
                cassandra_admin,
                "SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                (keyspace,),
            )
            .one()
            .replication
        )
        assert replication["class"].endswith("NetworkTopologyStrategy") and replication[dc] == "1"
    finally:
        cf.admin_execute(cassandra_admin, f"DROP KEYSPACE IF EXISTS {keyspace}")


async def test_an_unreachable_node_is_unavailable() -> None:
    store = CassandraMsgStore(["127.0.0.1"], 1, "mmt_nowhere", SETTINGS, connect_timeout=1.0)
    with pytest.raises(StoreUnavailable):
        await store.open()


# ---------------------------------------------------------------------- Cassandra only


@pytest.fixture
async def store(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> AsyncIterator[CassandraMsgStore]:
    """A store on the module keyspace, emptied first."""
    _empty(cassandra_admin, cassandra_keyspace)
    opened = CassandraMsgStore(
        [cassandra_node.host], cassandra_node.native_port, cassandra_keyspace, SETTINGS
    )
    await opened.open()
    yield opened
    await opened.close()


async def test_bucket_counts_equal_the_listing_rows(
    store: CassandraMsgStore, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    writer = await writer_of(store)
    rows = [record(n, created=T0 + n % 97, topic=f"/t/1/{n % 3}/proto", subs=("S",)) for n in range(400)]
    await writer.commit(rows[:250], [], now=T0)  # larger than one batch: split, counts per batch
    for i in range(250, 400, 30):
        await writer.commit(rows[i : i + 30], [], now=T0)
    counts, actual = _counts_and_rows(cassandra_admin, cassandra_keyspace)
    assert counts == actual and sum(n for (kind, _, _), n in counts.items() if kind == "s") == 400


def _counts_and_rows(admin: Any, keyspace: str) -> tuple[dict[Slot, int], dict[Slot, int]]:
    """The row counts the writer stored per listing bucket, and the rows the buckets hold."""
    counts = {
        (kind, key, bucket): n
        for kind, key, bucket, n in cf.admin_execute(
            admin, f"SELECT kind, key, bucket, rows FROM {keyspace}.record_buckets"
        )
    }
    actual: dict[Slot, int] = {}
    for kind, table, column in (
        ("t", "records_by_topic", "content_topic"),
        ("s", "records_by_subscription", "subscription_id"),
    ):
        for key, bucket in cf.admin_execute(admin, f"SELECT {column}, bucket FROM {keyspace}.{table}"):
            actual[(kind, key, bucket)] = actual.get((kind, key, bucket), 0) + 1
    return counts, actual


@pytest.mark.parametrize("applied", ["first half", "second half"])
@pytest.mark.parametrize("retried_by", ["the same writer", "a restarted writer"])
async def test_bucket_counts_survive_a_commit_that_applied_in_part(
    store: CassandraMsgStore,
    cassandra_admin: Any,
    cassandra_keyspace: str,
    monkeypatch: pytest.MonkeyPatch,
    applied: str,
    retried_by: str,
) -> None:
    # A commit's record batches go out together; the node may apply some and fail (or time out on) the
    # others — including the batches carrying the new bucket counts. The retry must leave exact counts.
    writer = await writer_of(store)
    rows = [record(n, created=T0 + n % 97, topic=f"/t/1/{n % 3}/proto", subs=("S",)) for n in range(400)]
    await writer.commit(rows[:100], [], now=T0)
    cql = store._cql
    assert cql is not None
    real = cql.logged_many

    async def in_part(batches: Sequence[Sequence[tuple[str, Sequence[Any]]]], what: str) -> None:
        assert len(batches) >= 4, "the commit spans several batches"
        half = len(batches) // 2
        await real(batches[:half] if applied == "first half" else batches[half:], what)
        raise StoreUnavailable("injected: the node failed the other batches")

    monkeypatch.setattr(cql, "logged_many", in_part)
    with pytest.raises(StoreUnavailable):
        await writer.commit(rows[100:400], [], now=T0)
    monkeypatch.undo()
    counts, actual = _counts_and_rows(cassandra_admin, cassandra_keyspace)
    assert counts != actual, "the failure left counts that do not match the rows (else nothing is tested)"
    if retried_by == "a restarted writer":  # its memory is gone: as after a crash, same lease
        writer = await store.records.writer(writer.lease, now=T0)
    await writer.commit(rows[100:400], [], now=T0 + 1)
    counts, actual = _counts_and_rows(cassandra_admin, cassandra_keyspace)
    assert counts == actual and sum(n for (kind, _, _), n in counts.items() if kind == "s") == 400
    listed = await store.records.list_by_subscription("S", 150, 100)
    expected = sorted(rows, key=lambda r: (r.created_at, r.message_hash))[150:250]
    assert [r.message_hash for r in listed] == [r.message_hash for r in expected]


async def test_the_open_request_watermark_follows_the_oldest_open_day(
    store: CassandraMsgStore, cassandra_admin: Any, cassandra_keyspace: str
) -> None:
    today = day_of(T0)
    old = [
        e for e in (entry(n, at=T0 - 3 * DAY_S) for n in range(40)) if shard_of(e.request_id, SHARDS) == 0
    ][:2]
    fresh = next(e for e in (entry(n, at=T0) for n in range(100, 200)) if shard_of(e.request_id, SHARDS) == 0)
    for e in (*old, fresh):
        await store.outbox.add(e, now=T0)
    lease = await shard_lease(store, 0)

    def watermark() -> int:
        rows = cf.admin_execute(
            cassandra_admin, f"SELECT watermark_day FROM {cassandra_keyspace}.outbox_shards WHERE shard = 0"
        )
        return int(rows.one()[0])

    got = await store.outbox.open_requests(0, lease, now=T0)
    assert [g.request_id for g in got] == [
        e.request_id for e in sorted((*old, fresh), key=lambda e: (e.progress.scheduled_at, e.request_id))
    ]
    assert watermark() == today - 3
    for e in old:
        await store.outbox.save(advanced(e, SendState.SUCCEEDED, T0 + 1), lease, now=T0 + 1)
    assert [g.request_id for g in await store.outbox.open_requests(0, lease, now=T0 + 2)] == [
        fresh.request_id
    ]
    assert watermark() == today - 1  # never past yesterday: another replica may be adding today


@pytest.mark.parametrize("budget", [outbox_module.BATCH_BYTES, 1])
async def test_one_shards_saves_share_a_batch_where_they_fit(
    store: CassandraMsgStore,
    cassandra_admin: Any,
    cassandra_keyspace: str,
    monkeypatch: pytest.MonkeyPatch,
    budget: int,
) -> None:
    # A new request's QUEUED change and the SENDING one that starts its first attempt are saved together
    # (the send engine's save_all): one round trip. Past the budget the saves split, numbered in order.
    monkeypatch.setattr(outbox_module, "BATCH_BYTES", budget)
    queued = [e for e in (entry(n, at=T0) for n in range(60)) if shard_of(e.request_id, SHARDS) == 0][:3]
    for e in queued:
        await store.outbox.add(e, now=T0)
    lease = await shard_lease(store, 0)
    cql = store._cql
    assert cql is not None
    batches: list[int] = []
    real = cql.logged

    async def counted(statements: Sequence[tuple[str, Sequence[Any]]], what: str) -> None:
        batches.append(len(statements))
        await real(statements, what)

    monkeypatch.setattr(cql, "logged", counted)
    steps = (SendState.SENDING, SendState.RETRY_WAIT, SendState.SENDING)  # the last state is not the largest
    changes = []
    for e in queued:
        changes.append(e)
        for state in steps:
            changes.append(advanced(changes[-1], state, T0 + 1))
    saved = await store.outbox.save_many([(c, lease) for c in changes], now=T0 + 1)
    assert [s.sequence for s in saved if isinstance(s, OutboxEntry)] == list(range(1, 13))
    assert len(batches) == (1 if budget > 1 else 12)
    index = cf.admin_execute(
        cassandra_admin,
        f"SELECT request_id, state FROM {cassandra_keyspace}.outbox_open WHERE shard = 0 "
        f"AND day = {day_of(T0)}",
    )
    # one write per row in a batch: two would share a timestamp, and the larger value would win
    assert {rid: SendState(state) for rid, state in index} == {
        e.request_id: SendState.SENDING for e in queued
    }
    for e in queued:
        got = await store.outbox.get(e.request_id, now=T0 + 1)
        assert got is not None and got.state is SendState.SENDING and got.progress.attempts == 3
    page = await store.outbox.changes_after(b"", 100, now=T0 + 1)
    assert [c.entry.state for c in page.changes] == [SendState.QUEUED, *steps] * 3
