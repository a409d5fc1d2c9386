"""dbkit.cassandra without a cluster: accepted names, driver exceptions → DbError, the bridge's bound."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from cassandra import InvalidRequest, OperationTimedOut, Unavailable
from cassandra.cluster import NoHostAvailable
from cassandra.query import SimpleStatement

from dbkit.cassandra.bridge import Bridge, unlogged_batch
from dbkit.cassandra.cluster import translate
from dbkit.cassandra.names import CONSISTENCY_LEVELS, is_identifier, parse_keyspace
from dbkit.errors import DbError, DbUnavailable


def test_keyspace_names_are_plain_lower_case_identifiers() -> None:
    assert parse_keyspace(" mailmesh_2 ") == "mailmesh_2"
    assert is_identifier("a" * 48) and not is_identifier("a" * 49)
    for bad in ("Mail-Mesh", "2mesh", "", "ks; DROP KEYSPACE x"):
        with pytest.raises(ValueError, match=r"\[a-z\]\[a-z0-9_\]\{0,47\}"):
            parse_keyspace(bad)
    assert "LOCAL_QUORUM" in CONSISTENCY_LEVELS and "SERIAL" not in CONSISTENCY_LEVELS


@pytest.mark.parametrize(
    ("err", "expected"),
    [
        (NoHostAvailable("none", {}), DbUnavailable),
        (OperationTimedOut("slow"), DbUnavailable),
        (Unavailable("replicas"), DbUnavailable),
        (ConnectionResetError("reset"), DbUnavailable),
        (InvalidRequest("bad cql"), DbError),
    ],
)
def test_driver_exceptions_are_translated(err: BaseException, expected: type[DbError]) -> None:
    translated = translate(err, "put")
    assert type(translated) is expected
    kind = "unavailable" if expected is DbUnavailable else "error"
    assert str(translated).startswith(f"cassandra {kind} during put: {type(err).__name__}: ")
    already = DbUnavailable("as it is")
    assert translate(already, "put") is already


class _Future:
    """A ResponseFuture that completes when the test says so."""

    def __init__(self, session: _Session, stmt: Any) -> None:
        self.session, self.stmt = session, stmt
        self.callbacks: tuple[Callable[[Any], None], Callable[[BaseException], None]] | None = None
        self.current_rows: list[Any] = [(stmt.query_string,)]
        self.paging_state: bytes | None = None

    def add_callbacks(self, ok: Callable[[Any], None], fail: Callable[[BaseException], None]) -> None:
        self.callbacks = (ok, fail)
        self.session.started.append(self)

    def result(self) -> _Future:
        return self

    def complete(self, exc: BaseException | None = None) -> None:
        assert self.callbacks is not None
        self.session.in_flight -= 1
        if exc is None:
            self.callbacks[0](self.current_rows)
        else:
            self.callbacks[1](exc)


class _Session:
    def __init__(self) -> None:
        self.started: list[_Future] = []
        self.in_flight = 0
        self.most = 0

    def execute_async(self, stmt: Any, paging_state: bytes | None = None) -> _Future:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        return _Future(self, stmt)


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # completions reach the loop through call_soon_threadsafe: let them run
        await asyncio.sleep(0)


async def test_the_bridge_bounds_requests_in_flight_and_raises_the_first_error() -> None:
    session = _Session()
    bridge = Bridge(session, 2)
    writes = asyncio.create_task(bridge.execute_all([SimpleStatement(f"w{i}") for i in range(5)], what="put"))
    await _until(lambda: len(session.started) == 2)
    assert session.in_flight == 2  # three wait in the dispatcher's queue
    session.started[0].complete()
    await _until(lambda: len(session.started) == 3)
    session.started[1].complete(OperationTimedOut("slow"))
    session.started[2].complete()  # in flight when the first error came: awaited, not abandoned
    with pytest.raises(DbUnavailable, match=r"^cassandra unavailable during put: OperationTimedOut") as info:
        await writes
    assert isinstance(info.value.__cause__, OperationTimedOut)
    assert len(session.started) == 3 and session.most == 2  # the two still queued were never started
    await bridge.drain()


async def test_a_read_returns_its_page() -> None:
    session = _Session()
    bridge = Bridge(session, 4)
    read = asyncio.create_task(bridge.fetch(_Prepared("SELECT 1"), (), what="get"))
    await _until(lambda: len(session.started) == 1)
    session.started[0].complete()
    page = await read
    assert page.rows == [("SELECT 1",)] and page.paging_state is None


class _Prepared:
    def __init__(self, text: str) -> None:
        self.text = text

    def bind(self, params: Any) -> SimpleStatement:
        return SimpleStatement(self.text)


def test_unlogged_batch_of_one_is_the_statement_itself() -> None:
    one = SimpleStatement("a")
    assert unlogged_batch([one]) is one
    batch = unlogged_batch([one, SimpleStatement("b")])
    assert batch is not one and batch.is_idempotent
