"""0x7e handling with in-memory peers and the in-memory backend: every dialect's 0x7f and 0x7d forms,
bundling under the max message size, ERROR= texts, the per-peer request rate limit (checked at receipt),
backend failures, and the one failure type each request ends in (requesters leaving mid-answer)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator, Callable

import pytest

from tests.unit.wakunode.support import NOW, FakePeer, ManualClock, envelope, protocol
from wakucodec import secp
from wakucodec.bloom import topics_to_bloom
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import encode_p2p_request
from wakucodec.responses import CompletionForm, MessageForm, decode_completion, decode_p2p_messages
from wakucodec.symmetric import key_from_password
from wakunode import constants as c
from wakunode.config import MailserverConfig, NodeConfig
from wakunode.mailserver import PEER_GONE, RATE_LIMIT_EXCEEDED
from wakunode.memory import FailingHistory, MemoryHistory
from wakunode.node import WakuNode
from wakunode.ports import HistoryBackend, HistoryComplete, HistoryFailure, HistoryItem, MailserverQuery
from wakunode.protocol import encode_status
from wakunode.status_options import StatusOptions

KEY = key_from_password("status-offline-inbox")
SIGNER = secp.generate_private_key()
ARCHIVE = [envelope(i, topic=b"aaaa" if i % 2 else b"bbbb", sent=NOW - 100 + i, size=200) for i in range(40)]


def mailserver(
    history: HistoryBackend | None = None, clock: ManualClock | None = None, **settings: object
) -> WakuNode:
    config = NodeConfig(mailserver=MailserverConfig(symmetric_keys=(KEY,), **settings))  # type: ignore[arg-type]
    return WakuNode(
        config, None, history if history is not None else MemoryHistory(ARCHIVE), clock=clock or ManualClock()
    )


async def requester(node: WakuNode, capability: str = "waku/1") -> FakePeer:
    peer = FakePeer()
    proto = protocol(node, capability)
    await proto.on_start(peer)
    await proto.handle(peer, c.STATUS_CODE, encode_status(proto.flavor, StatusOptions()))
    return peer


def request(dialect: Dialect, **fields: object) -> HistoryRequest:
    base: dict[str, object] = {"lower": NOW - 200, "upper": NOW, "limit": 10}
    if dialect in (Dialect.SPEC_5, Dialect.GETH_BINARY, Dialect.STATUS_LEGACY_6):
        base["bloom"] = topics_to_bloom([b"aaaa"])
    else:
        base["topics"] = (b"aaaa",)
    base.update(fields)
    return HistoryRequest(**base)  # type: ignore[arg-type]


async def ask(node: WakuNode, peer: FakePeer, payload: bytes, capability: str = "waku/1") -> list[bytes]:
    done = len(peer.of(c.P2P_REQUEST_COMPLETE_CODE))
    await protocol(node, capability).handle(peer, c.P2P_REQUEST_CODE, payload)
    return (await peer.wait_code(c.P2P_REQUEST_COMPLETE_CODE, done + 1))[done:]


def envelopes_of(peer: FakePeer, form: MessageForm) -> list[bytes]:
    out: list[bytes] = []
    for payload in peer.of(c.P2P_MESSAGE_CODE):
        raws, got = decode_p2p_messages(payload)
        assert got is form
        out.extend(raws)
    return out


@pytest.mark.parametrize(
    ("dialect", "capability", "message_form", "completion_form", "per_packet"),
    [
        (Dialect.STATUS_PLAIN, "waku/1", MessageForm.LIST, CompletionForm.CONCATENATED, 10),
        (Dialect.STATUS_ENVELOPE, "waku/1", MessageForm.LIST, CompletionForm.CONCATENATED, 10),
        (Dialect.STATUS_LEGACY_6, "waku/0", MessageForm.LIST, CompletionForm.CONCATENATED, 10),
        (Dialect.SPEC_5, "waku/1", MessageForm.LIST, CompletionForm.RLP_LIST, 10),
        (Dialect.SPEC_6_TOPICS, "waku/1", MessageForm.LIST, CompletionForm.RLP_LIST, 10),
        (Dialect.GETH_BINARY, "waku/1", MessageForm.LIST, CompletionForm.CONCATENATED, 1),
        (Dialect.GETH_BINARY, "shh/6", MessageForm.SINGLE, CompletionForm.CONCATENATED, 1),
        (Dialect.STATUS_ENVELOPE, "shh/6", MessageForm.LIST, CompletionForm.CONCATENATED, 10),
    ],
)
async def test_every_dialect_answered_in_its_forms(
    dialect: Dialect,
    capability: str,
    message_form: MessageForm,
    completion_form: CompletionForm,
    per_packet: int,
) -> None:
    node = mailserver()
    peer = await requester(node, capability)
    encoded = encode_p2p_request(
        request(dialect), dialect, symmetric_key=KEY, signing_key=SIGNER, now=NOW, request_id=None
    )
    [complete] = await ask(node, peer, encoded.payload, capability)
    expected = [e.raw for e in ARCHIVE if e.topic == b"aaaa"][:10]
    assert envelopes_of(peer, message_form) == expected
    assert len(peer.of(c.P2P_MESSAGE_CODE)) == 10 // per_packet
    completion = decode_completion(complete)
    assert completion.form is completion_form and completion.error is None
    assert completion.request_id == encoded.request_id
    assert completion.last_envelope_hash == next(e for e in ARCHIVE if e.raw == expected[-1]).hash
    assert len(completion.cursor) == 36  # 20 match, 10 delivered: more remain
    metrics = node.mailserver_metrics
    assert metrics.delivery_attempts_total == 1 and metrics.envelopes_total == 10
    assert not metrics.delivery_failures_total


async def test_cursor_pages_and_last_page_has_no_cursor() -> None:
    node = mailserver()
    peer = await requester(node)
    seen: list[bytes] = []
    cursor = b""
    for _ in range(3):
        encoded = encode_p2p_request(
            request(Dialect.STATUS_PLAIN, limit=8, cursor=cursor), Dialect.STATUS_PLAIN
        )
        completion = decode_completion((await ask(node, peer, encoded.payload))[0])
        cursor = completion.cursor
        if not cursor:
            break
    seen = envelopes_of(peer, MessageForm.LIST)
    assert seen == [e.raw for e in ARCHIVE if e.topic == b"aaaa"] and cursor == b""


async def test_bundles_respect_max_message_size() -> None:
    node = WakuNode(NodeConfig(max_message_size=1000), None, MemoryHistory(ARCHIVE), clock=ManualClock())
    peer = await requester(node)
    encoded = encode_p2p_request(request(Dialect.STATUS_PLAIN, limit=20), Dialect.STATUS_PLAIN)
    await ask(node, peer, encoded.payload)
    packets = peer.of(c.P2P_MESSAGE_CODE)
    assert all(len(p) <= 1000 for p in packets) and len(packets) >= 3
    assert len(envelopes_of(peer, MessageForm.LIST)) == 20


async def test_batch_false_gets_one_envelope_per_packet() -> None:
    node = mailserver()
    peer = await requester(node)
    encoded = encode_p2p_request(
        request(Dialect.STATUS_ENVELOPE, batch=False),
        Dialect.STATUS_ENVELOPE,
        symmetric_key=KEY,
        signing_key=SIGNER,
    )
    await ask(node, peer, encoded.payload)
    assert len(peer.of(c.P2P_MESSAGE_CODE)) == 10
    assert node.mailserver_metrics.requests_batched_total == 0


@pytest.mark.parametrize(
    ("build", "text"),
    [
        (
            lambda: encode_p2p_request(
                request(Dialect.STATUS_PLAIN, lower=NOW, upper=NOW - 1), Dialect.STATUS_PLAIN
            ),
            "request is invalid: query range is invalid: lower > upper",
        ),
        (
            lambda: encode_p2p_request(HistoryRequest(lower=1, upper=2), Dialect.STATUS_PLAIN),
            "request is invalid: bloom filter and topics is empty",
        ),
        (
            lambda: encode_p2p_request(
                request(Dialect.STATUS_ENVELOPE), Dialect.STATUS_ENVELOPE, symmetric_key=b"\x01" * 32
            ),
            "failed to decrypt p2p request",
        ),
        (
            lambda: encode_p2p_request(
                request(Dialect.STATUS_ENVELOPE), Dialect.STATUS_ENVELOPE, symmetric_key=KEY
            ),
            "check message signature failed: Wrong signature of p2p request",
        ),
    ],
)
async def test_invalid_requests_get_error(build: object, text: str) -> None:
    node = mailserver()
    peer = await requester(node)
    encoded = build()  # type: ignore[operator]
    completion = decode_completion((await ask(node, peer, encoded.payload))[0])
    assert completion.error == text and completion.request_id == encoded.request_id
    assert peer.of(c.P2P_MESSAGE_CODE) == []
    assert node.mailserver_metrics.delivery_failures_total == {"validation": 1}


async def test_undecodable_request_is_counted_not_answered() -> None:
    node = mailserver()
    peer = await requester(node)
    await protocol(node).handle(peer, c.P2P_REQUEST_CODE, b"\xc3\x01\x02\x03")
    await protocol(node).handle(peer, c.P2P_REQUEST_CODE, b"\x05")  # next request waits for the first
    encoded = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
    await ask(node, peer, encoded.payload)  # served after the two bad ones
    assert node.mailserver_metrics.delivery_failures_total == {"validation": 2}
    assert len(peer.of(c.P2P_REQUEST_COMPLETE_CODE)) == 1


async def test_rate_limited_second_request() -> None:
    clock = ManualClock()
    node = mailserver(clock=clock, request_rate_limit=5.0)
    peer = await requester(node)
    first = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
    second = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
    assert decode_completion((await ask(node, peer, first.payload))[0]).error is None
    refused = decode_completion((await ask(node, peer, second.payload))[0])
    assert refused.error == RATE_LIMIT_EXCEEDED and refused.request_id == second.request_id
    other = await requester(node)  # per peer: another peer is served
    assert decode_completion((await ask(node, other, second.payload))[0]).error is None
    clock.advance(5.1)
    assert decode_completion((await ask(node, peer, second.payload))[0]).error is None
    assert node.mailserver_metrics.delivery_failures_total == {"peer_req_limit": 1}


async def test_backend_failure_becomes_error() -> None:
    node = mailserver(FailingHistory("archive unavailable"))
    peer = await requester(node)
    encoded = encode_p2p_request(request(Dialect.SPEC_6_TOPICS), Dialect.SPEC_6_TOPICS, symmetric_key=KEY)
    status_go = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
    spec = decode_completion((await ask(node, peer, encoded.payload))[0])
    assert spec.form is CompletionForm.RLP_LIST and spec.cursor == b""  # NWAKU has no error form
    assert decode_completion((await ask(node, peer, status_go.payload))[0]).error == "archive unavailable"


class RaisingHistory(MemoryHistory):
    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        if query.request_id:
            raise RuntimeError("boom")
        yield HistoryFailure("unreachable")


async def test_backend_exception_becomes_error_and_worker_survives() -> None:
    node = mailserver(RaisingHistory())
    peer = await requester(node)
    for _ in range(2):
        encoded = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
        assert (
            decode_completion((await ask(node, peer, encoded.payload))[0]).error
            == "failed to process request"
        )
    assert node.mailserver_metrics.delivery_failures_total == {"iterator": 2}


async def test_the_backend_gets_the_request_as_sent() -> None:
    # No defaults applied and nothing guessed: upper 0 and limit 0 reach the backend as the peer's own
    # "use the default" (history-query binds its cursors to them); the backend applies the defaults.
    history = MemoryHistory(ARCHIVE)
    node = mailserver(history)
    peer = await requester(node)
    for upper in (0, NOW):
        sent = request(Dialect.STATUS_PLAIN, upper=upper, limit=0)
        encoded = encode_p2p_request(sent, Dialect.STATUS_PLAIN)
        await ask(node, peer, encoded.payload)
    defaulted, explicit = history.queries
    assert (defaulted.request.upper, defaulted.request.limit) == (0, 0)
    assert (explicit.request.upper, explicit.request.limit) == (NOW, 0)


# --- rate limit at receipt, and what every request ends as ------------------------------------------------


class GatedHistory(MemoryHistory):
    """MemoryHistory whose answers hold after their first batch until :attr:`gate` opens; counts closings."""

    def __init__(self) -> None:
        super().__init__(ARCHIVE)
        self.gate = asyncio.Event()
        self.closed = 0
        self.before_complete: Callable[[], None] | None = None

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        try:
            async for item in super().query(query):
                if isinstance(item, HistoryComplete) and self.before_complete is not None:
                    self.before_complete()
                yield item
                await self.gate.wait()
        finally:
            self.closed += 1


def small() -> bytes:
    """A valid request answered by two 0x7f packets (``Batch = false``: one envelope each) and a 0x7d."""
    dialect = Dialect.STATUS_ENVELOPE
    return encode_p2p_request(
        request(dialect, limit=2, batch=False), dialect, symmetric_key=KEY, signing_key=SIGNER
    ).payload


async def test_rate_limit_is_checked_against_the_receipt_time() -> None:
    """status-go checks the limit when a request arrives. A request that waited behind the previous one must
    not be charged for the wait: the next request, sent a period after it *arrived*, is served."""
    clock = ManualClock()
    history = GatedHistory()
    node = mailserver(history, clock, request_rate_limit=1.0)
    peer = await requester(node)
    handler = protocol(node)
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())  # Z at 1000: served, held open by the gate
    await peer.wait_code(c.P2P_MESSAGE_CODE)
    clock.advance(2.0)
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())  # A arrives at 1002, waits behind Z
    clock.advance(0.5)  # the worker gets to A only at 1002.5
    history.gate.set()
    await peer.wait_code(c.P2P_REQUEST_COMPLETE_CODE, 2)
    clock.advance(0.55)  # B arrives 1.05 s after A arrived (0.55 s after A was taken up)
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())
    completions = [decode_completion(p) for p in await peer.wait_code(c.P2P_REQUEST_COMPLETE_CODE, 3)]
    assert [done.error for done in completions] == [None, None, None]
    assert not node.mailserver_metrics.delivery_failures_total


async def test_a_request_that_arrived_within_the_period_is_refused_however_long_it_waited() -> None:
    """The receipt time is kept while the request waits, also across the limiter's pruning."""
    clock = ManualClock()
    history = GatedHistory()
    node = mailserver(history, clock, request_rate_limit=1.0)
    assert node.mailserver is not None
    peer = await requester(node)
    handler = protocol(node)
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())  # A at 1000, held open
    await peer.wait_code(c.P2P_MESSAGE_CODE)
    clock.advance(0.1)
    second = encode_p2p_request(request(Dialect.STATUS_PLAIN, limit=2), Dialect.STATUS_PLAIN)
    await handler.handle(peer, c.P2P_REQUEST_CODE, second.payload)  # B at 1000.1, queued
    clock.advance(5.0)
    node.mailserver.prune(clock.time())  # A's entry is stale by now, but B still has to be checked
    history.gate.set()
    first_done, refused = (decode_completion(p) for p in await peer.wait_code(c.P2P_REQUEST_COMPLETE_CODE, 2))
    assert first_done.error is None
    assert refused.error == RATE_LIMIT_EXCEEDED and refused.request_id == second.request_id
    assert node.mailserver_metrics.delivery_failures_total == {"peer_req_limit": 1}
    node.mailserver.prune(clock.time())
    assert len(node.mailserver.limiter) == 0  # nothing waits any more: forgotten


