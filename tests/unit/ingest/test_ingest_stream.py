"""The Ingest stream pump: window, out-of-order answers, errors end the stream, drain ends it UNAVAILABLE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from meshcore.errors import Unavailable
from services.ingest.model import ShuttingDown
from services.ingest.stream import pump

WAIT = 5.0


async def barrier() -> None:
    """Return once every task that was ready before the call has run its next step."""
    done = asyncio.Event()
    asyncio.get_running_loop().call_soon(done.set)
    await done.wait()


class Requests:
    """A request stream fed by the test; records how many requests the pump has pulled."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[int | None] = asyncio.Queue()
        self.pulled = 0

    def send(self, *values: int) -> None:
        for value in values:
            self._queue.put_nowait(value)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[int]:
        while True:
            value = await self._queue.get()
            if value is None:
                return
            self.pulled += 1
            yield value


class Handlers:
    """Handlers that block until the test answers them (or fails them)."""

    def __init__(self) -> None:
        self.gates: dict[int, asyncio.Future[str]] = {}
        self.started: asyncio.Queue[int] = asyncio.Queue()
        self.cancelled: list[int] = []

    async def __call__(self, request: int) -> str:
        gate = self.gates.setdefault(request, asyncio.get_running_loop().create_future())
        self.started.put_nowait(request)
        try:
            return await gate
        except asyncio.CancelledError:
            self.cancelled.append(request)
            raise

    def answer(self, request: int) -> None:
        self.gates.setdefault(request, asyncio.get_running_loop().create_future()).set_result(
            f"ack {request}"
        )

    def fail(self, request: int, error: Exception) -> None:
        self.gates.setdefault(request, asyncio.get_running_loop().create_future()).set_exception(error)

    async def next_started(self) -> int:
        return await asyncio.wait_for(self.started.get(), WAIT)


async def collect(stream: AsyncIterator[str], out: list[str]) -> None:
    async for answer in stream:
        out.append(answer)


async def test_answers_come_out_of_order_and_the_stream_ends_after_half_close() -> None:
    requests, handlers = Requests(), Handlers()
    answers: asyncio.Queue[str] = asyncio.Queue()

    async def forward() -> None:
        async for answer in pump(requests.__aiter__(), handlers, window=4, stop=asyncio.Event()):
            answers.put_nowait(answer)

    task = asyncio.ensure_future(forward())
    requests.send(1, 2, 3)
    assert {await handlers.next_started() for _ in range(3)} == {1, 2, 3}
    handlers.answer(3)
    assert await asyncio.wait_for(answers.get(), WAIT) == "ack 3"  # the latest request, answered first
    handlers.answer(1)
    assert await asyncio.wait_for(answers.get(), WAIT) == "ack 1"
    requests.close()
    await barrier()
    assert not task.done()  # request 2 is still owed an answer
    handlers.answer(2)
    assert await asyncio.wait_for(answers.get(), WAIT) == "ack 2"
    await asyncio.wait_for(task, WAIT)


async def test_the_window_bounds_unanswered_requests() -> None:
    requests, handlers = Requests(), Handlers()
    out: list[str] = []
    task = asyncio.ensure_future(
        collect(pump(requests.__aiter__(), handlers, window=2, stop=asyncio.Event()), out)
    )
    requests.send(1, 2, 3, 4)
    await handlers.next_started()
    await handlers.next_started()
    await barrier()
    assert (
        requests.pulled == 2
    )  # two unanswered: the third is not even read (HTTP/2 flow control pushes back)
    handlers.answer(1)
    assert await handlers.next_started() == 3
    await barrier()
    assert requests.pulled == 3
    for r in (2, 3, 4):
        handlers.answer(r)
    requests.close()
    await asyncio.wait_for(task, WAIT)
    assert sorted(out) == ["ack 1", "ack 2", "ack 3", "ack 4"]


async def test_a_handler_error_ends_the_stream_and_cancels_the_rest() -> None:
    requests, handlers = Requests(), Handlers()
    out: list[str] = []
    task = asyncio.ensure_future(
        collect(pump(requests.__aiter__(), handlers, window=8, stop=asyncio.Event()), out)
    )
    requests.send(1, 2, 3)
    for _ in range(3):
        await handlers.next_started()
    handlers.answer(1)
    handlers.fail(2, Unavailable("archive down"))
    with pytest.raises(Unavailable, match="archive down"):
        await asyncio.wait_for(task, WAIT)
    assert "ack 2" not in out
    assert handlers.cancelled == [3]


async def test_drain_stops_reading_sends_owed_answers_then_fails_unavailable() -> None:
    requests, handlers = Requests(), Handlers()
    out: list[str] = []
    stop = asyncio.Event()
    task = asyncio.ensure_future(collect(pump(requests.__aiter__(), handlers, window=8, stop=stop), out))
    requests.send(1, 2)
    await handlers.next_started()
    await handlers.next_started()
    stop.set()
    await barrier()
    requests.send(3)  # arrives after the drain began: never read
    handlers.answer(2)
    handlers.answer(1)
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(task, WAIT)
    assert sorted(out) == ["ack 1", "ack 2"]
    assert requests.pulled == 2


async def test_a_stream_opened_while_draining_ends_at_once() -> None:
    stop = asyncio.Event()
    stop.set()
    requests, handlers = Requests(), Handlers()
    with pytest.raises(ShuttingDown):
        await asyncio.wait_for(collect(pump(requests.__aiter__(), handlers, window=1, stop=stop), []), WAIT)
    assert requests.pulled == 0


async def test_closing_the_consumer_cancels_outstanding_handlers() -> None:
    requests, handlers = Requests(), Handlers()
    stream = pump(requests.__aiter__(), handlers, window=4, stop=asyncio.Event())
    requests.send(1, 2)
    first = asyncio.ensure_future(stream.__anext__())
    await handlers.next_started()
    await handlers.next_started()
    handlers.answer(1)
    assert await asyncio.wait_for(first, WAIT) == "ack 1"
    await stream.aclose()  # e.g. the client cancelled the call
    assert handlers.cancelled == [2]
