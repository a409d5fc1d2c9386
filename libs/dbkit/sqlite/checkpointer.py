"""WAL checkpoints off the commit path: a connection of their own, on a thread of their own.

SQLite's automatic checkpoint runs inside the COMMIT that takes the write-ahead log past
``wal_autocheckpoint`` pages (SQLite "Write-Ahead Logging", section "Automatic Checkpoint"): that commit
copies thousands of pages back into the database file and fsyncs it before it returns, and every caller
whose write waits behind it waits that long. Measured on the send service (SQLite, 1,000 Sends/s offered):
a 20–40 ms stall every ~350 ms, which was the whole p99 (37 ms → 10 ms without it; docs/benchmarks.md).

:class:`WalCheckpointer` runs ``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval_s`` from its own
connection and thread instead. A PASSIVE checkpoint takes no lock a writer or reader needs ("Checkpoint as
many frames as possible without waiting for any database readers or writers to finish", SQLite
``sqlite3_wal_checkpoint_v2``), so commits go on while it copies. The log is rewound from its start by the
first write after a checkpoint that copied all of it, and only then: under writes without a pause every
write finds a few frames the last checkpoint did not copy, and the log is never rewound that way (seen:
2,000 back-to-back commits, every checkpoint complete when it ran, the log never rewound). So the writer keeps
its automatic checkpoint as a backstop at :data:`BACKSTOP_PAGES` (ten times the usual, 160 MB of log at
4 KiB pages): the background checkpoints have copied all but the last frames by then, the commit that runs
it rewinds the log. The backstop's checkpoints still cost the commits beside them: at 1,000 Sends/s for 15 s
the p99 was 22–37 ms with the backstop at twice the usual, 17 ms at ten times (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor

from dbkit.sqlite.connection import WAL_AUTOCHECKPOINT_PAGES

__all__ = ["BACKSTOP_PAGES", "WalCheckpointer"]

_log = logging.getLogger(__name__)

BACKSTOP_PAGES = 10 * WAL_AUTOCHECKPOINT_PAGES
"""The writer's own automatic checkpoint when a :class:`WalCheckpointer` runs (see the module docstring)."""


class WalCheckpointer:
    """Checkpoints one database's WAL every ``interval_s`` from its own connection and thread."""

    def __init__(self, path: str, *, name: str, interval_s: float, busy_timeout_ms: int) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self._path = path
        self._name = name
        self._interval_s = interval_s
        self._busy_timeout_ms = busy_timeout_ms
        self._pool: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self.runs = 0
        """Checkpoints run so far (for tests and the curious)."""
        self.last: tuple[int, int, int] | None = None
        """The last checkpoint's (busy, log frames, frames checkpointed), as SQLite reports them."""

    async def start(self) -> None:
        """Connect (on the checkpoint thread) and start checkpointing."""
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-sqlite-checkpoint")
        loop = asyncio.get_running_loop()
        self._conn = await loop.run_in_executor(self._pool, self._connect)
        self._task = loop.create_task(self._run(), name=f"{self._name}-sqlite-checkpoint")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        return conn

    def _checkpoint(self) -> tuple[int, int, int]:
        assert self._conn is not None
        ((busy, log, done),) = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        return int(busy), int(log), int(done)

    async def checkpoint(self) -> tuple[int, int, int]:
        """One PASSIVE checkpoint now, on the checkpoint thread: (busy, log frames, frames checkpointed)."""
        if self._pool is None:
            raise RuntimeError("the checkpointer is not started")
        result = await asyncio.get_running_loop().run_in_executor(self._pool, self._checkpoint)
        self.runs += 1
        self.last = result
        return result

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.checkpoint()
            except sqlite3.Error as err:  # harmless: the next one tries again, the writer's backstop remains
                _log.warning("%s: WAL checkpoint failed: %s", self._name, err)

    async def stop(self) -> None:
        """Stop checkpointing and close the connection (before the writer's final checkpoint)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        pool, conn = self._pool, self._conn
        self._pool = self._conn = None
        if pool is not None:
            if conn is not None:
                await asyncio.get_running_loop().run_in_executor(pool, conn.close)
            pool.shutdown(wait=False)
