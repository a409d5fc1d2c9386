"""The loops that follow other services while this replica is the records writer.

- :class:`EdgeFollower`, one per edge peer: ``StreamEnvelopes`` filtered by the union of the active
  subscriptions' 4-byte topics; reopened (resuming after its last envelope of the same epoch) when the set
  changes or the stream breaks, so nothing the edge peer's relay cache still holds is missed. With no active
  subscription it streams nothing (an empty filter would mean every envelope).
- :class:`ServedFollower`, one per history-query instance: ``WatchServed``; the records of envelopes a
  Query served become stored (MESSAGING-API "stored": "populated ... via the History API").
- :class:`HealthFollower`: ``WatchHealth``; ``health:change`` for every status change it sees, and the
  current status for the stored check, which MESSAGING-API "Acknowledgements" halts while Unhealthy.
- :class:`SendFollower`: ``WatchSendStatuses`` merged into the records, resumed by position; a gap report
  (changes past their retention) makes it re-read the requests' current statuses with ``ListSendStatuses``.
- :class:`StoredChecker`: the recurring stored check every ``storeCheckInterval`` (spec: 60 s).

Where each follower is in its input is committed with the records that input produced (msgstore "Input
positions") and read back when the follower starts — on this replica becoming the writer, after a restart
or a takeover — so a new writer continues exactly after its predecessor's last commit: nothing missed,
nothing applied twice. Only what the other process no longer holds is lost, and that is said out loud
(:class:`FeedCursor`: a WARNING and ``mailmesh_subscription_feed_resume_misses_total``). The commit is
shielded from the follower's cancellation: a reopened stream may deliver an input again, never lose one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from meshcore import InvalidArgument, MeshError
from msgstore.errors import MsgStoreError
from msgstore.types import HealthStatus
from services.subscription.inputs import RecordInputs
from services.subscription.ports import (
    EdgeFeedPort,
    HealthFeedPort,
    LookupPort,
    SendFeedPort,
    ServedFeedPort,
)
from services.subscription.positions import (
    NO_POSITION,
    REPLAY_EVERYTHING,
    SEND,
    FeedPosition,
    edge_name,
    history_name,
)
from services.subscription.recorder import Recorder

__all__ = [
    "REPLAY_CACHE",
    "Backoff",
    "EdgeFollower",
    "FeedCursor",
    "HealthFollower",
    "Missed",
    "SendFollower",
    "ServedFollower",
    "StoredChecker",
]

#: The resume epoch of a follower that holds no position: StreamEnvelopes then starts at the oldest
#: envelope the edge peer's relay cache holds (edgepeer.proto StreamEnvelopesResponse.resumed).
REPLAY_CACHE = REPLAY_EVERYTHING

#: Told (feed kind, target) when a feed could not resume after the committed position.
Missed = Callable[[str, str], None]

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


class FeedCursor:
    """Where a follower is in one per-process feed (an edge peer, a history-query instance), kept in the
    store, and the check that a reopened stream really continues after it."""

    def __init__(self, kind: str, name: str, target: str, inputs: RecordInputs, missed: Missed) -> None:
        self.kind = kind
        self.name = name
        """The position's name in the store."""
        self.target = target
        self._inputs = inputs
        self._missed = missed
        self.position = NO_POSITION
        """The last item applied: its feed epoch and sequence (NO_POSITION: none held)."""
        self.misses = 0
        """Streams that could not continue after a held position (tests, logs)."""

    async def load(self, backoff: Backoff) -> None:
        """Read the committed position (retrying while the store is unavailable)."""
        while True:
            try:
                self.position = FeedPosition.decode(await self._inputs.position(self.name))
                return
            except MsgStoreError as err:
                _log.info("%s feed %s: position not readable (%s); retrying", self.kind, self.target, err)
                await backoff.wait()

    async def opened(self, epoch: str, resumed: bool, *, with_items: bool) -> None:
        """The first message of a stream opened at :attr:`position` arrived."""
        asked = self.position
        if asked.held and not resumed:
            why = (
                f"it restarted (epoch {epoch})"
                if epoch != asked.epoch
                else f"it no longer holds sequence {asked.sequence + 1} and later"
            )
            _log.warning(
                "%s feed %s: cannot resume after sequence %d of epoch %s: %s; what it accepted in between "
                "and no longer holds is missed here (the archive has it)",
                self.kind,
                self.target,
                asked.sequence,
                asked.epoch,
                why,
            )
            self.misses += 1
            self._missed(self.kind, self.target)
        if epoch != asked.epoch:  # nothing applied in this epoch yet
            self.position = NO_POSITION
            if asked.held and not with_items:  # a restart before the first item need not warn again
                await asyncio.shield(self._inputs.save_position(self.name, NO_POSITION.encode()))

    def record(self, position: FeedPosition) -> tuple[str, bytes]:
        """The (name, value) to commit with the items up to ``position``."""
        return self.name, position.encode()


