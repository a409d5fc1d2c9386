"""The ingest forwarder against a scripted stream: acks, window, re-send order, back-pressure, drops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable

import pytest

from meshcore.errors import Unavailable
from services.edge_peer.forwarder import IngestAck, IngestForwarder, OutgoingBatch

PEER = b"\x01" * 32


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll every 5 ms, bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


class ScriptedIngest:
    """IngestPort: records what each stream carried; acks automatically or when told; fails on demand."""

    def __init__(self, *, auto_ack: bool = True, refuse: int = 0) -> None:
        self.auto_ack = auto_ack
        self.refuse = refuse
        self.streams = 0
        self.pulls = 0  # times a stream's reader asked the forwarder for its next batch
        self.received: list[tuple[int, int, list[bytes]]] = []  # (stream, batch id, envelopes)
        self._acks: asyncio.Queue[IngestAck | Exception] | None = None

    def ack(self, batch_id: int, count: int = 1) -> None:
        assert self._acks is not None
        self._acks.put_nowait(IngestAck(batch_id, count, 0, 0))

    def fail(self) -> None:
        assert self._acks is not None
        self._acks.put_nowait(Unavailable("ingest restarting"))

    async def stream(self, batches: AsyncIterator[OutgoingBatch]) -> AsyncIterator[IngestAck]:
        self.streams += 1
        if self.refuse:
            self.refuse -= 1
            raise Unavailable("connection refused")
        acks: asyncio.Queue[IngestAck | Exception] = asyncio.Queue()
        self._acks = acks
        stream = self.streams

        async def read() -> None:
            pending = batches.__aiter__()
            while True:
                self.pulls += 1
                try:
                    batch = await anext(pending)
                except StopAsyncIteration:
                    return
                self.received.append((stream, batch.batch_id, list(batch.envelopes)))
                if self.auto_ack:
                    acks.put_nowait(IngestAck(batch.batch_id, len(batch.envelopes), 0, 0))

        reader = asyncio.create_task(read())
        try:
            while True:
                item = await acks.get()
                if isinstance(item, Exception):
                    raise item
                yield item
        finally:
            reader.cancel()


def _forwarder(port: ScriptedIngest, **kw: float) -> IngestForwarder:
    fwd = IngestForwarder(
        port,
        max_envelopes=int(kw.get("max_envelopes", 100)),
        max_bytes=int(kw.get("max_bytes", 1 << 20)),
        max_wait_s=kw.get("max_wait_s", 1.0),
        window=int(kw.get("window", 16)),
        reconnect_max_s=0.1,
    )
    fwd.start()
    return fwd


def _envs(tag: int, count: int = 1) -> list[bytes]:
    return [bytes([tag, i]) * 5 for i in range(count)]


async def test_acks_free_the_buffer() -> None:
    port = ScriptedIngest()
    fwd = _forwarder(port)
    for tag in range(3):
        assert await fwd.submit(PEER, _envs(tag, 2), 100.0)
    await wait_until(lambda: fwd.buffered_envelopes == 0, what="acks")
    assert [r[2] for r in port.received] == [_envs(0, 2), _envs(1, 2), _envs(2, 2)]
    assert fwd.stats.batches_acked == 3 and fwd.stats.envelopes_accepted == 6
    assert fwd.buffered_bytes == 0
    await fwd.close(1)


async def test_window_bounds_unacknowledged_batches() -> None:
    port = ScriptedIngest(auto_ack=False)
    fwd = _forwarder(port, window=2)
    for tag in range(5):
        await fwd.submit(PEER, _envs(tag), 1.0)
    # The reader asks for a third batch while three are queued. The forwarder hands out a sendable batch
    # without suspending, so a pull still pending (seen from this task) is one the window holds back.
    await wait_until(lambda: len(port.received) == 2 and port.pulls == 3, what="a third batch asked for")
    assert len(port.received) == 2 and fwd.buffered_envelopes == 5
    port.ack(port.received[0][1])
    await wait_until(lambda: len(port.received) == 3, what="a third after one ack")
    await fwd.close(0.01)


async def test_a_failed_stream_resends_unacknowledged_batches_in_order() -> None:
    port = ScriptedIngest(auto_ack=False)
    fwd = _forwarder(port)
    for tag in range(3):
        await fwd.submit(PEER, _envs(tag), 1.0)
    await wait_until(lambda: len(port.received) == 3, what="three sent")
    port.ack(port.received[0][1])
    await wait_until(lambda: fwd.stats.batches_acked == 1, what="first ack")
    port.fail()
    await wait_until(lambda: len(port.received) == 5, what="re-send on a new stream")
    assert [(s, e) for s, _, e in port.received[3:]] == [(2, _envs(1)), (2, _envs(2))]
    assert fwd.stats.batches_resent == 2 and fwd.stats.stream_failures["Unavailable"] == 1
    assert fwd.buffered_envelopes == 2
    await fwd.close(0.01)


async def test_reconnects_after_refusals() -> None:
    port = ScriptedIngest(refuse=2)
    fwd = _forwarder(port)
    await fwd.submit(PEER, _envs(7), 1.0)
    await wait_until(lambda: fwd.stats.batches_acked == 1, what="delivery after two refused streams")
    assert port.streams == 3 and fwd.stats.stream_failures["Unavailable"] == 2
    await fwd.close(1)


async def test_backpressure_waits_for_room_then_counts_what_cannot_be_buffered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = ScriptedIngest(auto_ack=False)
    fwd = _forwarder(port, max_envelopes=4, max_wait_s=0.2)
    assert await fwd.submit(PEER, _envs(1, 3), 1.0)
    waiting = asyncio.create_task(fwd.submit(PEER, _envs(2, 2), 1.0))
    await wait_until(lambda: len(port.received) == 1, what="first batch sent")
    assert not waiting.done()
    port.ack(port.received[0][1], 3)
    assert await asyncio.wait_for(waiting, 1)
    assert fwd.stats.backpressure_waits == 1 and fwd.buffered_envelopes == 2
    caplog.set_level(logging.WARNING)
    assert not await fwd.submit(PEER, _envs(3, 3), 1.0)  # 2 + 3 > 4 and nothing acks: dropped, counted
    assert fwd.stats.dropped["buffer_full"] == 3
    assert any("3 envelopes not forwarded (buffer_full" in r.getMessage() for r in caplog.records)
    await fwd.close(0.01)


async def test_an_oversized_batch_goes_alone_into_an_empty_buffer() -> None:
    port = ScriptedIngest()
    fwd = _forwarder(port, max_envelopes=2, max_bytes=10)
    assert await fwd.submit(PEER, _envs(1, 5), 1.0)
    await wait_until(lambda: fwd.stats.batches_acked == 1, what="ack")
    await fwd.close(1)


async def test_close_flushes_then_counts_the_rest() -> None:
    port = ScriptedIngest(auto_ack=False)
    fwd = _forwarder(port)
    await fwd.submit(PEER, _envs(1, 2), 1.0)
    await wait_until(lambda: len(port.received) == 1, what="sent")
    await fwd.close(0.05)
    assert fwd.stats.dropped["shutdown"] == 2 and fwd.buffered_envelopes == 0
    assert not await fwd.submit(PEER, _envs(2), 1.0)
    assert fwd.stats.dropped["shutdown"] == 3


async def test_empty_submit_and_bad_bounds() -> None:
    fwd = _forwarder(ScriptedIngest())
    assert await fwd.submit(PEER, [], 1.0)
    await fwd.close(0.01)
    with pytest.raises(ValueError):
        IngestForwarder(ScriptedIngest(), max_envelopes=0, max_bytes=1, max_wait_s=1)
