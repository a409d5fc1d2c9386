"""The messaging store's boundary over dbkit: a DbError becomes msgstore's (retryable stays retryable)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import NoHostAvailable

from dbkit.errors import DbCorrupt, DbError, DbSchemaError, DbUnavailable
from msgstore.cassandra import session as cassandra_session
from msgstore.cassandra.session import Cql
from msgstore.errors import MsgStoreError, SchemaError, StoreUnavailable
from msgstore.settings import StoreSettings
from msgstore.sqlite import schema as sqlite_schema
from msgstore.sqlite.store import SqliteMsgStore


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (DbUnavailable("busy"), StoreUnavailable),
        (DbSchemaError("no such table"), SchemaError),
        (DbCorrupt("not a database"), MsgStoreError),
        (DbError("constraint"), MsgStoreError),
    ],
)
def test_sqlite_translation(err: DbError, expected: type[MsgStoreError]) -> None:
    mapped = sqlite_schema.translate(err, "append")
    assert type(mapped) is expected and str(mapped) == f"messaging store append: {err}"


@pytest.mark.parametrize(
    ("err", "expected"),
    [(DbUnavailable("timeout"), StoreUnavailable), (DbError("invalid"), MsgStoreError)],
)
def test_cassandra_translation(err: DbError, expected: type[MsgStoreError]) -> None:
    mapped = cassandra_session.translate(err, "lease")
    assert type(mapped) is expected and str(mapped) == f"messaging store lease: {err}"


async def test_the_sqlite_store_runs_on_threads_of_its_own_name(tmp_path: Path) -> None:
    store = SqliteMsgStore(tmp_path / "m.db", StoreSettings())
    await store.open()
    try:
        name = await store.read(lambda conn: threading.current_thread().name, "thread name")
    finally:
        await store.close()
    assert name.startswith("msgstore-sqlite-reader")
    with pytest.raises(StoreUnavailable, match="not open"):
        await store.read(lambda conn: None, "late")


class _Prepared:
    serial_consistency_level: int | None = None
    consistency_level: int | None = None

    def bind(self, params: Any) -> Any:
        return ("bound", params)


class _NoHostSession:
    def prepare(self, text: str) -> _Prepared:
        return _Prepared()

    def execute_async(self, stmt: Any, paging_state: bytes | None = None) -> Any:
        raise NoHostAvailable("none up", {})


async def test_cql_raises_msgstore_errors_from_the_bridge() -> None:
    cql = Cql(_NoHostSession(), "ks", 4)
    with pytest.raises(
        StoreUnavailable, match=r"^messaging store outbox write: cassandra unavailable"
    ) as info:
        await cql.execute([("INSERT INTO {ks}.t (k) VALUES (?)", (1,))], "outbox write")
    assert isinstance(info.value.__cause__, DbUnavailable)
