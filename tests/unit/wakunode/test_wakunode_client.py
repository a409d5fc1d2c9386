"""WakuClient history pages against a scripted in-memory mailserver: how a page ends — by the 0x7d, by
idleness for servers that never send one (geth, protocol-notes §4.12), or by the timeout — and what its
result says."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

import pytest

from devp2p.abc import SubProtocol
from tests.unit.wakunode.support import NOW, FakePeer, envelope, protocol
from wakucodec.bloom import topics_to_bloom
from wakucodec.envelope import Envelope, decode_envelope
from wakucodec.errors import CodecError
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requestdialects import decode_plain
from wakucodec.requests import bytes_to_hash
from wakucodec.responses import ZERO_HASH, Completion
from wakunode import constants as c
from wakunode.client import (
    CLIENT_CONFIG,
    GETH_IDLE_END_S,
    HistoryPage,
    PageEnd,
    WakuClient,
    resolve_idle_end,
)
from wakunode.errors import RequestTimeout
from wakunode.protocol import encode_status
from wakunode.status_options import StatusOptions

PASSWORD = "status-offline-inbox"
ARCHIVE = [envelope(i, topic=b"aaaa", sent=NOW - 100 + i) for i in range(6)]
BY_BLOOM = HistoryRequest(NOW - 200, NOW, topics_to_bloom([b"aaaa"]))
BY_TOPIC = HistoryRequest(NOW - 200, NOW, None, (b"aaaa",))
CURSOR = b"\x01" * 36

Answer = list[Envelope] | Completion
#: A script step: envelopes for one 0x7f, or a function of the request ID giving the 0x7d.
Step = list[Envelope] | Callable[[bytes], Completion]


def done(last: bytes, cursor: bytes = b"") -> Callable[[bytes], Completion]:
    """The 0x7d for whichever request it answers."""
    return lambda request_id: Completion(request_id, last, cursor)


def request_id_of(payload: bytes) -> bytes:
    """The ID a mailserver echoes: the request envelope's hash, or the plain request's ID."""
    try:
        return decode_envelope(payload).hash
    except CodecError:
        return bytes_to_hash(decode_plain(payload)[1])


@dataclass(eq=False)
class ScriptedMailserver(FakePeer):
    """A mailserver session that answers each 0x7e with the next script: ``(delay_s, step)`` pairs,
    delivered to the client ``delay_s`` after the request was written."""

    client: WakuClient | None = None
    scripts: list[Sequence[tuple[float, Step]]] = field(default_factory=list)
    timers: list[asyncio.TimerHandle] = field(default_factory=list)

    async def send(self, protocol: SubProtocol | str, code: int, payload: bytes) -> None:
        await super().send(protocol, code, payload)
        if code == c.P2P_REQUEST_CODE and self.scripts:
            loop = asyncio.get_running_loop()
            request_id = request_id_of(payload)
            for delay, step in self.scripts.pop(0):
                answer = step if isinstance(step, list) else step(request_id)
                self.timers.append(loop.call_later(delay, self.deliver, answer))

    def deliver(self, answer: Answer) -> None:
        assert self.client is not None
        if isinstance(answer, Completion):
            self.client.on_p2p_complete(self.remote_id, answer)
        else:
            self.client.on_p2p_envelopes(self.remote_id, answer)


@pytest.fixture
async def session() -> AsyncIterator[tuple[WakuClient, ScriptedMailserver]]:
    """A client with a handshaken, trusted shh/6 session to a scripted mailserver."""
    client = WakuClient(config=CLIENT_CONFIG)
    server = ScriptedMailserver(client=client)
    proto = protocol(client.node, "shh/6")
    await proto.on_start(server)
    await proto.handle(server, c.STATUS_CODE, encode_status(proto.flavor, StatusOptions()))
    client.node.set_trusted(server.remote_id, True)
    try:
        yield client, server
    finally:
        for timer in server.timers:
            timer.cancel()
        await client.node.stop()


async def collect(page: HistoryPage) -> tuple[list[Envelope], float]:
    """The page's envelopes and the loop time it took."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    got = [e async for e in page]
    return got, loop.time() - started


