"""The loops that follow other services while this replica is the records writer.

- :class:`EdgeFollower`, one per edge peer: ``StreamEnvelopes`` filtered by the union of the active
  subscriptions' 4-byte topics; reopened (resuming after its last sequence of the same epoch) when the set
  changes or the stream breaks, so nothing the edge peer's relay cache still holds is missed. With no active
  subscription it streams nothing (an empty filter would mean every envelope).
- :class:`HealthFollower`: ``WatchHealth``; ``health:change`` for every status change it sees, and the
  current status for the stored check, which MESSAGING-API "Acknowledgements" halts while Unhealthy.
- :class:`SendFollower`: ``WatchSendStatuses`` merged into the records. It resumes by position after its
  last change within the process; at start it replays every retained change — the merge is idempotent,
  so a replay changes and emits nothing already recorded. A gap report (changes past their retention)
  makes it re-read the requests' current statuses with ``ListSendStatuses``.
- :class:`StoredChecker`: the recurring stored check every ``storeCheckInterval`` (spec: 60 s).

Each input is committed before the follower moves its resume point, and the commit is shielded from the
follower's cancellation: a reopened stream may deliver an envelope again, never lose one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from meshcore import InvalidArgument, MeshError
from msgstore.errors import MsgStoreError
from msgstore.types import HealthStatus
from services.subscription.inputs import RecordInputs
from services.subscription.ports import EdgeFeedPort, HealthFeedPort, LookupPort, SendFeedPort
from services.subscription.recorder import Recorder

__all__ = ["REPLAY_CACHE", "Backoff", "EdgeFollower", "HealthFollower", "SendFollower", "StoredChecker"]

#: A resume epoch no edge peer has: StreamEnvelopes then starts at the oldest envelope its relay cache holds
#: (edgepeer.proto StreamEnvelopesResponse.resumed).
REPLAY_CACHE = "replay-relay-cache"

_log = logging.getLogger(__name__)
_FAILURES = (MeshError, MsgStoreError)


class Backoff:
    """Delays between reconnects: ``first`` doubling up to ``cap``, reset after a success."""

    def __init__(
        self, first: float = 0.2, cap: float = 2.0, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ):
        self._first, self._cap, self._sleep = first, cap, sleep
        self._next = first

    async def wait(self) -> None:
        """Sleep the current delay and grow it."""
        delay, self._next = self._next, min(self._cap, self._next * 2)
        await self._sleep(delay)

    def reset(self) -> None:
        """Back to the first delay."""
        self._next = self._first


class EdgeFollower:
    """Follows one edge peer's feed for the active subscriptions' topics."""

    def __init__(
        self, feed: EdgeFeedPort, recorder: Recorder, inputs: RecordInputs, backoff: Backoff | None = None
    ):
        self._feed = feed
        self._recorder = recorder
        self._inputs = inputs
        self._backoff = backoff or Backoff()
        self.epoch = REPLAY_CACHE
        """The edge peer's epoch of the last envelope applied; at first none we could match, so the edge
        peer replays its whole relay cache (envelopes accepted while no writer followed it) and then goes
        live: the merge is idempotent and ``mapping.receptions`` skips subscriptions younger than an
        envelope."""
        self.after = 0
        """Sequence (in ``epoch``) of the last envelope applied."""
        self.streams = 0
        """Streams opened (tests, logs)."""

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            changed = self._recorder.topics_changed()
            topics = sorted(self._recorder.index.topics)
            if not topics:
                await changed.wait()
                continue
            consume = asyncio.create_task(self._consume(topics))
            waiter = asyncio.create_task(changed.wait())
            try:
                await asyncio.wait({consume, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                switched = not consume.done()  # the topics changed: reopen at once with the new set
                if switched:
                    consume.cancel()
                await asyncio.wait({consume})  # never raises the task's own error; read below
            if not switched:
                error = consume.exception()
                _log.info("edge feed %s: %s; reconnecting", self._feed.target, error or "stream ended")
                await self._backoff.wait()

    async def _consume(self, topics: list[bytes]) -> None:
        self.streams += 1
        async for batch in self._feed.stream(topics, self.epoch, self.after):
            if (
                batch.epoch != self.epoch
            ):  # a new edge-peer process (or our first stream): sequences start over
                self.epoch, self.after = batch.epoch, 0
            self._backoff.reset()
            if batch.envelopes:
                await asyncio.shield(self._inputs.receive_many(batch.envelopes))
                self.after = batch.envelopes[-1].sequence


class HealthFollower:
    """Follows the node health: ``health:change`` events and the stored check's halt."""

    def __init__(self, feed: HealthFeedPort, recorder: Recorder, backoff: Backoff | None = None):
        self._feed = feed
        self._recorder = recorder
        self._backoff = backoff or Backoff()
        self.status: HealthStatus | None = None
        """The latest status seen (None before the first report)."""

    @property
    def unhealthy(self) -> bool:
        """Whether the node is known to be Unhealthy."""
        return self.status is HealthStatus.UNHEALTHY

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            try:
                async for status in self._feed.watch():
                    self._backoff.reset()
                    previous, self.status = self.status, status
                    # The first report after start is the current state, not a transition we saw happen.
                    if previous is not None and previous != status:
                        await asyncio.shield(self._recorder.health_change(status, previous))
            except _FAILURES as err:
                _log.info("health watch: %s; reconnecting", err)
            await self._backoff.wait()


