"""The cassandra-driver ⇄ asyncio bridge: bounded in-flight requests, results and errors on the event loop.

The driver is callback based (docs/cassandra.md "Sources: Python driver"): ``session.execute_async`` returns a
``ResponseFuture`` whose callbacks run on the driver's libev thread. Statements are submitted in groups
(one put's writes, one page read) to a :class:`Dispatcher`, a thread-safe counting semaphore that keeps
at most ``max_in_flight`` requests outstanding per bridge and queues the rest FIFO; each completion starts
the next queued statement on the driver thread, and a group resolves its ``asyncio.Future`` once, through
``loop.call_soon_threadsafe``, when its last statement finished. Driver exceptions become
:class:`~dbkit.errors.DbUnavailable` (retryable: timeouts, unavailable replicas, no host, broken
connections) or :class:`~dbkit.errors.DbError` (anything else, e.g. an invalid request), always ``from`` the
original (:func:`dbkit.cassandra.cluster.translate`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.cluster import Session
from cassandra.query import BatchStatement, BatchType, PreparedStatement, Statement

from dbkit.cassandra.cluster import translate

__all__ = ["Bridge", "Dispatcher", "Page", "group_by_replicas", "replica_set", "unlogged_batch"]


@dataclass(slots=True)
class Page:
    """One page of a read: its rows and the opaque state to fetch the next page (None when last)."""

    rows: list[Any]
    paging_state: bytes | None


class _Group:
    """Statements submitted together, resolved as one asyncio future once every one has finished.

    The first failure stops the group: statements of it still queued are skipped (never started), the ones
    in flight finish, then the future fails with that first error.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.loop = loop
        self.fut: asyncio.Future[None] = loop.create_future()
        # A cancelled caller no longer awaits it: consume its outcome so asyncio does not log it as lost.
        self.fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.remaining = count
        self.error: BaseException | None = None
        self.stopped = False
        self.lock = threading.Lock()

    def finished(self, exc: BaseException | None) -> None:
        with self.lock:
            self.remaining -= 1
            if exc is not None and self.error is None:
                self.error, self.stopped = exc, True
            last = self.remaining == 0
        if last:
            with contextlib.suppress(RuntimeError):  # loop closed: nobody is waiting any more
                self.loop.call_soon_threadsafe(_resolve, self.fut, self.error)


_Item = tuple[Statement, "bytes | None", _Group, "list[Any] | None"]


class Dispatcher:
    """At most ``limit`` requests in flight on the session, the rest queued FIFO (a counting semaphore
    that never blocks a thread).

    A completion (on the driver's event-loop thread) starts the next queued statement right there, so a
    500-envelope put crosses into asyncio once, not once per statement; that halves the client CPU per
    request (docs/archive.md "Cassandra adapter").
    """

    def __init__(self, session: Session, limit: int) -> None:
        self.session = session
        self._lock = threading.Lock()
        self._free = limit
        self._queue: deque[_Item] = deque()
        self._local = threading.local()

    def submit(self, items: Iterable[_Item]) -> None:
        """Queue statements; start as many as there are free slots."""
        with self._lock:
            self._queue.extend(items)
        self._pump()

    def _pump(self) -> None:
        # Trampoline: a statement failing synchronously (no host) completes inside _start and would
        # otherwise recurse once per queued statement.
        local = self._local
        if getattr(local, "pumping", False):
            local.again = True
            return
        local.pumping = True
        try:
            local.again = True
            while local.again:
                local.again = False
                while True:
                    with self._lock:
                        if not self._queue or self._free <= 0:
                            break
                        item = self._queue.popleft()
                        self._free -= 1
                    self._start(item)
        finally:
            local.pumping = False

    def _start(self, item: _Item) -> None:
        stmt, paging_state, group, sink = item
        if group.stopped:
            self._done(group, None)
            return
        try:
            rf = self.session.execute_async(stmt, paging_state=paging_state)
        except Exception as err:
            self._done(group, err)
            return

        def ok(_rows: object) -> None:
            if sink is not None:
                sink.append(rf)
            self._done(group, None)

        rf.add_callbacks(ok, lambda exc: self._done(group, exc))

    def _done(self, group: _Group, exc: BaseException | None) -> None:
        with self._lock:
            self._free += 1
        group.finished(exc)
        self._pump()