def geth_page(client: WakuClient, server: FakePeer, **kwargs: object) -> HistoryPage:
    return client.request_history(
        server.remote_id,
        BY_BLOOM,
        Dialect.GETH_BINARY,
        password=PASSWORD,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("value", "dialect", "expected"),
    [
        ("auto", Dialect.GETH_BINARY, GETH_IDLE_END_S),
        *(("auto", d, None) for d in Dialect if d is not Dialect.GETH_BINARY),
        (None, Dialect.GETH_BINARY, None),
        (0, Dialect.GETH_BINARY, None),
        (0.0, Dialect.GETH_BINARY, None),
        (1.5, Dialect.STATUS_PLAIN, 1.5),
        (2, Dialect.GETH_BINARY, 2.0),
    ],
)
def test_idle_end_defaults_to_on_for_the_geth_dialect_only(
    value: float | None, dialect: Dialect, expected: float | None
) -> None:
    assert resolve_idle_end(value, dialect) == expected


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
async def test_a_bad_idle_end_is_refused_before_anything_is_sent(
    session: tuple[WakuClient, ScriptedMailserver], bad: float
) -> None:
    client, server = session
    with pytest.raises(ValueError, match="complete_after_idle"):
        geth_page(client, server, complete_after_idle=bad)
    with pytest.raises(ValueError, match="complete_after_idle"):
        client.follow_cursor(server.remote_id, BY_TOPIC, Dialect.STATUS_PLAIN, complete_after_idle=bad)
    assert server.of(c.P2P_REQUEST_CODE) == []


async def test_geth_page_ends_by_idleness_after_the_last_0x7f(
    session: tuple[WakuClient, ScriptedMailserver],
) -> None:
    client, server = session
    assert geth_page(client, server).complete_after_idle == GETH_IDLE_END_S  # the default for this dialect
    page = geth_page(client, server, complete_after_idle=0.3, timeout=10)
    # geth: one envelope per 0x7f, back to back, and never a 0x7d.
    server.scripts.append([(0.05 * i, [env]) for i, env in enumerate(ARCHIVE, start=1)])
    got, elapsed = await collect(page)
    assert [e.hash for e in got] == [e.hash for e in ARCHIVE]
    assert elapsed >= 0.05 * len(ARCHIVE) + 0.3 - 0.01  # the idle window after the last 0x7f (± clock)
    result = page.result
    assert result is not None and result.end is PageEnd.IDLE and page.ended_by_idle
    assert result.cursor == b"" and result.completion is None and page.completion is None
    assert result.request_id == page.request_id and result.envelopes == len(ARCHIVE) == page.received
    assert result.last_envelope_hash == ARCHIVE[-1].hash
    assert len(server.of(c.P2P_REQUEST_CODE)) == 1


async def test_idle_counts_from_the_request_when_nothing_arrives(
    session: tuple[WakuClient, ScriptedMailserver],
) -> None:
    client, server = session
    page = geth_page(client, server, complete_after_idle=0.2, timeout=10)
    got, elapsed = await collect(page)  # no script: the server stays silent (geth with no match)
    assert got == [] and elapsed >= 0.2 - 0.01
    assert page.result is not None and page.result.end is PageEnd.IDLE
    assert page.result.last_envelope_hash == ZERO_HASH and page.result.envelopes == 0


async def test_every_0x7f_restarts_the_idle_clock(session: tuple[WakuClient, ScriptedMailserver]) -> None:
    client, server = session
    page = geth_page(client, server, complete_after_idle=0.5, timeout=10)
    # Gaps of 0.2 s (< 0.5) over 1.2 s in all (> 0.5): nothing is cut off.
    server.scripts.append([(0.2 * i, [env]) for i, env in enumerate(ARCHIVE, start=1)])
    got, elapsed = await collect(page)
    assert [e.hash for e in got] == [e.hash for e in ARCHIVE]
    assert elapsed >= 1.2 + 0.5 - 0.01
    assert page.ended_by_idle