async def test_a_requester_leaving_mid_answer_is_counted_as_peer_gone() -> None:
    history = GatedHistory()
    node = mailserver(history)
    peer = await requester(node)
    await protocol(node).handle(peer, c.P2P_REQUEST_CODE, small())
    await peer.wait_code(c.P2P_MESSAGE_CODE)  # first 0x7f written, the second is pending
    peer.disconnected.append(0x01)  # the connection is gone: the next write fails
    history.gate.set()
    await wait_for(lambda: history.closed == 1)
    metrics = node.mailserver_metrics
    assert metrics.delivery_attempts_total == 1
    assert metrics.delivery_failures_total == {PEER_GONE: 1}


async def test_a_session_closed_while_its_answer_is_prepared_is_counted_and_freed() -> None:
    """The node cancels the worker when the session ends; the request counts once (peer_gone), the backend is
    closed, and the session is freed by reference counting (worker task ↔ session is no cycle)."""
    history = GatedHistory()
    node = mailserver(history)
    peer = await requester(node)
    handler = protocol(node)
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())
    await handler.handle(peer, c.P2P_REQUEST_CODE, small())  # queued: never taken up
    await peer.wait_code(c.P2P_MESSAGE_CODE)
    session = node.session_for(peer, handler)
    assert session is not None and session.request_worker is not None
    worker, ref = session.request_worker, weakref.ref(session)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        del session
        peer.disconnected.append(0x10)
        await handler.on_stop(peer, 0x10)
        with contextlib.suppress(asyncio.CancelledError):
            await worker  # (not asyncio.gather: its future and callbacks form a cycle holding the task)
        assert worker.cancelled() and history.closed == 1
        del worker
        await wait_for(lambda: ref() is None)  # once the loop has let go of the task's last callback
    finally:
        if was_enabled:
            gc.enable()
    metrics = node.mailserver_metrics
    assert metrics.delivery_attempts_total == 1 and metrics.delivery_failures_total == {PEER_GONE: 1}
    assert node.mailserver is not None and not node.mailserver._unchecked