class Bridge:
    """Runs statements on a connected session from asyncio with at most ``max_in_flight`` outstanding."""

    def __init__(self, session: Session, max_in_flight: int) -> None:
        self.session = session
        self._dispatch = Dispatcher(session, max_in_flight)
        self._idle = asyncio.Event()
        self._idle.set()
        self._active = 0

    async def _run(
        self, statements: Sequence[Statement], paging_state: bytes | None, what: str, sink: list[Any] | None
    ) -> None:
        if not statements:
            return
        group = _Group(asyncio.get_running_loop(), len(statements))
        self._active += 1
        self._idle.clear()
        try:
            self._dispatch.submit((s, paging_state, group, sink) for s in statements)
            try:
                await asyncio.shield(group.fut)
            except asyncio.CancelledError:
                group.stopped = True  # queued statements are skipped; those in flight finish harmlessly
                raise
            except Exception as err:  # NoHostAvailable is no DriverException: translate everything
                raise translate(err, what) from err
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def fetch(
        self,
        prepared: PreparedStatement,
        params: Sequence[Any],
        *,
        what: str,
        fetch_size: int | None = None,
        paging_state: bytes | None = None,
    ) -> Page:
        """One page of a prepared read (``fetch_size`` rows at most)."""
        bound = prepared.bind(params)
        bound.fetch_size = fetch_size
        sink: list[Any] = []
        await self._run([bound], paging_state, what, sink)
        try:
            result = sink[0].result()  # complete already: does not block
        except Exception as err:
            raise translate(err, what) from err
        return Page(list(result.current_rows), result.paging_state)

    async def fetch_all(self, prepared: PreparedStatement, params: Sequence[Any], *, what: str) -> list[Any]:
        """Every row of a prepared read, page by page."""
        rows: list[Any] = []
        state: bytes | None = None
        while True:
            page = await self.fetch(prepared, params, what=what, fetch_size=5000, paging_state=state)
            rows.extend(page.rows)
            if page.paging_state is None:
                return rows
            state = page.paging_state

    async def execute_all(self, statements: Iterable[Statement], *, what: str) -> None:
        """Run writes concurrently (within the in-flight bound); return once all are acknowledged.

        On the first failure no further statement is started; the ones in flight are awaited (so nothing is
        left running behind the caller's back) and the first error is raised.
        """
        await self._run(list(statements), None, what, None)

    async def drain(self) -> None:
        """Wait until no request is in flight."""
        await self._idle.wait()


def _resolve(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


def unlogged_batch(statements: Sequence[Statement]) -> Statement:
    """One statement, or an UNLOGGED batch of them (idempotent): meant for rows of one partition, or
    single-row partitions that share their replica set (:func:`group_by_replicas`)."""
    if len(statements) == 1:
        return statements[0]
    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
    for stmt in statements:
        batch.add(stmt)
    batch.is_idempotent = True
    return batch


def replica_set(metadata: Any, keyspace: str, stmt: Statement) -> tuple[str, ...]:
    """The replica set owning a bound statement's partition, from the driver's token map
    (``cluster.metadata``)."""
    hosts = metadata.get_replicas(keyspace, stmt.routing_key)
    return tuple(sorted(str(h.endpoint) for h in hosts))


def group_by_replicas(
    stmts: Sequence[Statement], per_batch: int, replicas_of: Callable[[Statement], Hashable] | None
) -> list[Statement]:
    """Single-row writes of distinct partitions packed into UNLOGGED batches of at most ``per_batch``
    partitions that share a replica set, so the token-aware coordinator is a replica of every row (no
    fan-out); idempotent upserts only, as an unlogged batch is not atomic.

    ``per_batch`` 10 is Cassandra's ``unlogged_batch_across_partitions_warn_threshold``; 1 (or no
    ``replicas_of``) sends them one by one.
    """
    if per_batch <= 1 or replicas_of is None:
        return list(stmts)
    groups: dict[Hashable, list[Statement]] = {}
    for stmt in stmts:
        groups.setdefault(replicas_of(stmt), []).append(stmt)
    return [
        unlogged_batch(g[i : i + per_batch]) for g in groups.values() for i in range(0, len(g), per_batch)
    ]
