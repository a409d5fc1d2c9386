"""The open requests of the shards this replica owns, in memory, and every write to the outbox.

:class:`OwnedRequests` is the engine's state: the entries it schedules, the ones it finished lately (so a
stale open-request read cannot revive them), per-request hold-offs after a failed write, and the writes
themselves. Writes go through group commit (:mod:`services.send.batching`): concurrent adds share one
``add_many``, concurrent saves one ``save_many``; writes to one request are serialised by its lock, so a
Cancel and an attempt's result never interleave; a save is made under the shard's lease or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from msgstore.errors import LeaseLost, MsgStoreError, RequestIdConflict
from msgstore.protocol import MsgStore, OutboxStore
from msgstore.sharding import shard_of
from msgstore.types import Lease, OutboxEntry
from services.send.batching import GroupCommit
from services.send.ownership import ShardOwnership
from services.send.ports import EngineObserver

__all__ = ["Discarded", "OwnedRequests"]

_log = logging.getLogger(__name__)
SAVE_RETRY_S = 1.0  # after a failed store write, the request waits this long before it is tried again
_FORGET_S = 60.0  # finished ids are remembered this long so a stale open-request read cannot revive them


class Discarded(Exception):
    """A change is not saved: the request was canceled meanwhile or its shard is no longer held."""


class OwnedRequests:
    """Owned open requests and the outbox writes (see the module docstring)."""

    def __init__(
        self,
        store: MsgStore,
        ownership: ShardOwnership,
        observer: EngineObserver,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._ownership = ownership
        self._observer = observer
        self._clock = clock
        #: Open requests of the owned shards, by request id.
        self.entries: dict[str, OutboxEntry] = {}
        #: Request id -> instant before which it is not retried (a write of it failed).
        self.hold: dict[str, float] = {}
        #: Request id -> when it finished here.
        self.finished: dict[str, float] = {}
        #: Requests whose attempt in flight must not save its result (canceled meanwhile).
        self.canceled: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        self._writing: dict[int, int] = {}  # shard -> saves in flight
        self._adds: GroupCommit[OutboxEntry, tuple[OutboxEntry, bool]] = GroupCommit(self._flush_adds)
        self._saves: GroupCommit[tuple[OutboxEntry, Lease], OutboxEntry] = GroupCommit(self._flush_saves)
        self._changed = asyncio.Event()

    @property
    def outbox(self) -> OutboxStore:
        """The store's outbox (looked up per use: a Cassandra store has its parts only once open)."""
        return self._store.outbox

    def shard(self, request_id: str) -> int:
        """The outbox shard of a request."""
        return shard_of(request_id, self._ownership.shards)

    def lock(self, request_id: str) -> asyncio.Lock:
        """The lock serialising writes to one request."""
        return self._locks.setdefault(request_id, asyncio.Lock())

    def writing(self, shard: int) -> bool:
        """Whether a save of ``shard`` is in flight."""
        return self._writing.get(shard, 0) > 0

    async def wait_change(self, timeout: float) -> None:
        """Return when this replica saves a change, or after ``timeout`` seconds."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    # ------------------------------------------------------------------------------------------ adds

    async def add(self, entry: OutboxEntry) -> tuple[OutboxEntry, bool]:
        """Persist a new request (group commit); RequestIdConflict for a different message."""
        return await self._adds.submit(entry)

    async def _flush_adds(
        self, entries: Sequence[OutboxEntry]
    ) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
        return await self.outbox.add_many(entries, now=self._clock())

    # ------------------------------------------------------------------------------------------ saves

    async def save(self, entry: OutboxEntry) -> OutboxEntry:
        """Save one change of a request (see :meth:`save_all`)."""
        return (await self.save_all([entry]))[-1]

    async def save_all(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        """Save changes of one request, in order and in one write, under the request's lock."""
        rid = entries[0].request_id
        async with self.lock(rid):
            if rid in self.canceled:
                raise Discarded(rid)
            return await self.save_locked(entries)

    async def save_locked(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        """:meth:`save_all` for a caller holding the request's lock. Discarded when the shard is not held;
        LeaseLost (the shard is purged) or another MsgStoreError (the request is held off) when the store
        refused; the changes saved before a refusal stand."""
        rid = entries[0].request_id
        shard = self.shard(rid)
        lease = self._ownership.lease(shard)
        if lease is None:
            self.entries.pop(rid, None)
            raise Discarded(rid)
        self._writing[shard] = self._writing.get(shard, 0) + 1
        try:
            outcomes = await self._saves.submit_all([(entry, lease) for entry in entries])
        finally:
            self._writing[shard] -= 1
        saved: list[OutboxEntry] = []
        for outcome in outcomes:
            if isinstance(outcome, LeaseLost):
                self.purge(shard, "lost to another replica")
                raise outcome
            if isinstance(outcome, MsgStoreError):
                self.hold[rid] = self._clock() + SAVE_RETRY_S
                raise outcome
            if isinstance(outcome, BaseException):
                raise outcome
            self._saved(outcome)
            saved.append(outcome)
        return saved

    async def _flush_saves(self, items: Sequence[tuple[OutboxEntry, Lease]]) -> list[OutboxEntry | LeaseLost]:
        # One flush at a time (GroupCommit), and save_many numbers one shard's changes in order: a shard's
        # change numbers never collide (docs/messaging-store.md "Outbox": one save per shard at a time).
        return await self.outbox.save_many(items, now=self._clock())

    def _saved(self, saved: OutboxEntry) -> None:
        rid = saved.request_id
        before = self.entries.get(rid)
        self.hold.pop(rid, None)
        if saved.state.is_final:
            self.entries.pop(rid, None)
            self._locks.pop(rid, None)
            self.finished[rid] = self._clock()
        else:
            self.entries[rid] = saved
        self._observer.changed(before, saved)
        self._changed.set()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------------------------------ shards

    def adopt(self, opened: Sequence[OutboxEntry], busy: set[str]) -> None:
        """Take the open requests read from an owned shard that are not known here yet."""
        for entry in opened:
            rid = entry.request_id
            if rid not in self.entries and rid not in busy and rid not in self.finished:
                self.entries[rid] = entry

    def forget_finished(self) -> None:
        """Drop finished ids older than the stale-read window."""
        cutoff = self._clock() - _FORGET_S
        self.finished = {rid: t for rid, t in self.finished.items() if t > cutoff}

    def purge(self, shard: int, why: str) -> Lease | None:
        """Stop owning ``shard``: forget its lease and its requests; the lease, if it was held."""
        _log.info("outbox shard %d %s", shard, why)
        lease = self._ownership.drop(shard)
        for rid in [rid for rid in self.entries if self.shard(rid) == shard]:
            del self.entries[rid]
        return lease