async def test_an_unsendable_final_completion_is_counted_once() -> None:
    history = GatedHistory()
    history.gate.set()
    node = mailserver(history)
    peer = await requester(node)

    def leave() -> None:
        peer.fail_sends = True

    history.before_complete = leave  # every 0x7f went out; the 0x7d cannot
    await protocol(node).handle(peer, c.P2P_REQUEST_CODE, small())
    await wait_for(lambda: history.closed == 1)
    assert len(peer.of(c.P2P_MESSAGE_CODE)) == 2
    assert node.mailserver_metrics.delivery_failures_total == {"historic_msg_resp": 1}


async def test_a_refusal_that_cannot_be_sent_keeps_its_one_type() -> None:
    node = mailserver()
    peer = await requester(node)
    peer.fail_sends = True
    invalid = encode_p2p_request(
        request(Dialect.STATUS_PLAIN, lower=NOW, upper=NOW - 1), Dialect.STATUS_PLAIN
    )
    await protocol(node).handle(peer, c.P2P_REQUEST_CODE, invalid.payload)
    await wait_for(lambda: node.mailserver_metrics.delivery_attempts_total == 1)
    await wait_for(lambda: not node._sessions[(peer.remote_id, "waku")].request_worker)
    assert node.mailserver_metrics.delivery_failures_total == {"validation": 1}


async def wait_for(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    """Poll ``condition`` (bounded): the worker runs in its own task."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)
