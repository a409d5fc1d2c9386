"""0x7e handling with in-memory peers and the in-memory backend: every dialect's 0x7f and 0x7d forms,
bundling under the max message size, ERROR= texts, the per-peer request rate limit, backend failures."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
from wakunode.mailserver import RATE_LIMIT_EXCEEDED
from wakunode.memory import FailingHistory, MemoryHistory
from wakunode.node import WakuNode
from wakunode.options import StatusOptions
from wakunode.ports import HistoryBackend, HistoryFailure, HistoryItem, HistoryQuery
from wakunode.protocol import encode_status

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
    async def query(self, query: HistoryQuery) -> AsyncIterator[HistoryItem]:
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


async def test_requested_upper_passed_for_cursor_binding() -> None:
    history = MemoryHistory(ARCHIVE)
    node = mailserver(history)
    peer = await requester(node)
    for upper in (0, NOW):
        encoded = encode_p2p_request(request(Dialect.STATUS_PLAIN, upper=upper), Dialect.STATUS_PLAIN)
        await ask(node, peer, encoded.payload)
    defaulted, explicit = history.queries
    assert defaulted.request.upper == NOW + 60 and defaulted.requested_upper == 0
    assert explicit.request.upper == NOW and explicit.requested_upper is None
