"""Versioned schema migrations for one SQLite file, and the write transaction both stores use.

Every step is recorded in ``schema_migrations (version, description, applied_at)``. ``migrate`` runs under
``BEGIN IMMEDIATE`` (https://sqlite.org/lang_transaction.html): two processes opening a fresh file cannot both
migrate, and a step that fails leaves nothing behind. A file recording a version newer than the code's
newest is refused, so an old replica never writes into a schema it does not know.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TypeVar

from dbkit.errors import DbSchemaError
from dbkit.sqlite.connection import UNAVAILABLE_CODES

__all__ = ["Migration", "in_transaction", "migrate"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema step: applied in one transaction, recorded in ``schema_migrations``."""

    version: int
    description: str
    statements: tuple[str, ...]


def migrate(
    conn: sqlite3.Connection,
    migrations: Sequence[Migration],
    *,
    now: int,
    required_tables: Collection[str] = (),
) -> int:
    """Bring the schema to the newest version in ``migrations``; returns the version found before.

    ``required_tables`` must exist afterwards (with ``schema_migrations``, which this creates). Raises
    :class:`DbSchemaError` for a database from a newer version of the code, a failed migration step, or a
    file that records a version but lacks a required table; a busy or failing disk stays ``sqlite3.Error``
    (the bridge translates it to :class:`~dbkit.errors.DbUnavailable`).
    """
    newest = migrations[-1].version if migrations else 0
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at INTEGER NOT NULL)"
        )
        found = int(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()[0])
        if found > newest:
            raise DbSchemaError(
                f"database schema version {found} is newer than this code's {newest}; upgrade Mailmesh"
            )
        for step in migrations:
            if step.version <= found:
                continue
            try:
                for statement in step.statements:
                    conn.execute(statement)
            except sqlite3.OperationalError as err:
                if (getattr(err, "sqlite_errorcode", 0) or 0) & 0xFF in UNAVAILABLE_CODES:
                    raise
                raise DbSchemaError(f"migration {step.version} ({step.description}) failed: {err}") from err
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (step.version, step.description, now),
            )
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        missing = set(required_tables) - tables
        if missing:
            raise DbSchemaError(
                f"schema version {max(found, newest)} recorded but tables missing: {sorted(missing)}"
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found


def in_transaction(conn: sqlite3.Connection, body: Callable[[], T]) -> T:
    """Run ``body`` inside ``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on any exception).

    IMMEDIATE takes the write lock up front, so two processes sharing the file (two replicas) serialise
    here instead of failing later with SQLITE_BUSY on a read-then-write.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
