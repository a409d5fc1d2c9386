"""The edge-feed follower: resumes after its last applied envelope, reopens on topic changes, backs off on
failures (a recorded fake clock: no real sleeping), starts over when the edge peer's epoch changes; starts
from the committed position, commits one with each batch, and reports a resume the feed cannot serve. The
served-history follower, and the stored form of positions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from typing import cast

import pytest

from meshcore import Unavailable
from msgstore.types import Subscription
from services.subscription.followers import REPLAY_CACHE, Backoff, EdgeFollower, ServedFollower
from services.subscription.inputs import RecordInputs
from services.subscription.mapping import TopicIndex
from services.subscription.ports import FeedBatch, FeedEnvelope, ServedBatch
from services.subscription.positions import NO_POSITION, FeedPosition
from services.subscription.recorder import Recorder

T1, T2 = b"\x01\x01\x01\x01", b"\x02\x02\x02\x02"


def sub(sid: str, topic: bytes) -> Subscription:
    return Subscription(sid, "/waku/2/rs/1/0", (f"/waku/1/0x{topic.hex()}/rfc26",), (topic,), 1.0)


class FakeRecorder:
    def __init__(self) -> None:
        self.index = TopicIndex()
        self._changed = asyncio.Event()

    def topics_changed(self) -> asyncio.Event:
        return self._changed

    def change(self, index: TopicIndex) -> None:
        self.index = index
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


class FakeInputs:
    """Applies envelopes and keeps the positions committed with them (``stored``: name → value)."""

    def __init__(self, stored: dict[str, bytes] | None = None) -> None:
        self.applied: list[int] = []
        self.stored = dict(stored or {})
        self.saved_alone: list[bytes] = []

    async def position(self, name: str) -> bytes | None:
        return self.stored.get(name)

    async def save_position(self, name: str, value: bytes) -> None:
        self.stored[name] = value
        self.saved_alone.append(value)

    async def receive_many(
        self, envelopes: Sequence[FeedEnvelope], *, position: tuple[str, bytes] | None = None
    ) -> list[object]:
        self.applied.extend(e.sequence for e in envelopes)
        if position is not None:
            self.stored[position[0]] = position[1]
        return []


class ScriptedFeed:
    """Each stream plays the next script: a list of batches, then an error or an endless wait."""

    target = "scripted"

    def __init__(self, scripts: list[tuple[list[FeedBatch], Exception | None]]) -> None:
        self.scripts = scripts
        self.requests: list[tuple[tuple[bytes, ...], str, int]] = []
        self.opened = asyncio.Event()

    async def stream(
        self, topics: Sequence[bytes], resume_epoch: str, after_sequence: int
    ) -> AsyncIterator[FeedBatch]:
        self.requests.append((tuple(topics), resume_epoch, after_sequence))
        self.opened.set()
        batches, error = self.scripts.pop(0) if self.scripts else ([], None)
        for batch in batches:
            yield batch
        if error is not None:
            raise error
        await asyncio.Event().wait()


def env(seq: int, topic: bytes = T1) -> FeedEnvelope:
    return FeedEnvelope(seq, seq.to_bytes(32, "big"), topic, b"", 1)


async def run_until(follower: EdgeFollower, condition: object, feed: ScriptedFeed, rounds: int = 200) -> None:
    task = asyncio.create_task(follower.run())
    try:
        for _ in range(rounds):
            if callable(condition) and condition():
                return
            await asyncio.sleep(0)
        raise AssertionError("condition never held")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def make(feed: ScriptedFeed, recorder: FakeRecorder, inputs: FakeInputs, delays: list[float]) -> EdgeFollower:
    async def fake_sleep(delay: float) -> None:
        delays.append(delay)

    return EdgeFollower(
        feed, cast(Recorder, recorder), cast(RecordInputs, inputs), Backoff(0.2, 1.0, sleep=fake_sleep)
    )


async def test_a_broken_stream_resumes_after_the_last_applied_envelope_with_growing_backoff() -> None:
    recorder, inputs, delays = FakeRecorder(), FakeInputs(), list[float]()
    recorder.change(TopicIndex([sub("s", T1)]))
    feed = ScriptedFeed(
        [
            ([FeedBatch("e1", False, [env(1), env(2)])], Unavailable("gone")),
            ([], Unavailable("still gone")),
            ([FeedBatch("e1", True, [env(3)])], None),
        ]
    )
    follower = make(feed, recorder, inputs, delays)
    await run_until(follower, lambda: inputs.applied == [1, 2, 3], feed)
    assert feed.requests == [((T1,), REPLAY_CACHE, 0), ((T1,), "e1", 2), ((T1,), "e1", 2)]
    assert delays == [0.2, 0.4]  # reset only by a batch that arrives


async def test_a_new_epoch_starts_the_sequence_over() -> None:
    recorder, inputs, delays = FakeRecorder(), FakeInputs(), list[float]()
    recorder.change(TopicIndex([sub("s", T1)]))
    feed = ScriptedFeed(
        [
            ([FeedBatch("e1", False, [env(7)])], Unavailable("restarted")),
            ([FeedBatch("e2", False, [env(1)])], Unavailable("again")),
        ]
    )
    follower = make(feed, recorder, inputs, delays)
    await run_until(follower, lambda: len(feed.requests) == 3, feed)
    assert feed.requests[1:] == [((T1,), "e1", 7), ((T1,), "e2", 1)]


async def test_no_subscription_no_stream_and_a_topic_change_reopens_with_the_union() -> None:
    recorder, inputs, delays = FakeRecorder(), FakeInputs(), list[float]()
    feed = ScriptedFeed([([FeedBatch("e1", False, [env(1)])], None), ([], None)])
    follower = make(feed, recorder, inputs, delays)
    task = asyncio.create_task(follower.run())
    try:
        for _ in range(20):
            await asyncio.sleep(0)
        assert feed.requests == []  # an empty filter would mean every envelope
        recorder.change(TopicIndex([sub("a", T1)]))
        await asyncio.wait_for(feed.opened.wait(), 5)
        for _ in range(50):
            if inputs.applied == [1]:
                break
            await asyncio.sleep(0)
        feed.opened.clear()
        recorder.change(TopicIndex([sub("a", T1), sub("b", T2)]))
        await asyncio.wait_for(feed.opened.wait(), 5)
        assert feed.requests == [((T1,), REPLAY_CACHE, 0), ((T1, T2), "e1", 1)]
        assert delays == []  # a topic change is not a failure
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# ---------------------------------------------------------------------------------------------- positions


def make_with(
    feed: ScriptedFeed, recorder: FakeRecorder, inputs: FakeInputs, missed: list[tuple[str, str]]
) -> EdgeFollower:
    async def fake_sleep(delay: float) -> None:
        pass

    return EdgeFollower(
        feed,
        cast(Recorder, recorder),
        cast(RecordInputs, inputs),
        Backoff(0.2, 1.0, sleep=fake_sleep),
        missed=lambda kind, target: missed.append((kind, target)),
    )


async def test_a_new_follower_resumes_after_the_committed_position_and_commits_each_batch() -> None:
    recorder, missed = FakeRecorder(), list[tuple[str, str]]()
    inputs = FakeInputs({"edge/scripted": FeedPosition("e1", 5).encode()})
    recorder.change(TopicIndex([sub("s", T1)]))
    feed = ScriptedFeed([([FeedBatch("e1", True, [env(6)]), FeedBatch("e1", False, [env(8)])], None)])
    follower = make_with(feed, recorder, inputs, missed)
    await run_until(follower, lambda: inputs.applied == [6, 8], feed)
    assert feed.requests == [((T1,), "e1", 5)]  # exactly after what the last writer committed
    assert FeedPosition.decode(inputs.stored["edge/scripted"]) == FeedPosition("e1", 8)
    assert missed == [] and follower.cursor.misses == 0


async def test_a_resume_the_edge_peer_cannot_serve_is_reported_not_silent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder, missed = FakeRecorder(), list[tuple[str, str]]()
    inputs = FakeInputs({"edge/scripted": FeedPosition("e1", 5).encode()})
    recorder.change(TopicIndex([sub("s", T1)]))
    feed = ScriptedFeed(
        [
            ([FeedBatch("e1", False, [env(9)])], Unavailable("cache evicted 6-8; then gone")),
            ([FeedBatch("e2", False, [])], None),  # and then the edge peer restarted: a new epoch
        ]
    )
    follower = make_with(feed, recorder, inputs, missed)
    with caplog.at_level(logging.WARNING, logger="services.subscription.followers"):
        await run_until(follower, lambda: len(missed) == 2 and inputs.saved_alone, feed)
    assert feed.requests == [((T1,), "e1", 5), ((T1,), "e1", 9)]
    assert missed == [("edge", "scripted")] * 2 and follower.cursor.misses == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "cannot resume after sequence 5 of epoch e1" in warnings[0] and "no longer holds" in warnings[0]
    assert "restarted (epoch e2)" in warnings[1]
    # nothing applied in e2 yet: "no position" is committed, so a restart replays the cache without a warning
    assert inputs.saved_alone == [NO_POSITION.encode()] and follower.epoch == REPLAY_CACHE


async def test_the_served_follower_marks_by_envelope_and_resumes_after_its_position() -> None:
    class Served:
        target = "h1"

        def __init__(self) -> None:
            self.requests: list[tuple[str, int]] = []

        async def watch(self, resume_epoch: str, after_sequence: int) -> AsyncIterator[ServedBatch]:
            self.requests.append((resume_epoch, after_sequence))
            yield ServedBatch("h-epoch", True, [])
            yield ServedBatch("h-epoch", False, [(4, [b"a" * 32, b"b" * 32]), (5, [b"c" * 32])])
            await asyncio.Event().wait()

    class ServedInputs(FakeInputs):
        def __init__(self) -> None:
            super().__init__({"history/h1": FeedPosition("h-epoch", 3).encode()})
            self.hashes: list[bytes] = []

        async def served(
            self, hashes: Sequence[bytes], *, position: tuple[str, bytes] | None = None
        ) -> list[object]:
            self.hashes += hashes
            if position is not None:
                self.stored[position[0]] = position[1]
            return []

    feed, inputs = Served(), ServedInputs()
    follower = ServedFollower(feed, cast(RecordInputs, inputs))
    task = asyncio.create_task(follower.run())
    try:
        for _ in range(200):
            if len(inputs.hashes) == 3:
                break
            await asyncio.sleep(0)
        assert inputs.hashes == [b"a" * 32, b"b" * 32, b"c" * 32] and feed.requests == [("h-epoch", 3)]
        assert FeedPosition.decode(inputs.stored["history/h1"]) == FeedPosition("h-epoch", 5)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_positions_round_trip_and_anything_else_is_no_position() -> None:
    assert FeedPosition.decode(FeedPosition("e", 7).encode()) == FeedPosition("e", 7)
    for raw in (
        None,
        b"",
        b"garbage",
        b'{"v": 2, "epoch": "e", "seq": 1}',
        b'{"v": 1, "epoch": "e", "seq": -1}',
    ):
        assert FeedPosition.decode(raw) == NO_POSITION and not NO_POSITION.held
