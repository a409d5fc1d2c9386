"""The service's moving parts assembled: store, hub, recorder, inputs and the writer-only followers.

:class:`SubscriptionApp` opens the store and starts the recorder (a meshcore start hook), and while this
replica is the records writer runs the followers: one per edge peer, one per history-query instance
(served envelopes; the instances behind a ``dns:`` name are followed as they come and go), health, send
(when configured) and the stored check (when ``storeConfirmation`` is on). On becoming the writer it also
makes sure the reserved background subscription of ``confirmContentTopics`` exists (MESSAGING-API
"Acknowledgements"), and ends it when the configuration no longer asks for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from msgapi.config import RESERVED_SUBSCRIPTION_ID, MessagingConfig
from msgstore.errors import MsgStoreError
from msgstore.protocol import MsgStore
from msgstore.types import Subscription
from services.subscription.followers import (
    EdgeFollower,
    HealthFollower,
    SendFollower,
    StoredChecker,
)
from services.subscription.hub import EventHub
from services.subscription.inputs import RecordInputs
from services.subscription.ports import (
    EdgeFeedPort,
    HealthFeedPort,
    LookupPort,
    SendFeedPort,
    ServedFeedPort,
)
from services.subscription.recorder import NotWriter, Recorder
from services.subscription.served import ServedDiscovery, ServedFollowers
from wakucodec.contenttopic import content_topic_to_v1_topic

__all__ = ["Feeds", "SubscriptionApp"]

_log = logging.getLogger(__name__)


class Feeds:
    """The other services the followers read (ports; gRPC clients in production, fakes in tests)."""

    def __init__(
        self,
        edges: Sequence[EdgeFeedPort],
        health: HealthFeedPort,
        lookup: LookupPort,
        send: SendFeedPort | None = None,
        served: Sequence[ServedFeedPort] | ServedDiscovery = (),
    ) -> None:
        self.edges = list(edges)
        self.health = health
        self.lookup = lookup
        self.send = send
        self.served = served if isinstance(served, ServedDiscovery) else ServedDiscovery.fixed(served)
        """The history-query instances whose served envelopes are followed (fixed feeds, or resolved)."""


class SubscriptionApp:
    """Everything but the gRPC server."""

    def __init__(
        self,
        store: MsgStore,
        feeds: Feeds,
        messaging: MessagingConfig,
        *,
        replica_id: str,
        lease_ttl: float,
        tail_interval: float,
        consumer_buffer: int,
        clock: Callable[[], float],
        maintain_interval: float = 300.0,
    ) -> None:
        self.store = store
        self.messaging = messaging
        self.hub = EventHub(capacity=consumer_buffer)
        self.recorder = Recorder(
            store,
            self.hub,
            replica_id=replica_id,
            lease_ttl=lease_ttl,
            tail_interval=tail_interval,
            clock=clock,
        )
        self.inputs = RecordInputs(self.recorder)
        self.on_resume_miss: list[Callable[[str, str], None]] = []
        """Told (feed kind, target) when a feed could not resume after the committed position."""
        self.health = HealthFollower(feeds.health, self.recorder)
        self.edges = [
            EdgeFollower(feed, self.recorder, self.inputs, missed=self._missed) for feed in feeds.edges
        ]
        self.served = ServedFollowers(feeds.served, self.inputs, missed=self._missed)
        self.send = SendFollower(feeds.send, self.inputs) if feeds.send is not None else None
        self.stored = StoredChecker(
            self.inputs, feeds.lookup, self.health, interval=messaging.store_check_interval_s
        )
        self._maintain_interval = maintain_interval
        self._tasks: list[asyncio.Task[None]] = []
        self.started = False
        self.recorder.on_role.append(self._role)

    async def start(self) -> None:
        """Open the store and start the recorder (it takes the writer lease when free)."""
        await self.store.open()
        await self.recorder.start()
        self.started = True

    async def stop(self) -> None:
        """End the live consumers, stop the followers and the recorder (releasing the lease)."""
        self.hub.close()
        await self.recorder.stop()
        await self._stop_followers()

    async def close(self) -> None:
        """Close the store (after the last handler finished)."""
        self.started = False
        await self.store.close()

    def _role(self, writer: bool) -> None:
        if writer:
            self._tasks = [asyncio.create_task(c) for c in self._writer_loops()]
        else:
            for task in self._tasks:
                task.cancel()

    def _writer_loops(self) -> list[Coroutine[Any, Any, None]]:
        loops = [self._ensure_background(), self.health.run(), self._maintain()]
        loops += [edge.run() for edge in self.edges]
        loops.append(self.served.run())
        if self.send is not None:
            loops.append(self.send.run())
        if self.messaging.store_confirmation:
            loops.append(self.stored.run())
        return loops

    def _missed(self, kind: str, target: str) -> None:
        for report in self.on_resume_miss:
            report(kind, target)

    async def _stop_followers(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _maintain(self) -> None:
        """Purge rows past their retention (SQLite keeps them until asked; msgstore ``maintain``)."""
        while True:
            await asyncio.sleep(self._maintain_interval)
            try:
                removed = await self.store.maintain(now=self.recorder.now())
            except MsgStoreError as err:
                _log.info("store maintenance: %s; next round in %.0f s", err, self._maintain_interval)
                continue
            if removed:
                _log.info("store maintenance removed %d aged rows", removed)

    async def _ensure_background(self) -> None:
        """Create (or end) the reserved background subscription as the configuration says."""
        wanted = self.messaging.background_subscription
        current = self.recorder.index.get(RESERVED_SUBSCRIPTION_ID)
        topics = self.messaging.confirm_content_topics
        try:
            if wanted and (current is None or current.content_topics != topics):
                await self.recorder.save_subscription(
                    Subscription(
                        subscription_id=RESERVED_SUBSCRIPTION_ID,
                        pubsub_topic=self.messaging.topics.default_topic,
                        content_topics=topics,
                        envelope_topics=tuple(content_topic_to_v1_topic(t) for t in topics),
                        created_at=current.created_at if current else self.recorder.now(),
                        background=True,
                        store_confirmation=self.messaging.store_confirmation,
                    )
                )
            elif not wanted and current is not None:
                await self.recorder.end_subscription(RESERVED_SUBSCRIPTION_ID)
        except (NotWriter, MsgStoreError) as err:
            _log.info("background subscription not saved (%s); the next writer will", err)
