"""asyncio ⇄ sqlite3: one writer thread, a small pool of read connections, a bounded write queue.

sqlite3 blocks, and SQLite has exactly one writer at a time anyway, so every write runs on one dedicated
thread holding the one write connection (a single-thread executor: jobs run in submission order). Reads run
on ``read_connections`` connections, each used by one job at a time; WAL lets them read concurrently with
the writer. Nothing sqlite3 runs on the event loop, not even ``connect`` or ``close``.

Backpressure: at most ``max_pending_writes`` write jobs are queued or running; a further ``write()`` waits
for a slot instead of growing the executor's queue. A slot (and a read connection) is given back when the
*thread* finishes the job, not when the awaiting task goes away, so cancelling a caller can neither
overfill the queue nor hand a connection that is still in use to another reader.

Every ``sqlite3.Error`` leaving a job is translated with :func:`dbkit.sqlite.connection.translate_error`;
any other exception a job raises (a store's own errors) passes through unchanged. ``name`` says whose
bridge it is (``archive``, ``msgstore``): it names the threads (``<name>-sqlite-writer``,
``<name>-sqlite-reader``) and the "not open" errors.

With ``checkpoint_every_s``, WAL checkpoints run on a thread and connection of their own
(:class:`dbkit.sqlite.checkpointer.WalCheckpointer`) instead of inside the commit that fills the log, and the
writer keeps its automatic checkpoint only as a backstop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from dbkit.errors import DbUnavailable
from dbkit.sqlite.checkpointer import BACKSTOP_PAGES, WalCheckpointer
from dbkit.sqlite.connection import (
    WAL_AUTOCHECKPOINT_PAGES,
    configure_reader,
    configure_writer,
    translate_error,
)

__all__ = ["SqliteBridge"]

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], T]


class SqliteBridge:
    """Runs blocking jobs ``fn(connection)`` for the event loop: writes serialised, reads pooled."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        name: str,
        read_connections: int,
        max_pending_writes: int,
        busy_timeout_ms: int,
        page_size: int | None,
        cache_mib: int = 256,
        checkpoint_every_s: float = 0.0,
        checkpoint_backstop_pages: int = BACKSTOP_PAGES,
    ) -> None:
        if read_connections < 1 or max_pending_writes < 1:
            raise ValueError("read_connections and max_pending_writes must be at least 1")
        self._path = os.fspath(path)
        self.name = name
        self._read_connections = read_connections
        self._max_pending_writes = max_pending_writes
        self._busy_timeout_ms = busy_timeout_ms
        self._page_size = page_size
        self._cache_mib = cache_mib
        self._checkpoint_every_s = checkpoint_every_s
        self._checkpoint_backstop_pages = checkpoint_backstop_pages
        self.checkpointer: WalCheckpointer | None = None
        """The background checkpointer while open, when ``checkpoint_every_s`` asked for one."""
        self._writer_pool: ThreadPoolExecutor | None = None
        self._reader_pool: ThreadPoolExecutor | None = None
        self._writer: sqlite3.Connection | None = None
        self._readers: asyncio.Queue[sqlite3.Connection] | None = None
        self._write_slots: asyncio.Semaphore | None = None
        self._state = "closed"  # closed → opening → open → closing → closed

    @property
    def is_open(self) -> bool:
        """Whether jobs are accepted."""
        return self._state == "open"

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; the stores' jobs issue BEGIN / COMMIT themselves.
        # check_same_thread=False: each connection is only ever used by one job at a time, but close()
        # may run on another thread of the same pool.
        return sqlite3.connect(
            self._path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,
        )

    async def open(self, setup: Job[T]) -> T:
        """Connect the writer, run ``setup`` (migrations) on it, then connect the readers."""
        if self._state != "closed":
            raise RuntimeError(f"bridge is {self._state}")
        self._state = "opening"
        self._writer_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-sqlite-writer")
        self._reader_pool = ThreadPoolExecutor(
            self._read_connections, thread_name_prefix=f"{self.name}-sqlite-reader"
        )
        self._write_slots = asyncio.Semaphore(self._max_pending_writes)
        self._readers = asyncio.Queue()
        try:
            result = await self._in_thread(self._writer_pool, self._open_writer(setup), "open")
            for _ in range(self._read_connections):
                conn = await self._in_thread(self._reader_pool, self._open_reader, "open reader")
                self._readers.put_nowait(conn)
            if self._checkpoint_every_s > 0:
                self.checkpointer = WalCheckpointer(
                    self._path,
                    name=self.name,
                    interval_s=self._checkpoint_every_s,
                    busy_timeout_ms=self._busy_timeout_ms,
                )
                await self.checkpointer.start()
        except BaseException:
            await self._teardown()
            raise
        self._state = "open"
        return result

    def _open_writer(self, setup: Job[T]) -> Callable[[], T]:
        def run() -> T:
            conn = self._connect()
            try:
                configure_writer(
                    conn,
                    busy_timeout_ms=self._busy_timeout_ms,
                    page_size=self._page_size,
                    cache_mib=self._cache_mib,
                    autocheckpoint_pages=(
                        self._checkpoint_backstop_pages
                        if self._checkpoint_every_s > 0
                        else WAL_AUTOCHECKPOINT_PAGES
                    ),
                )
                result = setup(conn)
            except BaseException:
                conn.close()
                raise
            self._writer = conn
            return result

        return run

    def _open_reader(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            configure_reader(conn, busy_timeout_ms=self._busy_timeout_ms)
        except BaseException:
            conn.close()
            raise
        return conn

    async def write(self, job: Job[T], doing: str) -> T:
        """Run ``job`` on the writer thread once a queue slot is free; returns its result."""
        slots = self._write_slots
        if not self.is_open or slots is None or self._writer_pool is None:
            raise DbUnavailable(f"sqlite {self.name} is not open ({doing})")
        await slots.acquire()
        writer = self._writer
        if writer is None:  # closed while we waited for the slot
            slots.release()
            raise DbUnavailable(f"sqlite {self.name} closed ({doing})")
        return await self._in_thread(self._writer_pool, lambda: job(writer), doing, release=slots.release)

    async def read(self, job: Job[T], doing: str) -> T:
        """Run ``job`` on a free read connection; returns its result."""
        readers = self._readers
        if not self.is_open or readers is None or self._reader_pool is None:
            raise DbUnavailable(f"sqlite {self.name} is not open ({doing})")
        conn = await readers.get()
        return await self._in_thread(
            self._reader_pool, lambda: job(conn), doing, release=lambda: readers.put_nowait(conn)
        )

    async def _in_thread(
        self,
        pool: ThreadPoolExecutor,
        fn: Callable[[], T],
        doing: str,
        release: Callable[[], None] | None = None,
    ) -> T:
        loop = asyncio.get_running_loop()

        def guarded() -> T:
            try:
                return fn()
            except sqlite3.Error as err:
                raise translate_error(err, doing) from err

        try:
            future: Future[T] = pool.submit(guarded)
        except BaseException:
            if release is not None:
                release()
            raise
        if release is not None:
            give_back = release

            def done(_: Future[T]) -> None:
                with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody waits any more
                    loop.call_soon_threadsafe(give_back)

            future.add_done_callback(done)
        return await asyncio.wrap_future(future)

    async def close(self, final: Job[None] | None = None) -> None:
        """Finish every write already submitted or waiting, run ``final`` on the writer, close everything."""
        if self._state != "open":
            return
        self._state = "closing"
        slots, readers = self._write_slots, self._readers
        assert slots is not None and readers is not None
        for _ in range(self._max_pending_writes):  # FIFO: queues behind every write that entered before
            await slots.acquire()
        idle = [await readers.get() for _ in range(self._read_connections)]  # no read in flight any more
        await self._teardown(final, idle)

    async def _teardown(
        self, final: Job[None] | None = None, readers: list[sqlite3.Connection] | None = None
    ) -> None:
        checkpointer, self.checkpointer = self.checkpointer, None
        if checkpointer is not None:
            await checkpointer.stop()  # before the writer's final job, which may checkpoint itself
        writer, self._writer = self._writer, None
        readers = list(readers or ())
        while self._readers is not None and not self._readers.empty():
            readers.append(self._readers.get_nowait())
        try:
            if writer is not None and self._writer_pool is not None:

                def finish() -> None:
                    try:
                        if final is not None:
                            final(writer)
                    finally:
                        writer.close()

                await self._in_thread(self._writer_pool, finish, "close")
            if readers and self._reader_pool is not None:

                def close_readers() -> None:
                    for conn in readers:
                        conn.close()

                await self._in_thread(self._reader_pool, close_readers, "close")
        finally:
            for pool in (self._writer_pool, self._reader_pool):
                if pool is not None:
                    pool.shutdown(wait=False)
            self._writer_pool = self._reader_pool = None
            self._readers = None
            self._write_slots = None
            self._state = "closed"
