"""The client side of the send suite (bench/send.py): Sends closed and open loop, and the watch that
timestamps when each request was sent and stored. This process is the gRPC client; every latency is taken
with ``time.perf_counter`` here."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.support import client_collector_off
from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2
from wakucodec.envelope import Envelope

__all__ = [
    "IN_FLIGHT",
    "OFFERED_PER_S",
    "Arrivals",
    "Run",
    "Timings",
    "closed_loop",
    "drained",
    "open_loop",
    "timed_sends",
]

IN_FLIGHT = 50
OFFERED_PER_S = 1000
LATENCY_GAP_S = 0.05
WARM_UP_S = 1.0
DATA_SIZE = 1024
TOPIC = "/waku/1/0x0b0e0c0d/rfc26"
FINAL = (common_pb2.SEND_STATE_SUCCEEDED, common_pb2.SEND_STATE_FAILED, common_pb2.SEND_STATE_CANCELED)


class Arrivals:
    """A Waku peer's sink: when each envelope arrived (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.at: dict[bytes, float] = {}

    async def accept(
        self, peer_id: bytes | None, envelopes: Sequence[Envelope], now: float, *, ephemeral: bool = False
    ) -> bool:
        t = time.perf_counter()
        for env in envelopes:
            self.at.setdefault(env.hash, t)
        return True


def message(n: int) -> common_pb2.WakuMessage:
    """A 1 KiB message, unique by ``n``."""
    return common_pb2.WakuMessage(
        payload=n.to_bytes(8, "big") + os.urandom(DATA_SIZE - 8), content_topic=TOPIC
    )


@dataclass
class Run:
    """Latencies (seconds) of the Sends completed inside the timed window."""

    seconds: float
    latencies: list[float] = field(default_factory=list)
    throttled: int = 0

    @property
    def rate(self) -> float:
        """Completed Sends per second of the timed window."""
        return len(self.latencies) / self.seconds


async def closed_loop(stub: Any, seconds: float, counter: list[int]) -> Run:
    """``IN_FLIGHT`` callers back to back; a warm-up second first, then ``seconds`` timed."""
    run = Run(seconds)
    began = time.perf_counter() + WARM_UP_S
    end = began + seconds

    async def caller() -> None:
        while (start := time.perf_counter()) < end:
            counter[0] += 1
            await stub.Send(send_pb2.SendRequest(message=message(counter[0])), timeout=30)
            if start >= began:
                run.latencies.append(time.perf_counter() - start)

    with client_collector_off():
        await asyncio.gather(*(caller() for _ in range(IN_FLIGHT)))
    return run


async def open_loop(stub: Any, seconds: float, counter: list[int]) -> Run:
    """``OFFERED_PER_S`` Sends per second at fixed instants, at most ``IN_FLIGHT`` at once; each latency is
    from its scheduled instant (a Send held back by the in-flight cap counts its wait)."""
    run = Run(seconds)
    slots = asyncio.Semaphore(IN_FLIGHT)
    tasks: set[asyncio.Task[None]] = set()
    total = int(seconds * OFFERED_PER_S)

    async def one(at: float) -> None:
        try:
            counter[0] += 1
            await stub.Send(send_pb2.SendRequest(message=message(counter[0])), timeout=30)
            run.latencies.append(time.perf_counter() - at)
        finally:
            slots.release()

    with client_collector_off():
        began = time.perf_counter() + 0.1
        for i in range(total):
            at = began + i / OFFERED_PER_S
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if slots.locked():
                run.throttled += 1
            await slots.acquire()
            task = asyncio.create_task(one(at))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    return run


async def drained(stub: Any, timeout: float = 600.0) -> float:
    """Seconds until no request is pending."""
    began = time.perf_counter()
    async with asyncio.timeout(timeout):
        while (await stub.ListPendingRequests(send_pb2.ListPendingRequestsRequest(), timeout=60)).request_ids:
            await asyncio.sleep(1.0)  # each listing reads every pending request: poll gently
    return time.perf_counter() - began


@dataclass
class Timings:
    """When each timed Send started, and when the watch first saw it sent and stored (perf_counter)."""

    started: dict[str, float] = field(default_factory=dict)
    sent: dict[str, float] = field(default_factory=dict)
    stored: dict[str, float] = field(default_factory=dict)
    envelope: dict[str, bytes] = field(default_factory=dict)


async def timed_sends(stub: Any, n: int) -> Timings:
    """``n`` Sends with ``confirm_mode = STORE``, one every ``LATENCY_GAP_S``, timed by a live watch until
    each request has finished (bench/send.py docstring, 3)."""
    times = Timings()
    finished: set[str] = set()
    seen: set[str] = set()
    watch = stub.WatchSendStatuses(send_pb2.WatchSendStatusesRequest())  # live changes only
    done = asyncio.Event()

    async def follow() -> None:
        async for reply in watch:
            status = reply.status
            rid, t = status.request_id, time.perf_counter()
            seen.add(rid)
            if status.sent:
                times.sent.setdefault(rid, t)
                times.envelope.setdefault(rid, status.envelope_hash)
            if status.stored:
                times.stored.setdefault(rid, t)
            if status.progress.state in FINAL:
                finished.add(rid)
            if len(finished) >= n and finished >= set(times.started):
                done.set()

    follower = asyncio.create_task(follow())
    try:
        # "Live only" begins where the log ends when the watch starts: once a probe's change arrives, it is.
        probe = await stub.Send(send_pb2.SendRequest(message=message(9_999_999)), timeout=30)
        async with asyncio.timeout(120):
            while probe.request_id not in seen:
                await asyncio.sleep(0.05)
        for i in range(n):
            begin = time.perf_counter()
            request = send_pb2.SendRequest(
                message=message(10_000_000 + i), confirm_mode=send_pb2.CONFIRM_MODE_STORE
            )
            times.started[(await stub.Send(request, timeout=30)).request_id] = begin
            await asyncio.sleep(max(0.0, begin + LATENCY_GAP_S - time.perf_counter()))
        async with asyncio.timeout(120):
            await done.wait()
    finally:
        watch.cancel()
        await asyncio.gather(follower, return_exceptions=True)
    return times