async def test_a_0x7d_still_ends_the_page_when_an_idle_end_is_set(
    session: tuple[WakuClient, ScriptedMailserver],
) -> None:
    client, server = session  # e.g. our own mailserver, which answers the geth dialect with a 0x7d
    page = geth_page(client, server, complete_after_idle=5.0, timeout=10)
    server.scripts.append([(0.0, ARCHIVE[:2]), (0.01, ARCHIVE[2:3]), (0.02, done(ARCHIVE[2].hash, CURSOR))])
    got, elapsed = await collect(page)
    assert [e.hash for e in got] == [e.hash for e in ARCHIVE[:3]] and elapsed < 5.0
    result = page.result
    assert result is not None and result.end is PageEnd.COMPLETION and not page.ended_by_idle
    assert result.completion is not None and result.completion is page.completion
    assert result.request_id == page.request_id == page.completion.request_id
    assert (result.cursor, result.last_envelope_hash, result.envelopes) == (CURSOR, ARCHIVE[2].hash, 3)


@pytest.mark.parametrize(
    ("dialect", "idle"),
    [(Dialect.STATUS_PLAIN, "auto"), (Dialect.GETH_BINARY, None), (Dialect.GETH_BINARY, 0)],
)
async def test_without_an_idle_end_a_server_that_sends_no_0x7d_times_out(
    session: tuple[WakuClient, ScriptedMailserver], dialect: Dialect, idle: float | None
) -> None:
    client, server = session
    request = BY_TOPIC if dialect is Dialect.STATUS_PLAIN else BY_BLOOM
    page = client.request_history(
        server.remote_id,
        request,
        dialect,
        password=PASSWORD,
        timeout=0.5,
        complete_after_idle=idle,
    )
    assert page.complete_after_idle is None
    server.scripts.append([(0.0, ARCHIVE[:3])])
    got: list[Envelope] = []
    with pytest.raises(RequestTimeout):
        async for env in page:
            got.append(env)
    assert len(got) == 3 and page.result is None


async def test_a_late_0x7f_after_an_idle_end_is_not_taken_for_the_page(
    session: tuple[WakuClient, ScriptedMailserver],
) -> None:
    client, server = session
    page = geth_page(client, server, complete_after_idle=0.2, timeout=10)
    server.scripts.append([(0.0, ARCHIVE[:2])])
    got, _ = await collect(page)
    assert len(got) == 2 and page.ended_by_idle
    server.deliver(ARCHIVE[2:])  # after the page ended: nobody is waiting for it
    assert client.node.metrics.ignored_packets["unsolicited_p2p"] == 1
    again = geth_page(client, server, complete_after_idle=0.2, timeout=10)
    server.scripts.append([(0.0, ARCHIVE[3:4])])
    got, _ = await collect(again)
    assert [e.hash for e in got] == [ARCHIVE[3].hash]


async def test_a_walk_stops_at_a_page_that_ended_by_idleness(
    session: tuple[WakuClient, ScriptedMailserver],
) -> None:
    client, server = session
    walk = client.follow_cursor(
        server.remote_id,
        BY_BLOOM,
        Dialect.GETH_BINARY,
        password=PASSWORD,
        complete_after_idle=0.2,
        timeout=10,
    )
    # Page 1 ends with a 0x7d carrying a cursor; page 2 gets envelopes and no 0x7d.
    server.scripts.append([(0.0, ARCHIVE[:3]), (0.01, done(ARCHIVE[2].hash, CURSOR))])  # in order
    server.scripts.append([(0.0, ARCHIVE[3:])])
    got = [e async for e in walk]
    assert [e.hash for e in got] == [e.hash for e in ARCHIVE]
    assert [p.end for p in walk.pages] == [PageEnd.COMPLETION, PageEnd.IDLE]
    assert [p.cursor for p in walk.pages] == [CURSOR, b""]
    assert [p.envelopes for p in walk.pages] == [3, 3]
    assert walk.pages[-1].last_envelope_hash == ARCHIVE[-1].hash
    assert len(server.of(c.P2P_REQUEST_CODE)) == 2
