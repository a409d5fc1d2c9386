"""0x7e over loopback RLPx → HistoryQueryService.Query (fake) → 0x7f/0x7d, in every dialect; error texts."""

from __future__ import annotations

import time

import grpc
import pytest

from tests.integration.edge_peer.edge_peer_support import Edge, FakeHistory, envelopes, request_client
from wakucodec.bloom import topics_to_bloom
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.errors import RequestFailed

TOPIC_A = b"\xaa\x00\x00\x01"
TOPIC_B = b"\xbb\x00\x00\x02"
TOPIC_DIALECTS = {Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE, Dialect.SPEC_6_TOPICS}


@pytest.mark.parametrize("dialect", list(Dialect), ids=lambda d: d.value)
async def test_every_dialect_pages_through_history(
    edge: Edge, history: tuple[FakeHistory, str], dialect: Dialect
) -> None:
    fake, _ = history
    wanted = envelopes(25, topic=TOPIC_A)
    fake.store.add(wanted + envelopes(10, topic=TOPIC_B, first=500))
    now = int(time.time())
    if dialect in TOPIC_DIALECTS:
        request = HistoryRequest(now - 60, now + 60, None, (TOPIC_A,), 10)
    else:
        request = HistoryRequest(now - 60, now + 60, topics_to_bloom([TOPIC_A]), (), 10)
    async with request_client() as client:
        info = await client.connect(edge.enode)
        walk = client.follow_cursor(info.pubkey, request, dialect, password="status-offline-inbox")
        got = [env async for env in walk]
    assert [e.raw for e in got] == [e.raw for e in sorted(wanted, key=lambda e: (e.sent, e.hash))]
    assert len(walk.pages) == 3 and walk.pages[-1].cursor == b""
    sent = fake.requests[0]
    assert sent.limit == 10 and sent.requester_peer_id and len(sent.request_id) == 32
    assert sent.max_batch_bytes == edge.cfg.max_message_size - 9
    assert edge.metric("mailserver_delivery_attempts_total") == 3
    assert edge.metric("mailserver_envelopes_total") == 25
    assert edge.metric("edge_history_requests_total", {"outcome": "complete"}) == 3


@pytest.mark.parametrize(
    ("code", "text", "expected"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "invalid cursor", "request is invalid: invalid cursor"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limited", "rate limit exceeded"),
        (grpc.StatusCode.UNAVAILABLE, "archive down", "failed to process request"),
    ],
)
async def test_history_failures_become_error_completions(
    edge: Edge, history: tuple[FakeHistory, str], code: grpc.StatusCode, text: str, expected: str
) -> None:
    fake, _ = history
    fake.fail = (code, text)
    now = int(time.time())
    async with request_client() as client:
        info = await client.connect(edge.enode)
        page = client.request_history(
            info.pubkey, HistoryRequest(now - 60, now, None, (TOPIC_A,)), Dialect.STATUS_PLAIN
        )
        with pytest.raises(RequestFailed) as err:
            _ = [e async for e in page]
    assert err.value.text == expected


async def test_invalid_requests_are_answered_without_asking_history(
    edge: Edge, history: tuple[FakeHistory, str]
) -> None:
    fake, _ = history
    async with request_client() as client:
        info = await client.connect(edge.enode)
        undecodable = client.request_history(
            info.pubkey,
            HistoryRequest(1, 2, None, (TOPIC_A,)),
            Dialect.STATUS_ENVELOPE,
            password="wrong",  # the edge peer cannot open it: ERROR= with the envelope hash as ID
        )
        with pytest.raises(RequestFailed) as refused:
            _ = [e async for e in undecodable]
        assert "decrypt" in refused.value.text
        page = client.request_history(
            info.pubkey, HistoryRequest(200, 100, None, (TOPIC_A,)), Dialect.STATUS_PLAIN
        )
        with pytest.raises(RequestFailed) as err:
            _ = [e async for e in page]
    assert err.value.text == "request is invalid: query range is invalid: lower > upper"
    assert fake.requests == []
    assert edge.metric("mailserver_delivery_failures_total", {"type": "validation"}) == 2
