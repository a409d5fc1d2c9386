"""dbkit.sqlite: the bridge's threads and errors, connection pragmas, sqlite3 → DbError, migrations."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbkit.errors import DbCorrupt, DbError, DbSchemaError, DbUnavailable
from dbkit.sqlite.bridge import SqliteBridge
from dbkit.sqlite.connection import configure_reader, configure_writer, translate_error
from dbkit.sqlite.migrations import Migration, in_transaction, migrate

STEPS = (
    Migration(1, "items", ("CREATE TABLE items (k INTEGER PRIMARY KEY, v TEXT NOT NULL)",)),
    Migration(2, "tags", ("CREATE TABLE tags (k INTEGER PRIMARY KEY)",)),
)


@pytest.fixture
def memory() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    yield conn
    conn.close()


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}


def _bridge(path: Path, name: str) -> SqliteBridge:
    return SqliteBridge(
        path, name=name, read_connections=2, max_pending_writes=4, busy_timeout_ms=100, page_size=None
    )


def test_migrate_applies_each_step_once_and_records_it(memory: sqlite3.Connection) -> None:
    assert migrate(memory, STEPS[:1], now=10) == 0
    assert migrate(memory, STEPS, now=20) == 1  # only step 2 is new
    assert migrate(memory, STEPS, now=30) == 2
    assert _tables(memory) == {"items", "tags", "schema_migrations"}
    rows = memory.execute("SELECT version, description, applied_at FROM schema_migrations ORDER BY version")
    assert rows.fetchall() == [(1, "items", 10), (2, "tags", 20)]
    assert not memory.in_transaction


def test_a_newer_schema_is_refused_and_left_untouched(memory: sqlite3.Connection) -> None:
    migrate(memory, STEPS, now=0)
    with pytest.raises(DbSchemaError, match="newer than this code's 1"):
        migrate(memory, STEPS[:1], now=0)
    assert not memory.in_transaction
    assert memory.execute("SELECT max(version) FROM schema_migrations").fetchone() == (2,)


def test_a_failing_step_is_a_schema_error_and_rolls_back(memory: sqlite3.Connection) -> None:
    broken = (*STEPS[:1], Migration(2, "broken", ("CREATE TABLE extra (x)", "CREATE TABLE items (x)")))
    migrate(memory, STEPS[:1], now=0)
    with pytest.raises(DbSchemaError, match=r"migration 2 \(broken\) failed") as info:
        migrate(memory, broken, now=0)
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert "extra" not in _tables(memory)
    assert memory.execute("SELECT max(version) FROM schema_migrations").fetchone() == (1,)


def test_required_tables_must_exist_after_migrating(memory: sqlite3.Connection) -> None:
    migrate(memory, STEPS, now=0)
    memory.execute("DROP TABLE tags")
    assert migrate(memory, STEPS, now=0) == 2  # nothing required: a dropped table goes unnoticed
    with pytest.raises(DbSchemaError, match=r"tables missing: \['tags'\]"):
        migrate(memory, STEPS, now=0, required_tables={"items", "tags"})
    assert not memory.in_transaction


def test_in_transaction_commits_or_rolls_back(memory: sqlite3.Connection) -> None:
    migrate(memory, STEPS, now=0)
    assert in_transaction(memory, lambda: memory.execute("INSERT INTO items VALUES (1, 'a')").rowcount) == 1

    def fails() -> None:
        memory.execute("INSERT INTO items VALUES (2, 'b')")
        raise RuntimeError("after the insert")

    with pytest.raises(RuntimeError):
        in_transaction(memory, fails)
    assert not memory.in_transaction
    assert memory.execute("SELECT k FROM items").fetchall() == [(1,)]


def test_writer_and_reader_pragmas(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    configure_writer(conn, busy_timeout_ms=1234, page_size=16384, cache_mib=8)
    migrate(conn, STEPS, now=0)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
    assert conn.execute("PRAGMA page_size").fetchone() == (16384,)
    assert conn.execute("PRAGMA cache_size").fetchone() == (-8 * 1024,)
    conn.close()
    again = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    configure_writer(again, busy_timeout_ms=10, page_size=4096)  # an existing file keeps its page size
    assert again.execute("PRAGMA page_size").fetchone() == (16384,)
    reader = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    configure_reader(reader, busy_timeout_ms=10)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("DELETE FROM items")
    reader.close()
    again.close()


def _error(cls: type[sqlite3.Error], code: int, message: str = "boom") -> sqlite3.Error:
    err = cls(message)
    err.sqlite_errorcode = code
    return err


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (5, DbUnavailable),  # BUSY
        (5 | (3 << 8), DbUnavailable),  # BUSY_TIMEOUT (extended code)
        (6, DbUnavailable),  # LOCKED
        (10 | (4 << 8), DbUnavailable),  # IOERR_FSYNC
        (13, DbUnavailable),  # FULL
        (14, DbUnavailable),  # CANTOPEN
        (11, DbCorrupt),  # CORRUPT
        (26, DbCorrupt),  # NOTADB
        (19, DbError),  # CONSTRAINT: a bug, not the database's state
    ],
)
def test_translate_error_by_result_code(code: int, expected: type[DbError]) -> None:
    translated = translate_error(_error(sqlite3.OperationalError, code), "put")
    assert type(translated) is expected
    assert str(translated) == "sqlite put: boom"


def test_missing_tables_translate_to_schema_error(memory: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.OperationalError) as info:
        memory.execute("SELECT * FROM items")
    assert isinstance(translate_error(info.value, "query"), DbSchemaError)


async def test_the_bridge_names_its_threads_after_its_owner(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path / "n.db", "msgstore")
    assert await bridge.open(lambda conn: migrate(conn, STEPS, now=0)) == 0
    writer = await bridge.write(lambda conn: threading.current_thread().name, "name")
    reader = await bridge.read(lambda conn: threading.current_thread().name, "name")
    await bridge.close()
    assert writer.startswith("msgstore-sqlite-writer") and reader.startswith("msgstore-sqlite-reader")


async def test_the_bridge_translates_sqlite_errors_and_passes_others_through(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path / "e.db", "archive")
    await bridge.open(lambda conn: migrate(conn, STEPS, now=0))
    with pytest.raises(DbSchemaError, match=r"^sqlite count: no such table") as info:
        await bridge.read(lambda conn: conn.execute("SELECT count(*) FROM missing").fetchone(), "count")
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)

    class Own(Exception):
        pass

    def raise_own(conn: sqlite3.Connection) -> None:
        raise Own("a store's own error")

    with pytest.raises(Own):
        await bridge.write(raise_own, "own")
    assert (
        await bridge.write(lambda conn: conn.execute("INSERT INTO items VALUES (1, 'a')").rowcount, "w") == 1
    )
    await bridge.close()
    with pytest.raises(DbUnavailable, match=r"^sqlite archive is not open \(late\)$"):
        await bridge.read(lambda conn: None, "late")


async def test_a_failing_setup_closes_the_bridge(tmp_path: Path) -> None:
    bridge = _bridge(tmp_path / "f.db", "archive")
    migrate_newer = (*STEPS, Migration(3, "x", ("CREATE TABLE x (k)",)))
    await bridge.open(lambda conn: migrate(conn, migrate_newer, now=0))
    await bridge.close()
    with pytest.raises(DbSchemaError, match="newer"):
        await bridge.open(lambda conn: migrate(conn, STEPS, now=0))
    assert not bridge.is_open
    assert await bridge.open(lambda conn: migrate(conn, migrate_newer, now=0)) == 3  # reopenable
    await bridge.close()
