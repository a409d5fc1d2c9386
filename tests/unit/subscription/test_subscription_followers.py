"""The edge-feed follower: resumes after its last applied envelope, reopens on topic changes, backs off on
failures (a recorded fake clock: no real sleeping), starts over when the edge peer's epoch changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import cast

from meshcore import Unavailable
from msgstore.types import Subscription
from services.subscription.followers import REPLAY_CACHE, Backoff, EdgeFollower
from services.subscription.inputs import RecordInputs
from services.subscription.mapping import TopicIndex
from services.subscription.ports import FeedBatch, FeedEnvelope
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
    def __init__(self) -> None:
        self.applied: list[int] = []

    async def receive_many(self, envelopes: Sequence[FeedEnvelope]) -> list[object]:
        self.applied.extend(e.sequence for e in envelopes)
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
