"""The one writer of records, subscriptions and events, and every replica's view of them.

Replicas share the store (docs/messaging-store.md §3): whichever holds the ``records/writer`` lease writes,
the others serve reads. :class:`Recorder` runs two loops: the lease loop acquires or renews the lease every
third of its TTL (a dead writer is replaced within one TTL), and, while this replica is not the writer, the
tail loop reads new events from the store's event log into the replica's :class:`~.hub.EventHub` so its live
streams see every event whatever replica wrote it. The writer publishes each commit's events to its hub as
soon as the store acknowledged the commit (MESSAGING-API "Message Storage": events "MUST be invoked after the
message is added or updated in the underlying storage").

Every write is a read-modify-write of one record under one lock: the rules (:mod:`.rules`) see the stored
state, so a repeated input (a feed replayed after a reconnect) changes nothing and emits nothing. A change
that emits no Messaging API event (another subscription id, new send progress) is logged as a revision
entry (``EventType.UNSPECIFIED``, msgstore docs "Sequences and revisions"), so PollRecords sees it.

Inputs' resume positions (edge feeds, send changes, served history) go into the commit of the data they
produced (msgstore "Input positions"): a new writer resumes each input exactly after what was committed.
An input batch that changed nothing still moves its position; such positions are written at most every
:data:`POSITION_FLUSH_S` (or with the next commit, or at stop) — replaying that much again after a crash
changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from meshcore import Unavailable
from msgstore.errors import LeaseLost, MsgStoreError
from msgstore.protocol import Committed, MsgStore, RecordWriter
from msgstore.types import (
    Event,
    EventDraft,
    EventType,
    HealthChange,
    HealthStatus,
    Lease,
    Record,
    Subscription,
)
from services.subscription.hub import EventHub
from services.subscription.mapping import TopicIndex
from services.subscription.rules import Change

__all__ = ["LEASE_NAME", "POSITION_FLUSH_S", "NotWriter", "Recorder", "Rule"]

LEASE_NAME = "records/writer"
#: At most this often a position that covers no change is written on its own (seconds).
POSITION_FLUSH_S = 1.0
_log = logging.getLogger(__name__)
_TAIL_PAGE = 500

#: A record rule (:mod:`.rules`): the stored record (None = none yet) → the change to commit, or None.
Rule = Callable[[Record | None], Change | None]


class NotWriter(Unavailable):
    """This replica does not hold the writer lease; another replica writes (retry there)."""

    def __init__(self) -> None:
        super().__init__(
            "this subscription replica is not the records writer; retry (another replica writes)"
        )


class Recorder:
    """Holds (or waits for) the writer lease, applies changes, feeds the hub, tracks active subscriptions."""

    def __init__(
        self,
        store: MsgStore,
        hub: EventHub,
        *,
        replica_id: str,
        lease_ttl: float,
        tail_interval: float,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.hub = hub
        self.index = TopicIndex()
        """The active subscriptions (authoritative on the writer)."""
        self._replica = replica_id
        self._ttl = lease_ttl
        self._tail_interval = tail_interval
        self._clock = clock
        self._lock = asyncio.Lock()
        self._writer: RecordWriter | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._topics_changed = asyncio.Event()
        self._positions: dict[str, bytes] = {}  # applied, not yet written
        self._positions_at = -math.inf
        self.on_role: list[Callable[[bool], None]] = []
        """Called with True when this replica becomes the writer, False when it stops being it."""
        self.on_commit: list[Callable[[Change, Record], None]] = []
        """Called after each committed record change (metrics, the stored check's candidates)."""
        self.on_events: list[Callable[[Sequence[Event]], None]] = []
        """Called with the events of each commit or append this replica wrote (metrics)."""
        self.on_subscriptions: list[Callable[[], None]] = []
        """Called when the active subscriptions change (metrics)."""

    # ------------------------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start at the store's head (live consumers see events from now on) and run the loops."""
        self.hub.advance(await self.store.records.head())
        self._tasks = [asyncio.create_task(self._lease_loop()), asyncio.create_task(self._tail_loop())]

    async def stop(self) -> None:
        """Stop the loops and give the lease up so another replica takes over at once."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        async with self._lock:
            if self._writer is not None and self._positions:
                with contextlib.suppress(MsgStoreError):  # a replica stopping keeps what it applied
                    await self._writer.commit([], [], now=self._clock(), positions=self._positions)
            writer, self._writer = self._writer, None
        if writer is not None:
            self._notify_role(False)
            with contextlib.suppress(MsgStoreError):
                await self.store.leases.release(writer.lease)

    @property
    def is_writer(self) -> bool:
        """Whether this replica writes."""
        return self._writer is not None

    def topics_changed(self) -> asyncio.Event:
        """An event set at the next change of the active subscriptions' topics (take it before reading)."""
        return self._topics_changed

    def now(self) -> float:
        """The service clock (UNIX seconds)."""
        return self._clock()

    async def _lease_loop(self) -> None:
        while True:
            try:
                await self._keep_lease()
            except MsgStoreError as err:
                _log.info("writer lease: store unavailable (%s); retrying", err)
            await asyncio.sleep(self._ttl / 3)

    async def _keep_lease(self) -> None:
        writer = self._writer
        if writer is None:
            lease = await self.store.leases.acquire(LEASE_NAME, self._replica, self._ttl, now=self._clock())
            if lease is not None:
                await self._become_writer(lease)
            return
        renewed = await self.store.leases.renew(writer.lease, now=self._clock())
        if renewed is None:
            await self._lose("lease taken over")
        else:
            writer.update_lease(renewed)

    async def _become_writer(self, lease: Lease) -> None:
        async with self._lock:
            await self._catch_up()  # every event the previous writer committed reaches our consumers first
            self._writer = await self.store.records.writer(lease, now=self._clock())
            active = await self.store.records.list_subscriptions(active_only=True)
            self.index = TopicIndex(active)
            self._positions.clear()
        _log.info("records writer: this replica (epoch %d)", lease.epoch)
        self._signal_topics()
        self._notify_role(True)

    async def _lose(self, why: str) -> None:
        if self._writer is None:
            return
        self._writer = None
        _log.info("records writer: no longer this replica (%s)", why)
        self._notify_role(False)

    def _notify_role(self, writer: bool) -> None:
        for callback in self.on_role:
            callback(writer)

    async def _tail_loop(self) -> None:
        while True:
            await asyncio.sleep(self._tail_interval)
            if self._writer is None:
                try:
                    await self._catch_up()
                except MsgStoreError as err:
                    _log.info("event tail: store unavailable (%s)", err)

    async def _catch_up(self) -> None:
        while True:
            page = await self.store.records.events_after(
                self.hub.last_sequence, _TAIL_PAGE, now=self._clock()
            )
            if not isinstance(page, list):  # a gap: live consumers cannot be given what is gone
                self.hub.advance(page.oldest - 1)
                continue
            self.hub.publish(page)
            if len(page) < _TAIL_PAGE:
                return

    # ------------------------------------------------------------------------------------------ writes

    def _require_writer(self) -> RecordWriter:
        if self._writer is None:
            raise NotWriter()
        return self._writer

    async def position(self, name: str) -> bytes | None:
        """The resume position of input ``name`` as committed (a new writer starts there)."""
        return await self.store.records.position(name)

    async def save_position(self, name: str, value: bytes) -> None:
        """Write input ``name``'s position now, with whatever positions are pending."""
        await self.update_many([], position=(name, value), flush=True)

    async def update(
        self,
        message_hash: bytes,
        rule: Callable[[Record | None], Change | None],
        *,
        position: tuple[str, bytes] | None = None,
    ) -> Record | None:
        """Apply ``rule`` to the stored record with ``message_hash`` and commit what it returns."""
        (record,) = await self.update_many([(message_hash, rule)], position=position)
        return record

    async def update_many(
        self,
        items: Sequence[tuple[bytes, Rule]],
        *,
        position: tuple[str, bytes] | None = None,
        flush: bool = False,
    ) -> list[Record | None]:
        """Apply each rule in order to its record (as left by the rules before it) and commit all changes at
        once: one transaction (SQLite) or as few logged batches as fit (Cassandra) for a whole feed batch.

        ``position``: (input name, where that input resumes after these items), committed with them.
        Returns each item's record after its rule (the stored one when the rule changed nothing).
        """
        async with self._lock:
            writer = self._require_writer()
            current: dict[bytes, Record | None] = {}
            changed: dict[bytes, Change] = {}
            drafts: list[EventDraft] = []
            after: list[bytes] = []
            for message_hash, rule in items:
                if message_hash not in current:
                    current[message_hash] = await self.store.records.get(message_hash)
                change = rule(current[message_hash])
                after.append(message_hash)
                if change is None:
                    continue
                current[message_hash] = change.record
                previous = changed.get(message_hash)
                events = (previous.events if previous else ()) + change.events
                changed[message_hash] = Change(change.record, events)
                drafts.extend(EventDraft(t, message_hash=message_hash) for t in change.events)
            # a change without Messaging API event gets a revision entry, so PollRecords still sees it
            drafts += [EventDraft(EventType.UNSPECIFIED, h) for h, c in changed.items() if not c.events]
            now = self._clock()
            if not changed:
                if position is not None:  # it covers nothing: it may wait for the next commit
                    self._positions[position[0]] = position[1]
                if self._positions and (flush or now - self._positions_at >= POSITION_FLUSH_S):
                    await self._commit(writer, [], [], now)
                return [current[h] for h in after]
            records = [c.record for c in changed.values()]
            committed = await self._commit(writer, records, drafts, now, position)
            self.hub.publish(committed.events)
        stored = {r.message_hash: r for r in committed.records}
        for report in self.on_events:
            report(committed.events)
        for message_hash, change in changed.items():
            for callback in self.on_commit:
                callback(change, stored[message_hash])
        return [stored.get(h, current[h]) for h in after]

    async def _commit(
        self,
        writer: RecordWriter,
        records: list[Record],
        drafts: list[EventDraft],
        now: float,
        position: tuple[str, bytes] | None = None,
    ) -> Committed:
        """Commit with ``position`` and the pending positions (under the lock); they are cleared once
        durable (``position`` is never left pending: it covers this commit's data)."""
        positions = dict(self._positions)
        if position is not None:
            positions[position[0]] = position[1]
        try:
            committed = await writer.commit(records, drafts, now=now, positions=positions)
        except LeaseLost as err:
            await self._lose("lease lost while committing")
            raise NotWriter() from err
        for name in positions:  # the lock is held: nothing newer was queued meanwhile
            self._positions.pop(name, None)
        self._positions_at = now
        return committed

    async def health_change(self, status: HealthStatus, previous: HealthStatus) -> Event:
        """Append ``health:change`` (no record) and publish it."""
        async with self._lock:
            writer = self._require_writer()
            health = HealthChange(status, previous)
            now = self._clock()
            try:
                (sequence,) = await writer.append(
                    [EventDraft(EventType.HEALTH_CHANGE, health=health)], now=now
                )
            except LeaseLost as err:
                await self._lose("lease lost while appending")
                raise NotWriter() from err
            event = Event(sequence, EventType.HEALTH_CHANGE, now, health=health)
            self.hub.publish([event])
        for report in self.on_events:
            report([event])
        return event

    async def save_subscription(self, subscription: Subscription) -> None:
        """Create, update or end a subscription; the topic index follows at once."""
        async with self._lock:
            writer = self._require_writer()
            try:
                await writer.save_subscription(subscription, now=self._clock())
            except LeaseLost as err:
                await self._lose("lease lost while saving a subscription")
                raise NotWriter() from err
            if subscription.active:
                self.index.add(subscription)
            else:
                self.index.remove(subscription.subscription_id)
        self._signal_topics()

    async def end_subscription(self, subscription_id: str) -> bool:
        """End an active subscription; False when it is unknown or not active."""
        self._require_writer()
        current = self.index.get(subscription_id)
        if current is None:
            return False
        await self.save_subscription(replace(current, active=False, ended_at=self._clock()))
        return True

    def _signal_topics(self) -> None:
        changed, self._topics_changed = self._topics_changed, asyncio.Event()
        changed.set()
        for callback in self.on_subscriptions:
            callback()
