"""The SQLite archive's schema and migrations, and sqlite3 → dbkit → archivestore errors end to end.

The pragmas and the per-code translation are dbkit's and tested there (tests/unit/dbkit/test_dbkit_sqlite.py);
the DbError → archive error mapping is in test_archivestore_db_errors.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from archivestore.errors import SchemaError, StoreCorrupt, StoreError, StoreUnavailable, from_db
from archivestore.sqlite.schema import MIGRATIONS, SCHEMA_VERSION, migrate
from dbkit.errors import DbError
from dbkit.sqlite.connection import translate_error as dbkit_translate_error
from dbkit.sqlite.migrations import Migration


@pytest.fixture
def memory() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    yield conn
    conn.close()


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}


def _indexes(conn: sqlite3.Connection) -> set[str]:
    return {
        r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL")
    }


def test_migrate_creates_version_1_once(memory: sqlite3.Connection) -> None:
    assert SCHEMA_VERSION == 1
    assert migrate(memory, now=123) == 0
    assert _tables(memory) == {"envelopes", "topics", "shard_plan", "schema_migrations"}
    assert _indexes(memory) == {
        "envelopes_hash",
        "envelopes_topic",
        "envelopes_message_hash",
        "envelopes_expires_at",
    }
    assert memory.execute("SELECT version, applied_at FROM schema_migrations").fetchall() == [(1, 123)]
    assert migrate(memory, now=456) == 1  # idempotent: nothing re-applied
    assert memory.execute("SELECT count(*) FROM schema_migrations").fetchone() == (1,)
    assert not memory.in_transaction


def test_envelopes_is_without_rowid_clustered_on_sent_and_hash(memory: sqlite3.Connection) -> None:
    migrate(memory, now=0)
    sql = memory.execute("SELECT sql FROM sqlite_schema WHERE name = 'envelopes'").fetchone()[0]
    assert "WITHOUT ROWID" in sql and "PRIMARY KEY (sent, hash)" in sql
    columns = [r[1] for r in memory.execute("PRAGMA table_info(envelopes)")]
    assert columns[-1] == "raw"  # last, so filters never read the envelope bytes
    unique = memory.execute(
        "SELECT \"unique\" FROM pragma_index_list('envelopes') WHERE name = 'envelopes_hash'"
    )
    assert unique.fetchone() == (1,)
    assert [r[2] for r in memory.execute("PRAGMA index_info(envelopes_topic)")] == ["topic", "sent", "hash"]


def test_a_newer_schema_is_refused_and_left_untouched(memory: sqlite3.Connection) -> None:
    migrate(memory, now=0)
    memory.execute("INSERT INTO schema_migrations VALUES (2, 'from the future', 0)")
    with pytest.raises(SchemaError, match="newer"):
        migrate(memory, now=0)
    assert not memory.in_transaction
    assert memory.execute("SELECT max(version) FROM schema_migrations").fetchone() == (2,)


def translate_error(err: sqlite3.Error, doing: str) -> StoreError:
    """What the archive's SQLite backend raises for ``err``: dbkit's translation, then the archive's."""
    translated = dbkit_translate_error(err, doing)
    assert isinstance(translated, DbError)
    return from_db(translated)


def test_a_failing_migration_is_a_schema_error_and_rolls_back(memory: sqlite3.Connection) -> None:
    broken = (*MIGRATIONS, Migration(2, "broken", ("CREATE TABLE extra (x)", "CREATE TABLE envelopes (x)")))
    migrate(memory, now=0)
    with pytest.raises(SchemaError, match="migration 2") as info:
        migrate(memory, now=0, migrations=broken)
    assert isinstance(info.value.__cause__, DbError)  # the archive's error, raised from dbkit's
    assert "extra" not in _tables(memory)
    assert memory.execute("SELECT max(version) FROM schema_migrations").fetchone() == (1,)


def test_a_version_row_without_its_tables_is_a_schema_error(memory: sqlite3.Connection) -> None:
    memory.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, description TEXT, applied_at INT)"
    )
    memory.execute("INSERT INTO schema_migrations VALUES (1, 'claimed', 0)")
    with pytest.raises(SchemaError, match="missing"):
        migrate(memory, now=0)


def test_missing_tables_translate_to_schema_error(memory: sqlite3.Connection) -> None:
    with pytest.raises(sqlite3.OperationalError) as info:
        memory.execute("SELECT * FROM envelopes")
    assert isinstance(translate_error(info.value, "query"), SchemaError)


def test_real_errors_carry_codes(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database " * 200)
    conn = sqlite3.connect(junk)
    with pytest.raises(sqlite3.DatabaseError) as info:
        conn.execute("SELECT * FROM sqlite_schema")
    conn.close()
    assert isinstance(translate_error(info.value, "open"), StoreCorrupt)
    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0.01, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError) as busy:
        other.execute("BEGIN IMMEDIATE")
    holder.execute("ROLLBACK")
    holder.close()
    other.close()
    assert isinstance(translate_error(busy.value, "put"), StoreUnavailable)
