"""Served-history followers over the instances behind a dns: name: one per resolved address, started and
stopped as the set changes (re-resolution driven by hand: an injected resolver, no sleeps), each with its
own position; the channel of a gone instance is released; fixed feeds are followed as they are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import cast

from meshcore.discovery import Instances
from services.subscription.inputs import RecordInputs
from services.subscription.ports import ServedBatch
from services.subscription.positions import FeedPosition
from services.subscription.served import ServedDiscovery, ServedFollowers

HISTORY = "dns:///history-query-headless.mesh.svc:50054"


class Feed:
    """One instance's WatchServed: serves what the test puts, until cancelled."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.opened = 0
        self.chunks: asyncio.Queue[bytes] = asyncio.Queue()
        self.cancelled = False

    async def watch(self, resume_epoch: str, after_sequence: int) -> AsyncIterator[ServedBatch]:
        self.opened += 1
        yield ServedBatch(f"epoch-{self.target}", False, [])
        sequence = 0
        try:
            while True:
                digest = await self.chunks.get()
                sequence += 1
                yield ServedBatch(f"epoch-{self.target}", False, [(sequence, [digest])])
        except asyncio.CancelledError:
            self.cancelled = True
            raise


class Inputs:
    """Records the served hashes and the positions committed with them."""

    def __init__(self) -> None:
        self.stored: set[bytes] = set()
        self.positions: dict[str, bytes] = {}

    async def position(self, name: str) -> bytes | None:
        return self.positions.get(name)

    async def save_position(self, name: str, value: bytes) -> None:
        self.positions[name] = value

    async def served(self, hashes: Sequence[bytes], *, position: tuple[str, bytes]) -> None:
        self.stored.update(hashes)
        self.positions[position[0]] = position[1]


async def until(condition: Callable[[], bool], rounds: int = 500) -> None:
    """Let the event loop run until ``condition`` holds (no clock involved)."""
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


class Zone:
    def __init__(self, *ips: str) -> None:
        self.ips = list(ips)

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        assert host == "history-query-headless.mesh.svc"
        return [f"{ip}:{port}" for ip in self.ips]


async def test_each_resolved_instance_is_followed_and_the_set_follows_the_records() -> None:
    zone = Zone("10.0.0.1", "10.0.0.2")
    feeds: dict[str, Feed] = {}
    closed: list[str] = []

    def open_feed(address: str) -> Feed:
        feeds[address] = Feed(address)
        return feeds[address]

    async def close(address: str) -> None:
        closed.append(address)

    instances = Instances([HISTORY], resolve=zone, interval_s=3600)  # refreshed by hand below
    inputs = Inputs()
    followers = ServedFollowers(
        ServedDiscovery(instances, open_feed, close), cast(RecordInputs, inputs), missed=lambda k, t: None
    )
    task = asyncio.create_task(followers.run())
    try:
        await until(lambda: len(feeds) == 2 and all(f.opened for f in feeds.values()))
        assert sorted(followers.followers) == ["10.0.0.1:50054", "10.0.0.2:50054"]
        # What either instance served becomes stored: both are followed, not one balanced channel.
        feeds["10.0.0.1:50054"].chunks.put_nowait(b"a" * 32)
        feeds["10.0.0.2:50054"].chunks.put_nowait(b"b" * 32)
        await until(lambda: inputs.stored == {b"a" * 32, b"b" * 32})
        assert FeedPosition.decode(inputs.positions["history/10.0.0.2:50054"]).sequence == 1

        zone.ips = ["10.0.0.2", "10.0.0.3"]  # .1 replaced by .3
        assert await instances.refresh()
        await until(lambda: "10.0.0.3:50054" in feeds and feeds["10.0.0.3:50054"].opened == 1)
        assert sorted(followers.followers) == ["10.0.0.2:50054", "10.0.0.3:50054"]
        assert feeds["10.0.0.1:50054"].cancelled and closed == ["10.0.0.1:50054"]
        assert feeds["10.0.0.2:50054"].opened == 1  # the kept instance's stream was not reopened
        feeds["10.0.0.3:50054"].chunks.put_nowait(b"c" * 32)
        await until(lambda: b"c" * 32 in inputs.stored)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert followers.followers == {} and all(f.cancelled for f in feeds.values() if f.opened)
    assert closed == ["10.0.0.1:50054"]  # kept for the next term as the writer


async def test_an_instance_gone_while_not_the_writer_is_released_at_the_next_term() -> None:
    zone = Zone("10.0.0.1")
    closed: list[str] = []

    async def close(address: str) -> None:
        closed.append(address)

    instances = Instances([HISTORY], resolve=zone, interval_s=3600)
    followers = ServedFollowers(
        ServedDiscovery(instances, Feed, close), cast(RecordInputs, Inputs()), missed=lambda k, t: None
    )
    task = asyncio.create_task(followers.run())
    await until(lambda: list(followers.followers) == ["10.0.0.1:50054"])
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    zone.ips = ["10.0.0.4"]
    task = asyncio.create_task(followers.run())
    try:
        await until(lambda: list(followers.followers) == ["10.0.0.4:50054"])
        assert closed == ["10.0.0.1:50054"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_fixed_feeds_are_followed_as_they_are() -> None:
    feeds = [Feed("h-a:1"), Feed("h-b:1")]
    inputs = Inputs()
    followers = ServedFollowers(
        ServedDiscovery.fixed(feeds), cast(RecordInputs, inputs), missed=lambda k, t: None
    )
    task = asyncio.create_task(followers.run())
    try:
        await until(lambda: all(f.opened for f in feeds))
        assert sorted(followers.followers) == ["h-a:1", "h-b:1"]
        assert not followers.instances.dynamic
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
