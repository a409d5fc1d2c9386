"""The archive storage contract bound to the SQLite adapter, plus what only SQLite has.

The contract runs twice: with the default tuning, and with tuning so small that every fallback path runs
(bloom expansion over the limit → time scan with a Python topic filter; topic sets larger than one SQL
statement's arms → groups merged in Python).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from archivestore.errors import SchemaError, StoreCorrupt, StoreUnavailable
from archivestore.protocol import ArchiveStore
from archivestore.retention import RetentionPolicy
from archivestore.sqlite.store import SqliteStore
from archivestore.types import PutItem
from tests.integration.archive.contract import (
    BASE,
    KEEP,
    TOPICS,
    ArchiveContract,
    StoreFactory,
    env,
    items,
    ordered,
    q,
)

TUNINGS = {
    "default": {},
    "fallbacks": {
        "bloom_topic_expansion": 1,
        "max_union_arms": 2,
        "scan_sql_topics": 2,
        "read_connections": 2,
        "max_pending_writes": 2,
    },
}


class TestSqliteContract(ArchiveContract):
    """Every contract test against a fresh SQLite file per test, in both tunings."""

    BUCKET_SECONDS = 3600

    @pytest.fixture(params=sorted(TUNINGS))
    async def make_store(self, request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
        """Open SqliteStores on ``tmp_path/archive.db``; all are closed at teardown."""
        opened: list[SqliteStore] = []
        tuning = TUNINGS[request.param]

        async def factory(*, retention: RetentionPolicy = KEEP) -> ArchiveStore:
            store = SqliteStore(
                tmp_path / "archive.db",
                retention,
                bucket_seconds=self.BUCKET_SECONDS,
                **tuning,
            )
            await store.open()
            opened.append(store)
            return store

        yield factory
        for store in opened:
            await store.close()


# ---------------------------------------------------------------------- SQLite only


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    """A default SqliteStore on a fresh file."""
    store = SqliteStore(tmp_path / "archive.db", KEEP)
    await store.open()
    yield store
    await store.close()


async def test_open_refuses_a_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    store = SqliteStore(path, KEEP)
    await store.open()
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO schema_migrations (version, description, applied_at) VALUES (2, 'future', 0)"
        )
    conn.close()
    with pytest.raises(SchemaError, match="newer"):
        await SqliteStore(path, KEEP).open()


async def test_open_is_idempotent_and_reopen_keeps_version(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "archive.db", KEEP)
    await store.open()
    await store.open()
    await store.close()
    await store.close()
    await store.open()
    await store.close()
    with sqlite3.connect(tmp_path / "archive.db") as conn:
        assert conn.execute("SELECT version FROM schema_migrations").fetchall() == [(1,)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


async def test_a_file_that_is_not_a_database_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    path.write_bytes(b"this is not an SQLite database, just some text padded out " * 100)
    with pytest.raises(StoreCorrupt):
        await SqliteStore(path, KEEP).open()


async def test_get_refuses_a_row_whose_bytes_changed(sqlite_store: SqliteStore) -> None:
    e = env(BASE)
    await sqlite_store.put(items([e]), now=BASE)
    with sqlite3.connect(sqlite_store.path) as conn:
        conn.execute("UPDATE envelopes SET raw = ? WHERE hash = ?", (e.raw[:-1] + b"\x00", e.hash))
    conn.close()
    with pytest.raises(StoreCorrupt, match="no longer hashes"):
        await sqlite_store.get(envelope_hash=e.hash, now=BASE)


async def test_a_locked_database_is_unavailable_and_nothing_is_acknowledged(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    store = SqliteStore(path, KEEP, busy_timeout_ms=50)
    await store.open()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.put(items([env(BASE)]), now=BASE)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert (await store.put(items([env(BASE)]), now=BASE)).inserted == 1  # the failed batch left nothing
    await store.close()


async def test_operations_on_a_closed_store_are_unavailable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "archive.db", KEEP)
    with pytest.raises(StoreUnavailable):
        await store.put(items([env(BASE)]), now=BASE)
    await store.open()
    await store.close()
    with pytest.raises(StoreUnavailable):
        await store.query(q(topics=TOPICS), now=BASE)


async def test_purge_expired_deletes_in_batches(tmp_path: Path) -> None:
    store = SqliteStore(
        tmp_path / "archive.db", RetentionPolicy(default_s=100, per_topic_s={TOPICS[1]: 10_000})
    )
    await store.open()
    short = [env(BASE + i, TOPICS[0], i) for i in range(25)]
    long = [env(BASE + i, TOPICS[1], i) for i in range(5)]
    await store.put(items(short + long), now=BASE)
    stats = await store.stats(now=BASE + 1000)
    assert (stats.envelopes, stats.detail["rows"], stats.detail["expired_unpurged"]) == (5, 30, 25)
    assert await store.purge_expired(BASE + 1000, batch=4) == 25
    stats = await store.stats(now=BASE + 1000)
    assert (stats.envelopes, stats.detail["rows"], stats.detail["catalogued_topics"]) == (5, 5, 1)
    assert await store.purge_expired(BASE + 1000) == 0
    assert (await store.query(q(topics=TOPICS[:2]), now=BASE)).envelopes == ordered(long)
    await store.close()


async def test_cancelled_writers_do_not_leak_queue_slots(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "archive.db", KEEP, max_pending_writes=1)
    await store.open()
    tasks = [asyncio.create_task(store.put(items([env(BASE, TOPICS[0], i)]), now=BASE)) for i in range(20)]
    await asyncio.sleep(0)
    for task in tasks[::2]:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    # Every slot came back: further writes go through (a leak would hang here until the test timeout).
    result = await asyncio.wait_for(store.put(items([env(BASE + 1)]), now=BASE), timeout=10)
    assert result.inserted == 1
    await store.close()


async def test_writes_wait_for_a_queue_slot_instead_of_queueing_unboundedly(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "archive.db", KEEP, max_pending_writes=3)
    await store.open()
    bridge = store._bridge  # white box: the executor's own queue must never hold more than the slots allow
    pool = bridge._writer_pool
    assert pool is not None
    seen: list[int] = []

    def job(conn: sqlite3.Connection) -> int:
        seen.append(pool._work_queue.qsize())  # jobs waiting behind this running one
        time.sleep(0.002)
        return int(conn.execute("SELECT count(*) FROM envelopes").fetchone()[0])

    results = await asyncio.gather(*(bridge.write(job, "test") for _ in range(30)))
    puts = await asyncio.gather(*(store.put(items([env(BASE, n=i)]), now=BASE) for i in range(30)))
    assert results == [0] * 30 and all(p.inserted == 1 for p in puts)
    assert len(seen) == 30 and max(seen) <= 2  # 1 running + at most 2 queued = 3 slots
    await store.close()


_KILL_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from archivestore.sqlite.store import SqliteStore
    from archivestore.retention import RetentionPolicy
    from tests.integration.archive.contract import BASE, env, items

    async def main() -> None:
        store = SqliteStore(sys.argv[1], RetentionPolicy(default_s=None))
        await store.open()
        for start in range(0, 300, 100):
            batch = [env(BASE + i, n=i, size=1024) for i in range(start, start + 100)]
            await store.put(items(batch), now=BASE)
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no close(), no checkpoint: only the fsynced WAL remains

    asyncio.run(main())
    """
)


async def test_acknowledged_batches_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "archive.db"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _KILL_SCRIPT, str(path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == -signal.SIGKILL, err.decode()
    assert out.decode().strip() == "acknowledged"
    assert os.path.getsize(str(path) + "-wal") > 0  # the data is (only) in the WAL
    store = SqliteStore(path, KEEP)
    await store.open()
    expected = [env(BASE + i, n=i, size=1024) for i in range(300)]
    got = (await store.query(q(BASE, BASE + 300, topics=TOPICS[:1]), now=BASE)).envelopes
    assert got == ordered(expected)
    await store.close()


async def test_caller_errors_are_value_errors(sqlite_store: SqliteStore) -> None:
    bad = env(BASE)
    with pytest.raises(ValueError):
        await sqlite_store.put(
            [PutItem(type(bad)(bad.sent, bad.hash[:31], bad.topic, bad.expiry, bad.raw))], now=BASE
        )
    with pytest.raises(ValueError):
        await sqlite_store.query(q(bloom=b"\xff" * 63), now=BASE)
    with pytest.raises(ValueError):
        await sqlite_store.get(now=BASE)
    with pytest.raises(ValueError):
        _ = [b async for b in sqlite_store.list_buckets("envelopes", 0, 1)]
