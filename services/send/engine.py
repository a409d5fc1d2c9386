"""The outbox worker: owns shards, serves due requests in the spec's order, runs attempts, saves changes.

One :class:`SendEngine` per replica. Every state change of a request is one saved change under the shard's
lease (the change log WatchSendStatuses follows), made by the state machine in
:mod:`services.send.schedule`; the engine only decides *when*. The owned requests and the writes live in
:class:`~services.send.owned.OwnedRequests`. Requests a replica accepted for a shard it does not own are
picked up by the owner's periodic read of its open requests. Attempts and store checks join the trace of
the Send (or Resend) call that queued the request, whichever replica took it and whenever they run: the
call's ``traceparent`` is stored with the request (``OutboxEntry.traceparent``; docs/operations.md
"Traces").

Shards move between replicas (:mod:`services.send.ownership`, fair shares): a shard this replica must
hand over gets no new attempt, and its lease is released once none of its attempts or saves is in flight,
so the next owner never finds one of them half done. A request whose attempt was interrupted anyway (the
replica died, or its result could not be saved) is found in SENDING by its next owner and counts as a
failed attempt: it is retried on schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from opentelemetry import trace

from meshcore.tracing import parse_traceparent, start_span, traceparent
from msgstore.errors import LeaseLost, MsgStoreError, RequestIdConflict
from msgstore.protocol import MsgStore
from msgstore.types import HealthStatus, MessageErrorKind, OutboxEntry, SendState
from services.send import schedule
from services.send.errors import NotOwner, RequestIdTaken
from services.send.owned import SAVE_RETRY_S, Discarded, OwnedRequests
from services.send.ownership import ShardOwnership
from services.send.ports import EngineObserver, EngineSettings, Publisher, StoreChecker
from services.send.sealing import Sealer
from services.send.validation import without_timestamp

__all__ = ["SendEngine"]

_log = logging.getLogger(__name__)
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
        self._ownership = ownership
        self._publisher = publisher
        self._checker = checker
        self._sealer = sealer
        self._settings = settings
        self._policy = settings.policy
        self._observer = observer
        self._clock = clock
        self._owned = OwnedRequests(store, ownership, observer, clock)
        self._busy: set[str] = set()
        self._draining: set[int] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._wake = asyncio.Event()
        self._paused = False
        self._paused_since: float | None = None

    @property
    def ownership(self) -> ShardOwnership:
        """The shard leases and membership of this replica."""
        return self._ownership

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the lease and scheduling loops (call from the event loop)."""
        self._loops = [asyncio.create_task(self._lease_loop()), asyncio.create_task(self._schedule_loop())]

    async def first_tick(self) -> None:
        """Join the group, take a fair share of the free shards and load their open requests (start-up)."""
        await self._tick()

    async def stop(self) -> None:
        """Stop the loops, let running attempts finish their saves, leave the group, release the shards."""
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
        await self._owned.wait_change(timeout)

    # ------------------------------------------------------------------------------------------ requests

    async def accept(
        self, entry: OutboxEntry, *, given_id: bool, given_timestamp: bool
    ) -> tuple[OutboxEntry, bool]:
        """Persist a new request (durable before this returns) and schedule it if this replica owns it.

        A caller-supplied id may repeat an earlier Send whose timestamp was filled in with "now": that
        repeat is recognised here, before ``add`` (which compares timestamps). A generated id is new.
        """
        owned = self._owned
        entry = _traced(entry)
        existing = await owned.outbox.get(entry.request_id, now=self._clock()) if given_id else None
        if existing is not None:
            probe = entry if given_timestamp else without_timestamp(entry)
            if not existing.repeats(probe):
                raise RequestIdTaken(entry.request_id)
            return existing, False
        try:
            stored, created = await owned.add(entry)
        except RequestIdConflict as err:
            raise RequestIdTaken(entry.request_id) from err
        if created and self._ownership.lease(owned.shard(stored.request_id)) is not None:
            owned.entries.setdefault(stored.request_id, stored)
            self._wake.set()
        return stored, created

    async def cancel(self, request_id: str) -> tuple[bool, SendState]:
        """Cancel a pending request: (canceled by this call, state after). Unknown: (False, UNSPECIFIED).
        NotOwner when another replica owns the request's shard."""
        return await self._final_edit(request_id, lambda e, now: schedule.cancel(e, now), cancel=True)

    async def resend(self, request_id: str) -> tuple[bool, SendState]:
        """Re-queue a FAILED request as fresh: (rescheduled, state after). NotOwner as for cancel."""

        def edit(entry: OutboxEntry, now: float) -> OutboxEntry | None:
            resent = schedule.resend(entry, now, self._policy)
            return None if resent is None else _traced(resent, replace_old=True)

        return await self._final_edit(request_id, edit, cancel=False)

    async def _final_edit(
        self,
        request_id: str,
        edit: Callable[[OutboxEntry, float], OutboxEntry | None],
        *,
        cancel: bool,
    ) -> tuple[bool, SendState]:
        owned = self._owned
        shard = owned.shard(request_id)
        async with owned.lock(request_id):
            entry = owned.entries.get(request_id) or await owned.outbox.get(request_id, now=self._clock())
            if entry is None:
                return False, SendState.UNSPECIFIED
            changed = edit(entry, self._clock())
            if changed is None:
                return False, entry.state
            if self._ownership.lease(shard) is None:
                raise NotOwner(request_id, shard)
            try:
                [saved] = await owned.save_locked([changed])
            except Discarded as err:  # handed over or lost while we read it
                raise NotOwner(request_id, shard) from err
            if cancel and request_id in self._busy:
                owned.canceled.add(request_id)  # the attempt in flight discards its result
            if not cancel:
                owned.finished.pop(request_id, None)
                owned.entries[request_id] = saved
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
        """Membership and leases, hand-over of a surplus, then every held shard's open requests adopted."""
        owned = self._owned
        _gained, lost = await self._ownership.tick()  # gained shards are among the held ones read below
        for shard in lost:
            owned.purge(shard, "lost to another replica")
        await self._hand_over()
        for shard in self._ownership.held:
            lease = self._ownership.lease(shard)
            if lease is None or shard in self._draining:
                continue
            try:
                opened = await owned.outbox.open_requests(shard, lease, now=self._clock())
            except LeaseLost:
                owned.purge(shard, "lost to another replica")
                continue
            owned.adopt(opened, self._busy)
        self._observer.owned(len(self._ownership.held), len(owned.entries), self._paused)
        owned.forget_finished()
        self._wake.set()

    async def _hand_over(self) -> None:
        """Release the shards above this replica's fair share whose attempts and saves are all done; the
        others stay draining (no new attempt) until a later pass."""
        owned = self._owned
        surplus = self._ownership.surplus()
        self._draining = set(surplus)
        if not surplus:
            return
        busy = {owned.shard(rid) for rid in self._busy}
        for shard in surplus:
            if shard in busy or owned.writing(shard):
                continue
            # Dropped before the release is awaited: no save of the shard can start from here on.
            lease = owned.purge(shard, f"handed over (fair share {self._ownership.target})")
            self._draining.discard(shard)
            if lease is not None:
                await self._ownership.release(lease)

    async def _schedule_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = self._pass()
            except Exception:  # a bug must not end the loop: nothing would be sent again
                _log.exception("scheduling pass failed")
                wait = 1.0
            self._observer.owned(len(self._ownership.held), len(self._owned.entries), self._paused)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)
            # A pass scans every owned open request; under load every accepted Send and every saved result
            # wakes the loop, so wake-ups are coalesced: at most one pass per _PASS_INTERVAL_S.
            await asyncio.sleep(_PASS_INTERVAL_S)

    def _pass(self) -> float:
        """Launch what is due, in order; returns the seconds until the next entry falls due."""
        owned = self._owned
        now = self._clock()
        nxt = now + 3600.0
        due: list[OutboxEntry] = []
        draining = self._draining
        for rid, entry in owned.entries.items():
            if rid in self._busy or (draining and owned.shard(rid) in draining):
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
            at = max(at, owned.hold.get(rid, at))
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
            self._owned.canceled.discard(rid)
            self._wake.set()

        task.add_done_callback(done)

    # ------------------------------------------------------------------------------------------ attempts

    async def _transition(self, before: OutboxEntry, after: OutboxEntry) -> None:
        # The QUEUED change of a request accepted meanwhile comes first, in the same write.
        changes = [before] if before.sequence == 0 else []
        if after is not before:
            changes.append(after)
        if changes:
            await self._owned.save_all(changes)

    async def _attempt(self, entry: OutboxEntry) -> None:
        owned = self._owned
        if entry.sequence == 0:
            # Accepted but never saved by an owner: its QUEUED change comes first, in the same write as the
            # SENDING one that starts this attempt.
            saved = await owned.save_all([entry, schedule.start_attempt(entry, self._clock())])
            await self._publish(saved[-1])
            return
        if entry.state is SendState.SENDING:  # interrupted elsewhere (a dead replica, a failed save)
            detail = "the attempt was interrupted before its result was saved"
            await owned.save(
                schedule.fail(entry, MessageErrorKind.INTERNAL, detail, self._clock(), self._policy)
            )
            return
        if entry.state is SendState.AWAITING_STORE:
            check = start_span("send store check", parent=parse_traceparent(entry.traceparent))
            with trace.use_span(check, end_on_exit=True):  # its Lookup client spans are the children
                await self._check_store(entry)
            return
        await self._publish(await owned.save(schedule.start_attempt(entry, self._clock())))

    async def _publish(self, started: OutboxEntry) -> None:
        attrs: dict[str, str | int] = {
            "mailmesh.request_id": started.request_id,
            "mailmesh.attempt": started.progress.attempts,
        }
        # One span per attempt, in the Send's trace; its ListPeers and NodeInfo calls are children, and so is
        # the edge peer's span for its envelope (the envelope carries this span's traceparent through the
        # Publish call it shares with concurrent attempts; services.send.clients.EdgePeers).
        span = start_span("send attempt", attributes=attrs, parent=parse_traceparent(started.traceparent))
        with trace.use_span(span, end_on_exit=True):
            try:
                envelope = await self._sealer.seal(started, await self._publisher.pow_target())
            except Exception as err:  # PoW not reached, edge peers unreadable: this attempt failed
                detail = f"sealing failed: {err}"
                now = self._clock()
                await self._owned.save(
                    schedule.fail(started, MessageErrorKind.INTERNAL, detail, now, self._policy)
                )
                return
            outcome = await self._publisher.publish(
                envelope.raw, envelope.hash, ephemeral=bool(started.message.ephemeral)
            )
            span.set_attribute("mailmesh.relayed_to", outcome.relayed_to)
            await self._owned.save(schedule.after_publish(started, outcome, self._clock(), self._policy))

    async def _check_store(self, entry: OutboxEntry) -> None:
        try:
            held = await self._checker.holds(entry)
        except Exception as err:  # any failure
            _log.warning("store check of %s failed: %s", entry.request_id, err)
            self._owned.hold[entry.request_id] = self._clock() + SAVE_RETRY_S
            return
        await self._owned.save(schedule.after_store_check(entry, held, self._clock(), self._policy))


def _traced(entry: OutboxEntry, *, replace_old: bool = False) -> OutboxEntry:
    """``entry`` with the calling RPC's trace context (the Send or Resend span), kept unless ``replace_old``
    when it already has one; unchanged outside a traced call."""
    if entry.traceparent and not replace_old:
        return entry
    current = traceparent(trace.get_current_span().get_span_context())
    return replace(entry, traceparent=current) if current else entry


async def _guarded(request_id: str, work: Coroutine[Any, Any, None]) -> None:
    """Run one request's work; what it could not save is retried by a later pass, never lost."""
    try:
        await work
    except Discarded:
        pass
    except LeaseLost as err:
        _log.info("send request %s: shard lease lost: %s", request_id, err)
    except MsgStoreError as err:
        _log.warning("send request %s: store write failed (retried): %s", request_id, err)
    except Exception:  # a bug: logged with its traceback, the request is tried again by a later pass
        _log.exception("send request %s: unexpected error", request_id)
