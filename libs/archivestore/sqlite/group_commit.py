"""Group commit for the SQLite archive: the put batches waiting for the writer share one transaction.

Why: at a million rows every insert lands on random leaves of the two hash indexes, and each transaction
writes every page it dirtied to the WAL and fsyncs (docs/benchmarks.md "2. Ingest into SQLite"). The fsync and
the rewrite of hot pages are paid per transaction, so merging the batches that queued up while the previous
transaction ran (ingest keeps two in flight by default; several ingest replicas share one archive) cuts the
cost per envelope without delaying anyone: a batch is written as soon as the writer is free, alone if
nothing else waits. This is the classic group commit of databases' write-ahead logs.

Semantics are those of one transaction per batch: every caller gets its own outcomes in its own order; an
envelope sent by two callers in the same transaction is INSERTED for the first (in arrival order) and
DUPLICATE for the second, as if their transactions had run one after the other; if the transaction fails,
every caller in it gets the error and nothing of theirs was committed (each retries its own batch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from archivestore.sqlite.operations import InsertRow

__all__ = ["GroupCommit"]

#: Rows merged into one transaction at most (larger groups are split; 8 ingest batches of 500).
DEFAULT_MAX_ROWS = 4000


@dataclass(slots=True)
class _Waiting:
    rows: Sequence[InsertRow]
    done: asyncio.Future[list[bool]]


class GroupCommit:
    """Merges concurrent ``insert`` calls into as few ``write(rows)`` transactions as the writer allows.

    ``write`` runs one transaction over the rows and returns, per row, whether it was new; at most one
    ``write`` is in progress at a time from this object (the writer thread serialises them anyway).
    """

    def __init__(
        self,
        write: Callable[[Sequence[InsertRow]], Awaitable[list[bool]]],
        *,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> None:
        if max_rows < 1:
            raise ValueError("max_rows must be >= 1")
        self._write = write
        self._max_rows = max_rows
        self._queue: list[_Waiting] = []
        self._flusher: asyncio.Task[None] | None = None
        #: Transactions run and batches merged into them, for metrics and tests.
        self.transactions = 0
        self.batches = 0

    async def insert(self, rows: Sequence[InsertRow]) -> list[bool]:
        """Write ``rows`` in a transaction maybe shared with other callers; per row, whether it was new."""
        done: asyncio.Future[list[bool]] = asyncio.get_running_loop().create_future()
        done.add_done_callback(_retrieve)  # a caller cancelled meanwhile never reads a later failure
        self._queue.append(_Waiting(rows, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush(), name="archive-sqlite-group-commit")
        # shield: a cancelled caller must not cancel the transaction other callers share with it.
        return await asyncio.shield(done)

    def _take(self) -> list[_Waiting]:
        """The longest prefix of the queue within ``max_rows`` (always at least one batch)."""
        taken, rows = 0, 0
        for waiting in self._queue:
            if taken and rows + len(waiting.rows) > self._max_rows:
                break
            taken += 1
            rows += len(waiting.rows)
        group, self._queue = self._queue[:taken], self._queue[taken:]
        return group

    async def _flush(self) -> None:
        while self._queue:
            group = self._take()
            merged = [row for waiting in group for row in waiting.rows]
            try:
                inserted = await self._write(merged)
            except asyncio.CancelledError:
                for waiting in (*group, *self._queue):
                    if not waiting.done.done():
                        waiting.done.cancel()
                self._queue = []
                raise
            except Exception as err:  # each caller gets the failure of its own transaction
                for waiting in group:
                    if not waiting.done.done():
                        waiting.done.set_exception(err)
                continue
            self.transactions += 1
            self.batches += len(group)
            offset = 0
            for waiting in group:
                end = offset + len(waiting.rows)
                if not waiting.done.done():
                    waiting.done.set_result(inserted[offset:end])
                offset = end


def _retrieve(future: asyncio.Future[list[bool]]) -> None:
    if not future.cancelled():
        future.exception()
