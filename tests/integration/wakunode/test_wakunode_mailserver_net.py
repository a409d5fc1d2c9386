"""A mailserver node with the in-memory backend answering our client over loopback in every request
dialect (protocol-notes §4.1), with the right 0x7f and 0x7d forms; cursors across pages; ERROR= answers;
rate limiting."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.integration.wakunode.support import FAST, envelopes, running_client, running_node, wait_until
from wakucodec import secp
from wakucodec.bloom import topics_to_bloom
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.responses import CompletionForm
from wakunode.client import CLIENT_CONFIG, HistoryPage
from wakunode.config import MailserverConfig
from wakunode.errors import RequestFailed
from wakunode.mailserver import RATE_LIMIT_EXCEEDED
from wakunode.memory import MemoryHistory

PASSWORD = "status-offline-inbox"
NOW = int(time.time())
ARCHIVE = [
    *envelopes(30, topic=b"aaaa", sent=NOW - 500, size=256),
    *envelopes(30, topic=b"bbbb", sent=NOW - 400, size=256, first=100),
]
#: What a query for topic aaaa returns, in archive order (sent time, then hash).
WANTED = sorted((e for e in ARCHIVE if e.topic == b"aaaa"), key=lambda e: (e.sent, e.hash))
SERVER_KEY = secp.generate_private_key()
MAILSERVER = MailserverConfig(passwords=(PASSWORD,), private_key=SERVER_KEY)


def request_for(dialect: Dialect, **fields: object) -> HistoryRequest:
    base: dict[str, object] = {"lower": NOW - 1000, "upper": NOW, "limit": 12}
    if dialect in (Dialect.SPEC_5, Dialect.GETH_BINARY, Dialect.STATUS_LEGACY_6):
        base["bloom"] = topics_to_bloom([b"aaaa"])  # dialects without topics
    else:
        base["topics"] = (b"aaaa",)
    base.update(fields)
    return HistoryRequest(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dialect", "client_caps", "message_form", "completion_form", "packets"),
    [
        (Dialect.STATUS_PLAIN, ("waku/1",), "list", CompletionForm.CONCATENATED, 1),
        (Dialect.STATUS_ENVELOPE, ("waku/1",), "list", CompletionForm.CONCATENATED, 1),
        (Dialect.STATUS_LEGACY_6, ("waku/0",), "list", CompletionForm.CONCATENATED, 1),
        (Dialect.SPEC_5, ("waku/1",), "list", CompletionForm.RLP_LIST, 1),
        (Dialect.SPEC_6_TOPICS, ("waku/1",), "list", CompletionForm.RLP_LIST, 1),
        (Dialect.GETH_BINARY, ("waku/1",), "list", CompletionForm.CONCATENATED, 12),
        (Dialect.GETH_BINARY, ("shh/6",), "single", CompletionForm.CONCATENATED, 12),
    ],
)
async def test_every_dialect(
    dialect: Dialect,
    client_caps: tuple[str, ...],
    message_form: str,
    completion_form: CompletionForm,
    packets: int,
) -> None:
    config = CLIENT_CONFIG.__class__(topic_interest=(), capabilities=client_caps)
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=MAILSERVER) as server,
        running_client(config) as client,
    ):
        info = await client.connect(server.enode)
        assert info.capability == client_caps[0] and info.trusted
        page = client.request_history(
            server.pubkey, request_for(dialect), dialect, password=PASSWORD, timeout=10
        )
        got = [e async for e in page]
        assert [e.hash for e in got] == [e.hash for e in WANTED[:12]]
        assert page.completion is not None and page.completion.form is completion_form
        assert page.completion.request_id == page.request_id
        assert page.completion.last_envelope_hash == WANTED[11].hash
        assert len(page.completion.cursor) == 36
        assert client.node.metrics.p2p_messages_received_total == {message_form: packets}
        assert server.node.mailserver_metrics.envelopes_total == 12


async def test_asymmetric_request_to_the_server_key() -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=MAILSERVER) as server,
        running_client() as client,
    ):
        await client.connect(server.enode)
        page = client.request_history(
            server.pubkey,
            request_for(Dialect.STATUS_ENVELOPE),
            Dialect.STATUS_ENVELOPE,
            public_key=secp.public_key(SERVER_KEY),
        )
        assert len([e async for e in page]) == 12


@pytest.mark.parametrize("dialect", [Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE, Dialect.GETH_BINARY])
async def test_cursor_followed_across_pages(dialect: Dialect) -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=MAILSERVER) as server,
        running_client() as client,
    ):
        await client.connect(server.enode)
        walk = client.follow_cursor(server.pubkey, request_for(dialect, limit=7), dialect, password=PASSWORD)
        got = [e async for e in walk]
        assert [e.hash for e in got] == [e.hash for e in WANTED]
        assert [len(p.cursor) for p in walk.pages] == [36, 36, 36, 36, 0]  # 7+7+7+7+2
        assert server.node.mailserver_metrics.delivery_attempts_total == 5


async def test_invalid_request_gets_error() -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=MAILSERVER) as server,
        running_client() as client,
    ):
        await client.connect(server.enode)
        bad = request_for(Dialect.STATUS_PLAIN, lower=NOW, upper=NOW - 10)
        with pytest.raises(RequestFailed) as info:
            [e async for e in client.request_history(server.pubkey, bad, Dialect.STATUS_PLAIN)]
        assert info.value.text == "request is invalid: query range is invalid: lower > upper"
        wrong_key = client.request_history(
            server.pubkey, request_for(Dialect.STATUS_ENVELOPE), Dialect.STATUS_ENVELOPE, password="wrong"
        )
        with pytest.raises(RequestFailed, match="failed to decrypt p2p request"):
            [e async for e in wrong_key]
        ok = client.request_history(server.pubkey, request_for(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
        assert len([e async for e in ok]) == 12  # the session is still fine


async def test_rate_limited_second_request() -> None:
    limited = MailserverConfig(passwords=(PASSWORD,), request_rate_limit=60.0)
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=limited) as server,
        running_client() as client,
        running_client() as other,
    ):
        await client.connect(server.enode)
        await other.connect(server.enode)
        first = client.request_history(server.pubkey, request_for(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
        assert len([e async for e in first]) == 12
        second = client.request_history(
            server.pubkey, request_for(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN
        )
        with pytest.raises(RequestFailed) as info:
            [e async for e in second]
        assert info.value.text == RATE_LIMIT_EXCEEDED and info.value.request_id == second.request_id
        third = other.request_history(server.pubkey, request_for(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
        assert len([e async for e in third]) == 12  # the limit is per peer
        assert server.node.mailserver_metrics.delivery_failures_total == {"peer_req_limit": 1}


async def test_untrusted_mailserver_answers_are_ignored() -> None:
    async with (
        running_node(FAST, MemoryHistory(ARCHIVE), mailserver=MAILSERVER) as server,
        running_client() as client,
    ):
        await client.connect(server.enode, trust=False)
        page = client.request_history(server.pubkey, request_for(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
        consumer = asyncio.ensure_future(_drain(page))
        rejected = client.node.metrics.envelopes_rejected_total
        await wait_until(lambda: rejected["untrusted_p2p"] == 2, what="one 0x7f and one 0x7d dropped")
        assert not consumer.done() and page.received == 0
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer


async def _drain(page: HistoryPage) -> int:
    return len([e async for e in page])