class SendFollower:
    """Follows the send service's status changes by resume position.

    msgstore has no table for a consumer's position, so the position lives in memory: a restarted process
    replays every retained change (the merge is idempotent); a reconnect within the process resumes
    exactly after the last change applied.
    """

    def __init__(self, feed: SendFeedPort, inputs: RecordInputs, backoff: Backoff | None = None):
        self._feed = feed
        self._inputs = inputs
        self._backoff = backoff or Backoff()
        self.position = b""
        """Resume position after the last change applied (empty = replay everything retained)."""
        self.reloads = 0
        """Gap repairs run (tests, logs)."""

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            try:
                async for item in self._feed.watch(self.position):
                    self._backoff.reset()
                    if item.gap_shards:
                        await asyncio.shield(self._reload(item.gap_shards))
                    if item.update is not None:
                        await asyncio.shield(self._inputs.send_update(item.update))
                    self.position = item.position
            except InvalidArgument as err:  # a position made for another shard count: start over
                _log.info("send watch: %s; replaying every retained change", err)
                self.position = b""
            except _FAILURES as err:
                _log.info("send watch: %s; reconnecting", err)
            await self._backoff.wait()

    async def _reload(self, shards: tuple[int, ...]) -> None:
        """Changes of ``shards`` were missed (send.proto ``gap_shards``): merge the current status of every
        request the outbox holds, so no record stays at a status it has left. The listing has no shard
        filter; a gap needs a follower away for longer than the change retention, so it is rare."""
        self.reloads += 1
        _log.info("send watch: changes of shards %s are gone; re-reading every request's status", shards)
        async for update in self._feed.statuses():
            await self._inputs.send_update(update)


class StoredChecker:
    """The recurring stored check, halted while the node is Unhealthy."""

    def __init__(self, inputs: RecordInputs, lookup: LookupPort, health: HealthFollower, *, interval: float):
        self._inputs = inputs
        self._lookup = lookup
        self._health = health
        self._interval = interval
        self.checks = 0
        """Checks run (halted rounds not counted)."""

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            await asyncio.sleep(self._interval)
            await self.tick()

    async def tick(self) -> None:
        """One round: skipped while Unhealthy (MESSAGING-API "Acknowledgements": halted, then resumed)."""
        if self._health.unhealthy:
            return
        self.checks += 1
        try:
            await self._inputs.check_stored(self._lookup)
        except _FAILURES as err:
            _log.info("stored check: %s; next round in %.1f s", err, self._interval)
