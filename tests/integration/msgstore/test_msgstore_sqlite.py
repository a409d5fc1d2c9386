"""The messaging store contract bound to the SQLite backend, plus what only SQLite has."""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import pytest

from msgstore.config import StoreConfig
from msgstore.errors import LeaseLost, SchemaError, StoreUnavailable
from msgstore.factory import create_store
from msgstore.protocol import MsgStore
from msgstore.settings import StoreSettings
from msgstore.sharding import shard_of
from msgstore.sqlite import records
from msgstore.sqlite.store import SqliteMsgStore
from msgstore.types import EventDraft, EventType, SendState
from tests.integration.msgstore.contract import Interleave, MsgStoreContract, Observer
from tests.integration.msgstore.contract_data import (
    SETTINGS,
    SHARDS,
    T0,
    TTL,
    StoreFactory,
    advanced,
    entry,
    record,
    shard_lease,
    writer_of,
)

T = TypeVar("T")


class TestSqliteContract(MsgStoreContract):
    """Every contract test against a fresh SQLite file per test."""

    @pytest.fixture
    async def make_store(self, tmp_path: Path) -> AsyncIterator[StoreFactory]:
        """Open SqliteMsgStores on ``tmp_path/messaging.db``; all are closed at teardown."""
        opened: list[SqliteMsgStore] = []

        async def factory(settings: StoreSettings = SETTINGS) -> MsgStore:
            store = SqliteMsgStore(tmp_path / "messaging.db", settings)
            await store.open()
            opened.append(store)
            return store

        yield factory
        for store in opened:
            await store.close()

    @pytest.fixture
    def interleave(self, monkeypatch: pytest.MonkeyPatch) -> Interleave:
        """Readers see whole transactions: observe before and after each one."""

        @contextlib.asynccontextmanager
        async def around_writes(store: MsgStore, observe: Observer) -> AsyncIterator[None]:
            assert isinstance(store, SqliteMsgStore)
            write = store.write

            async def observed(job: Callable[[sqlite3.Connection], T], doing: str) -> T:
                await observe()
                result = await write(job, doing)
                await observe()
                return result

            monkeypatch.setattr(store, "write", observed)
            try:
                yield
            finally:
                monkeypatch.undo()

        return around_writes


# ---------------------------------------------------------------------- SQLite only


async def test_factory_builds_the_configured_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "m.db"
    store = create_store(
        StoreConfig.from_env({"MSGSTORE_SQLITE_PATH": str(path), "MSGSTORE_OUTBOX_SHARDS": "8"})
    )
    assert store.backend == "sqlite"
    await store.open()
    try:
        assert path.exists() and store.outbox.shards == 8
    finally:
        await store.close()


async def test_a_taken_over_lease_fences_writes_inside_the_transaction(tmp_path: Path) -> None:
    store = SqliteMsgStore(tmp_path / "m.db", SETTINGS)
    await store.open()
    try:
        e = entry(1)
        shard = shard_of(e.request_id, SHARDS)
        await store.outbox.add(e, now=T0)
        mine = await shard_lease(store, shard, "a", T0)
        theirs = await store.leases.acquire(mine.name, "b", TTL, T0 + TTL + 1)
        assert theirs is not None
        with pytest.raises(LeaseLost):  # the old owner's clock still believes in its lease
            await store.outbox.save(advanced(e, SendState.SENDING, T0 + 1), mine, now=T0 + 1)
        writer = await writer_of(store, "w", T0)
        await store.leases.acquire("records/writer", "x", TTL, T0 + TTL + 1)
        r = record(1, created=T0)
        with pytest.raises(LeaseLost):
            await writer.commit([r], [EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash)], now=T0 + 1)
        assert await store.records.get(r.message_hash) is None
    finally:
        await store.close()


async def test_maintain_removes_only_what_aged_out(tmp_path: Path) -> None:
    settings = dataclasses.replace(SETTINGS, record_retention=100.0, outbox_retention=3600.0)
    store = SqliteMsgStore(tmp_path / "m.db", settings)
    await store.open()
    try:
        writer = await writer_of(store, "w", T0)
        old, young = record(1, created=T0, subs=("s",)), record(2, created=T0 + 90, subs=("s",))
        await writer.commit([old, young], [EventDraft(EventType.MESSAGE_RECEIVED, old.message_hash)], now=T0)
        await store.outbox.add(entry(3), now=T0)
        assert await store.maintain(now=T0 + 50) == 0
        removed = await store.maintain(now=T0 + 100 + 1)
        assert removed >= 3  # old record, its subscription row, its payload
        assert await store.records.get(old.message_hash) is None
        assert [r.message_hash for r in await store.records.list_by_subscription("s", None, None)] == [
            young.message_hash
        ]
        assert await store.outbox.get(entry(3).request_id, now=T0 + 101) is not None
        await store.maintain(now=T0 + 3601)
        assert await store.outbox.get(entry(3).request_id, now=T0 + 3601) is None
    finally:
        await store.close()


async def test_unusable_locations_fail_as_store_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable):
        await SqliteMsgStore(tmp_path / "missing" / "dir" / "m.db", SETTINGS).open()
    foreign = tmp_path / "foreign.db"
    store = SqliteMsgStore(foreign, SETTINGS)
    await store.open()
    await store.close()
    import sqlite3

    conn = sqlite3.connect(foreign)
    conn.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaError):
        await SqliteMsgStore(foreign, SETTINGS).open()
    with pytest.raises(StoreUnavailable):
        await SqliteMsgStore(tmp_path / "x.db", SETTINGS).records.head()


async def test_every_record_read_searches_an_index(tmp_path: Path) -> None:
    """A read that scans the records reads the whole file: GetMessageRecord by request id did (a partial
    index the planner could not use for a bound parameter) and took seconds with 1 M records."""
    store = SqliteMsgStore(tmp_path / "plan.db", SETTINGS)
    await store.open()
    await store.close()
    reads = {
        "by hash": (records.BY_HASH, (b"h",)),
        "by request": (records.BY_REQUEST, ("r",)),
        "topic page": (records.TOPIC_PAGE, ("t", 100, 10_000)),
        "subscription page": (records.SUBSCRIPTION_PAGE, ("s", 100, 10_000)),
        "by envelopes": (records.BY_ENVELOPES.format(marks="?,?"), ("aa", "bb")),
    }
    with contextlib.closing(sqlite3.connect(tmp_path / "plan.db")) as conn:
        for name, (sql, params) in reads.items():
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            assert not any(step.startswith("SCAN r") or step.startswith("SCAN records") for step in plan), (
                name,
                plan,
            )
            assert any("INDEX" in step or "PRIMARY KEY" in step for step in plan), (name, plan)
