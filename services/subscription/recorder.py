"""The one writer of records, subscriptions and events, and every replica's view of them.

Replicas share the store (docs/messaging-store.md §3): whichever holds the ``records/writer`` lease writes,
the others serve reads. :class:`Recorder` runs two loops: the lease loop acquires or renews the lease every
third of its TTL (a dead writer is replaced within one TTL), and, while this replica is not the writer, the
tail loop reads new events from the store's event log into the replica's :class:`~.hub.EventHub` so its live
streams see every event whatever replica wrote it. The writer publishes each commit's events to its hub as
soon as the store acknowledged the commit (MESSAGING-API "Message Storage": events "MUST be invoked after the
message is added or updated in the underlying storage").

Every write is a read-modify-write of one record under one lock: the rules (:mod:`.rules`) see the stored
state, so a repeated input (a feed replayed after a reconnect) changes nothing and emits nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from meshcore import Unavailable
from msgstore.errors import LeaseLost, MsgStoreError
from msgstore.protocol import MsgStore, RecordWriter
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

__all__ = ["LEASE_NAME", "NotWriter", "Recorder", "Rule"]

LEASE_NAME = "records/writer"
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

    async def update(
        self, message_hash: bytes, rule: Callable[[Record | None], Change | None]
    ) -> Record | None:
        """Apply ``rule`` to the stored record with ``message_hash`` and commit what it returns."""
        (record,) = await self.update_many([(message_hash, rule)])
        return record

    async def update_many(self, items: Sequence[tuple[bytes, Rule]]) -> list[Record | None]:
        """Apply each rule in order to its record (as left by the rules before it) and commit all changes at
        once: one transaction (SQLite) or as few logged batches as fit (Cassandra) for a whole feed batch.

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
            if not changed:
                return [current[h] for h in after]
            try:
                committed = await writer.commit(
                    [c.record for c in changed.values()], drafts, now=self._clock()
                )
            except LeaseLost as err:
                await self._lose("lease lost while committing")
                raise NotWriter() from err
            self.hub.publish(committed.events)
        stored = {r.message_hash: r for r in committed.records}
        for report in self.on_events:
            report(committed.events)
        for message_hash, change in changed.items():
            for callback in self.on_commit:
                callback(change, stored[message_hash])
        return [stored.get(h, current[h]) for h in after]

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