class EdgeFollower:
    """Follows one edge peer's feed for the active subscriptions' topics."""

    def __init__(
        self,
        feed: EdgeFeedPort,
        recorder: Recorder,
        inputs: RecordInputs,
        backoff: Backoff | None = None,
        missed: Missed | None = None,
    ):
        self._feed = feed
        self._recorder = recorder
        self._inputs = inputs
        self._backoff = backoff or Backoff()
        self.cursor = FeedCursor("edge", edge_name(feed.target), feed.target, inputs, missed or _ignore)
        """Where the follower is (committed with the records; loaded when it starts). With none held, the
        edge peer replays its whole relay cache — envelopes accepted while no writer followed it — and
        then goes live: the merge is idempotent and ``mapping.receptions`` skips subscriptions younger
        than an envelope."""
        self.streams = 0
        """Streams opened (tests, logs)."""
        self.stream_epoch = ""
        """The epoch the open stream's first message named ("" until it arrived): the feed is live."""

    @property
    def epoch(self) -> str:
        """The edge peer's epoch of the last envelope applied (REPLAY_CACHE: none yet)."""
        return self.cursor.position.epoch

    async def run(self) -> None:
        """Until cancelled."""
        await self.cursor.load(self._backoff)
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
        self.stream_epoch = ""
        asked = self.cursor.position
        first = True
        async for batch in self._feed.stream(topics, asked.epoch, asked.sequence):
            if first:
                first = False
                await self.cursor.opened(batch.epoch, batch.resumed, with_items=bool(batch.envelopes))
                self.stream_epoch = batch.epoch
            self._backoff.reset()
            if batch.envelopes:
                after = FeedPosition(batch.epoch, batch.envelopes[-1].sequence)
                applied = self._inputs.receive_many(batch.envelopes, position=self.cursor.record(after))
                await asyncio.shield(applied)
                self.cursor.position = after


class ServedFollower:
    """Follows one history-query instance's served envelopes: their records become stored."""

    def __init__(
        self,
        feed: ServedFeedPort,
        inputs: RecordInputs,
        backoff: Backoff | None = None,
        missed: Missed | None = None,
    ):
        self._feed = feed
        self._inputs = inputs
        self._backoff = backoff or Backoff()
        self.cursor = FeedCursor("history", history_name(feed.target), feed.target, inputs, missed or _ignore)

    async def run(self) -> None:
        """Until cancelled."""
        await self.cursor.load(self._backoff)
        while True:
            try:
                await self._consume()
            except _FAILURES as err:
                _log.info("served feed %s: %s; reconnecting", self._feed.target, err)
            await self._backoff.wait()

    async def _consume(self) -> None:
        asked = self.cursor.position
        first = True
        async for batch in self._feed.watch(asked.epoch, asked.sequence):
            if first:
                first = False
                await self.cursor.opened(batch.epoch, batch.resumed, with_items=bool(batch.chunks))
            self._backoff.reset()
            if batch.chunks:
                after = FeedPosition(batch.epoch, batch.chunks[-1][0])
                hashes = [h for _, chunk in batch.chunks for h in chunk]
                await asyncio.shield(self._inputs.served(hashes, position=self.cursor.record(after)))
                self.cursor.position = after


def _ignore(kind: str, target: str) -> None:
    """No one to tell about a missed resume (the WARNING is logged anyway)."""


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
    """Follows the send service's status changes by resume position (committed with each change)."""

    def __init__(self, feed: SendFeedPort, inputs: RecordInputs, backoff: Backoff | None = None):
        self._feed = feed
        self._inputs = inputs
        self._backoff = backoff or Backoff()
        self.position = b""
        """Resume position after the last change applied (empty = replay everything retained); loaded from
        the store when the follower starts."""
        self.reloads = 0
        """Gap repairs run (tests, logs)."""

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            try:
                self.position = await self._inputs.position(SEND) or b""
                break
            except MsgStoreError as err:
                _log.info("send watch: position not readable (%s); retrying", err)
                await self._backoff.wait()
        while True:
            try:
                async for item in self._feed.watch(self.position):
                    self._backoff.reset()
                    if item.gap_shards:
                        await asyncio.shield(self._reload(item.gap_shards))
                    if item.update is not None:
                        applied = self._inputs.send_update(item.update, position=(SEND, item.position))
                        await asyncio.shield(applied)
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
