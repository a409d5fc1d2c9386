"""The archive's boundary over dbkit: a DbError becomes the archive's error, message kept, raised from it."""

from __future__ import annotations

from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from archivestore.cassandra.bridge import ArchiveBridge
from archivestore.errors import SchemaError, StoreCorrupt, StoreError, StoreUnavailable, from_db
from dbkit.errors import DbCorrupt, DbError, DbSchemaError, DbUnavailable


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (DbUnavailable("sqlite put: database is locked"), StoreUnavailable),
        (DbCorrupt("sqlite open: file is not a database"), StoreCorrupt),
        (DbSchemaError("sqlite query: no such table: envelopes"), SchemaError),
        (DbError("sqlite put: UNIQUE constraint failed"), StoreError),
    ],
)
def test_from_db_keeps_the_meaning_and_the_message(err: DbError, expected: type[StoreError]) -> None:
    mapped = from_db(err)
    assert type(mapped) is expected and str(mapped) == str(err)


class _FailingSession:
    """Every statement fails as it is submitted, as with no host up."""

    def __init__(self, err: Exception) -> None:
        self.err = err
        self.submitted = 0

    def execute_async(self, stmt: Any, paging_state: bytes | None = None) -> Any:
        self.submitted += 1
        raise self.err


@pytest.mark.parametrize(
    ("err", "expected"),
    [(NoHostAvailable("none up", {}), StoreUnavailable), (InvalidRequest("bad"), StoreError)],
)
async def test_the_archive_bridge_raises_archive_errors(err: Exception, expected: type[StoreError]) -> None:
    session = _FailingSession(err)
    bridge = ArchiveBridge(session, 4)
    with pytest.raises(expected, match=r"^cassandra .* during put: ") as info:
        await bridge.execute_all([SimpleStatement("a"), SimpleStatement("b")], what="put")
    assert type(info.value) is expected
    assert isinstance(info.value.__cause__, DbError) and info.value.__cause__.__cause__ is err
    assert session.submitted == 1  # the first failure stops the group: the second is never sent
    await bridge.drain()
