"""The outbox worker: owns shards, serves due requests in the spec's order, runs attempts, saves changes.

One :class:`SendEngine` per replica. Every state change of a request is one ``OutboxStore.save`` under the
shard's lease (the change log WatchSendStatuses follows), made by the state machine in
:mod:`services.send.schedule`; the engine only decides *when*. Requests a replica accepted for a shard it
does not own are picked up by the owner's periodic read of its open requests.

Writes to one request are serialised by a per-request lock, so a Cancel and an attempt's result never
interleave. A request whose attempt was interrupted (the replica died, or its result could not be saved)
is found in SENDING by its next owner and counts as a failed attempt: it is retried on schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from opentelemetry import trace

from msgstore.errors import LeaseLost, MsgStoreError, RequestIdConflict
from msgstore.protocol import MsgStore, OutboxStore
from msgstore.sharding import shard_of
from msgstore.types import HealthStatus, Lease, MessageErrorKind, OutboxEntry, SendState
from services.send import schedule
from services.send.batching import GroupCommit
from services.send.errors import NotOwner, RequestIdTaken
from services.send.ownership import ShardOwnership
from services.send.ports import EngineObserver, EngineSettings, Publisher, StoreChecker
from services.send.sealing import Sealer
from services.send.validation import without_timestamp

__all__ = ["SendEngine"]

_log = logging.getLogger(__name__)
_tracer = trace.get_tracer(__name__)
_SAVE_RETRY_S = 1.0  # after a failed store write, the request waits this long before it is tried again
_FORGET_S = 60.0  # finished ids are remembered this long so a stale open-request read cannot revive them
_PASS_INTERVAL_S = 0.005  # coalesces wake-ups (see _schedule_loop); delays an attempt's start by at most this


class SendEngine:
    """The outbox worker of one replica (see the module docstring)."""

    def __init__(
        self,
        store: MsgStore,
        ownership: ShardOwnership,
        publisher: Publisher,
        checker: StoreChecker,
        sealer: Sealer,
        settings: EngineSettings,
        observer: EngineObserver,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._ownership = ownership
        self._publisher = publisher
        self._checker = checker
        self._sealer = sealer
        self._settings = settings
        self._policy = settings.policy
        self._observer = observer
        self._clock = clock
        self._entries: dict[str, OutboxEntry] = {}
        self._busy: set[str] = set()
        self._hold: dict[str, float] = {}
        self._finished: dict[str, float] = {}
        self._canceled: set[str] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        # Group commit (services.send.batching): concurrent adds, and concurrent saves, share one write.
        self._adds: GroupCommit[OutboxEntry, tuple[OutboxEntry, bool]] = GroupCommit(self._flush_adds)
        self._saves: GroupCommit[tuple[OutboxEntry, Lease], OutboxEntry] = GroupCommit(self._flush_saves)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._paused = False
        self._paused_since: float | None = None

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the lease and scheduling loops (call from the event loop)."""
        self._loops = [asyncio.create_task(self._lease_loop()), asyncio.create_task(self._schedule_loop())]

    async def first_tick(self) -> None:
        """Take the free shards once and load their open requests (start-up, before serving)."""
        await self._tick()

    async def stop(self) -> None:
        """Stop the loops, let running attempts finish their saves, release the shards."""
        for task in self._loops:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._ownership.release_all()

    def set_health(self, status: HealthStatus) -> None:
        """Follow the node's health: Unhealthy halts attempts, MinimallyHealthy/Healthy resume them."""
        if status is HealthStatus.UNSPECIFIED:
            return
        paused = status is HealthStatus.UNHEALTHY
        if paused and not self._paused:
            self._paused_since = self._clock()
        self._paused = paused
        self._wake.set()

    async def wait_change(self, timeout: float) -> None:
        """Return when this replica saves a change, or after ``timeout`` seconds."""
        event = self._changed
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    # ------------------------------------------------------------------------------------------ requests

    async def accept(
        self, entry: OutboxEntry, *, given_id: bool, given_timestamp: bool
    ) -> tuple[OutboxEntry, bool]:
        """Persist a new request (durable before this returns) and schedule it if this replica owns it.

        A caller-supplied id may repeat an earlier Send whose timestamp was filled in with "now": that
        repeat is recognised here, before ``add`` (which compares timestamps). A generated id is new.
        """
        now = self._clock()
        existing = await self._outbox.get(entry.request_id, now=now) if given_id else None
        if existing is not None:
            probe = entry if given_timestamp else without_timestamp(entry)
            if not existing.repeats(probe):
                raise RequestIdTaken(entry.request_id)
            return existing, False
        try:
            stored, created = await self._adds.submit(entry)
        except RequestIdConflict as err:
            raise RequestIdTaken(entry.request_id) from err
        if created and self._ownership.lease(self._shard(stored.request_id)) is not None:
            self._entries.setdefault(stored.request_id, stored)
            self._wake.set()
        return stored, created

    async def cancel(self, request_id: str) -> tuple[bool, SendState]:
        """Cancel a pending request: (canceled by this call, state after). Unknown: (False, UNSPECIFIED)."""
        return await self._final_edit(request_id, lambda e, now: schedule.cancel(e, now), cancel=True)

    async def resend(self, request_id: str) -> tuple[bool, SendState]:
        """Re-queue a FAILED request as fresh: (rescheduled, state after)."""
        return await self._final_edit(
            request_id, lambda e, now: schedule.resend(e, now, self._policy), cancel=False
        )

    async def _final_edit(
        self,
        request_id: str,
        edit: Callable[[OutboxEntry, float], OutboxEntry | None],
        *,
        cancel: bool,
    ) -> tuple[bool, SendState]:
        shard = self._shard(request_id)
        async with self._locks.setdefault(request_id, asyncio.Lock()):
            entry = self._entries.get(request_id) or await self._outbox.get(request_id, now=self._clock())
            if entry is None:
                return False, SendState.UNSPECIFIED
            changed = edit(entry, self._clock())
            if changed is None:
                return False, entry.state
            if self._ownership.lease(shard) is None:
                raise NotOwner(request_id, shard)
            [saved] = await self._save_locked([changed])
            if cancel and request_id in self._busy:
                self._canceled.add(request_id)  # the attempt in flight discards its result
            if not cancel:
                self._finished.pop(request_id, None)
                self._entries[request_id] = saved
                self._wake.set()
            return True, saved.state

    # ------------------------------------------------------------------------------------------ loops

    async def _lease_loop(self) -> None:
        interval = min(self._settings.adopt_interval_s, self._settings.lease_ttl_s / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                await self._tick()
            except MsgStoreError as err:
                _log.warning("outbox ownership pass failed: %s", err)
            except Exception:  # a bug must not end the loop: every held lease would lapse silently
                _log.exception("outbox ownership pass failed")

    async def _tick(self) -> None:
        """Renew and take leases, then read every held shard's open requests and adopt the unknown ones."""
        _gained, lost = await self._ownership.tick()  # gained shards are among the held ones read below
        for shard in lost:
            self._purge(shard)
        for shard in self._ownership.held:
            lease = self._ownership.lease(shard)
            if lease is None:
                continue
            try:
                opened = await self._outbox.open_requests(shard, lease, now=self._clock())
            except LeaseLost:
                self._purge(shard)
                continue
            for entry in opened:
                rid = entry.request_id
                if rid not in self._entries and rid not in self._busy and rid not in self._finished:
                    self._entries[rid] = entry
        self._observer.owned(len(self._ownership.held), len(self._entries), self._paused)
        cutoff = self._clock() - _FORGET_S
        self._finished = {rid: t for rid, t in self._finished.items() if t > cutoff}
        self._wake.set()

    def _purge(self, shard: int) -> None:
        _log.info("outbox shard %d lost to another replica", shard)
        self._ownership.drop(shard)
        for rid in [rid for rid in self._entries if self._shard(rid) == shard]:
            del self._entries[rid]

    async def _schedule_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = self._pass()
            except Exception:  # a bug must not end the loop: nothing would be sent again
                _log.exception("scheduling pass failed")
                wait = 1.0
            self._observer.owned(len(self._ownership.held), len(self._entries), self._paused)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            # A pass scans every owned open request; under load every accepted Send and every saved result
            # wakes the loop, so wake-ups are coalesced: at most one pass per _PASS_INTERVAL_S.
            await asyncio.sleep(_PASS_INTERVAL_S)

    def _pass(self) -> float:
        """Launch what is due, in order; returns the seconds until the next entry falls due."""
        now = self._clock()
        nxt = now + 3600.0
        due: list[OutboxEntry] = []
        for rid, entry in self._entries.items():
            if rid in self._busy:
                continue
            state = entry.state
            if self._paused and state in (SendState.QUEUED, SendState.RETRY_WAIT):
                self._launch(entry, self._transition(entry, schedule.pause(entry, now)))
                continue
            if not self._paused and state is SendState.PAUSED:
                resumed = schedule.resume(entry, self._paused_since or now, now)
                self._launch(entry, self._transition(entry, resumed))
                continue
            if state is SendState.SENDING:
                at: float | None = entry.progress.last_attempt_at or now
            else:
                at = schedule.due_at(entry, self._policy)
            if at is None:
                continue
            at = max(at, self._hold.get(rid, at))
            if at <= now:
                due.append(entry)
            else:
                nxt = min(nxt, at)
        due.sort(key=schedule.order_key)
        room = self._settings.max_in_flight - len(self._busy)
        for entry in due[: max(0, room)]:
            self._launch(entry, self._attempt(entry))
        return max(0.0, nxt - self._clock())

    def _launch(self, entry: OutboxEntry, work: Coroutine[Any, Any, None]) -> None:
        rid = entry.request_id
        self._busy.add(rid)
        task = asyncio.create_task(_guarded(rid, work))
        self._tasks.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._tasks.discard(t)
            self._busy.discard(rid)
            self._canceled.discard(rid)
            self._wake.set()

        task.add_done_callback(done)

    # ------------------------------------------------------------------------------------------ attempts

    async def _transition(self, before: OutboxEntry, after: OutboxEntry) -> None:
        # The QUEUED change of a request accepted meanwhile comes first, in the same write.
        changes = [before] if before.sequence == 0 else []
        if after is not before:
            changes.append(after)
        if changes:
            await self._save_all(changes)

    async def _attempt(self, entry: OutboxEntry) -> None:
        if entry.sequence == 0:
            # Accepted but never saved by an owner: its QUEUED change comes first, in the same write as the
            # SENDING one that starts this attempt.
            await self._publish(
                (await self._save_all([entry, schedule.start_attempt(entry, self._clock())]))[-1]
            )
            return
        if entry.state is SendState.SENDING:  # interrupted elsewhere (a dead replica, a failed save)
            detail = "the attempt was interrupted before its result was saved"
            await self._save(
                schedule.fail(entry, MessageErrorKind.INTERNAL, detail, self._clock(), self._policy)
            )
            return
        if entry.state is SendState.AWAITING_STORE:
            await self._check_store(entry)
            return
        await self._publish(await self._save(schedule.start_attempt(entry, self._clock())))

    async def _publish(self, started: OutboxEntry) -> None:
        attrs: dict[str, str | int] = {
            "mailmesh.request_id": started.request_id,
            "mailmesh.attempt": started.progress.attempts,
        }
        # One span per attempt: its Publish, ListPeers and NodeInfo client spans are the children.
        with _tracer.start_as_current_span("send attempt", attributes=attrs) as span:
            try:
                envelope = await self._sealer.seal(started, await self._publisher.pow_target())
            except Exception as err:  # PoW not reached, edge peers unreadable: this attempt failed
                detail = f"sealing failed: {err}"
                await self._save(
                    schedule.fail(started, MessageErrorKind.INTERNAL, detail, self._clock(), self._policy)
                )
                return
            outcome = await self._publisher.publish(
                envelope.raw, envelope.hash, ephemeral=bool(started.message.ephemeral)
            )
            span.set_attribute("mailmesh.relayed_to", outcome.relayed_to)
            await self._save(schedule.after_publish(started, outcome, self._clock(), self._policy))

    async def _check_store(self, entry: OutboxEntry) -> None:
        try:
            held = await self._checker.holds(entry)
        except Exception as err:  # any failure
            _log.warning("store check of %s failed: %s", entry.request_id, err)
            self._hold[entry.request_id] = self._clock() + _SAVE_RETRY_S
            return
        await self._save(schedule.after_store_check(entry, held, self._clock(), self._policy))

    # ------------------------------------------------------------------------------------------ saving

    @property
    def _outbox(self) -> OutboxStore:
        return self._store.outbox  # looked up per use: a Cassandra store has its parts only once open

    def _shard(self, request_id: str) -> int:
        return shard_of(request_id, self._ownership.shards)

    async def _flush_adds(
        self, entries: Sequence[OutboxEntry]
    ) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
        return await self._outbox.add_many(entries, now=self._clock())

    async def _flush_saves(self, items: Sequence[tuple[OutboxEntry, Lease]]) -> list[OutboxEntry | LeaseLost]:
        # One flush at a time (GroupCommit), and save_many numbers one shard's changes in order: a shard's
        # change numbers never collide (docs/messaging-store.md "Outbox": one save per shard at a time).
        return await self._outbox.save_many(items, now=self._clock())

    async def _save(self, entry: OutboxEntry) -> OutboxEntry:
        return (await self._save_all([entry]))[-1]

    async def _save_all(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        """Save changes of one request, in order and in one write, under the request's lock."""
        rid = entries[0].request_id
        async with self._locks.setdefault(rid, asyncio.Lock()):
            if rid in self._canceled:
                raise _Discarded(rid)
            return await self._save_locked(entries)

    async def _save_locked(self, entries: list[OutboxEntry]) -> list[OutboxEntry]:
        rid = entries[0].request_id
        shard = self._shard(rid)
        lease = self._ownership.lease(shard)
        if lease is None:
            self._entries.pop(rid, None)
            raise _Discarded(rid)
        outcomes = await self._saves.submit_all([(entry, lease) for entry in entries])
        saved: list[OutboxEntry] = []
        for outcome in outcomes:
            if isinstance(outcome, LeaseLost):
                self._purge(shard)
                raise outcome
            if isinstance(outcome, MsgStoreError):
                self._hold[rid] = self._clock() + _SAVE_RETRY_S
                raise outcome
            if isinstance(outcome, BaseException):
                raise outcome
            self._saved(outcome)
            saved.append(outcome)
        return saved

    def _saved(self, saved: OutboxEntry) -> None:
        rid = saved.request_id
        before = self._entries.get(rid)
        self._hold.pop(rid, None)
        if saved.state.is_final:
            self._entries.pop(rid, None)
            self._locks.pop(rid, None)
            self._finished[rid] = self._clock()
        else:
            self._entries[rid] = saved
        self._observer.changed(before, saved)
        self._changed.set()
        self._changed = asyncio.Event()


class _Discarded(Exception):
    """An attempt's result is not saved: the request was canceled meanwhile or its shard was lost."""


async def _guarded(request_id: str, work: Coroutine[Any, Any, None]) -> None:
    """Run one request's work; what it could not save is retried by a later pass, never lost."""
    try:
        await work
    except _Discarded:
        pass
    except LeaseLost as err:
        _log.info("send request %s: shard lease lost: %s", request_id, err)
    except MsgStoreError as err:
        _log.warning("send request %s: store write failed (retried): %s", request_id, err)
    except Exception:  # a bug: logged with its traceback, the request is tried again by a later pass
        _log.exception("send request %s: unexpected error", request_id)
