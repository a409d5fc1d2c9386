"""Pure translations: history failures → 0x7d texts, MailserverQuery → HistoryQueryRequest, publish results
and StreamEnvelopes filters → protos."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2
from meshcore.errors import DeadlineExceeded, InvalidArgument, MeshError, ResourceExhausted, Unavailable
from services.edge_peer.clients import to_history_request
from services.edge_peer.feed import LiveEnvelope
from services.edge_peer.mailserver_bridge import MailserverBridge
from services.edge_peer.servicer import subscription_filter, to_publish_result, to_received
from wakucodec.bloom import FULL_BLOOM
from wakucodec.envelope import make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.validation import EnvelopeFault
from wakunode.ports import HistoryBatch, HistoryComplete, HistoryFailure, HistoryItem, MailserverQuery
from wakunode.publish import PublishResult, PublishStatus

TOPIC = b"\x01\x02\x03\x04"


def _query(**kw: object) -> MailserverQuery:
    request = kw.pop("request", HistoryRequest(10, 20, None, (TOPIC,), 100, b"c" * 36))
    return MailserverQuery(
        request=request,  # type: ignore[arg-type]
        dialect=Dialect.STATUS_PLAIN,
        request_id=b"r" * 32,
        requester_id=b"p" * 32,
        max_batch_bytes=5000,
        max_batch_envelopes=0,
    )


class Port:
    def __init__(self, items: list[HistoryBatch | HistoryComplete], error: MeshError | None = None) -> None:
        self.items, self.error = items, error
        self.closed = False

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        try:
            for item in self.items:
                yield item
            if self.error is not None:
                raise self.error
        finally:
            self.closed = True


async def _run(port: Port) -> tuple[list[HistoryItem], MailserverBridge]:
    adapter = MailserverBridge(port)
    return [item async for item in adapter.query(_query())], adapter


async def test_batches_and_completion_pass_through() -> None:
    done = HistoryComplete(b"n" * 36, b"h" * 32)
    items, adapter = await _run(Port([HistoryBatch([b"a"]), done]))
    assert items == [HistoryBatch([b"a"]), done] and adapter.outcomes == {"complete": 1}


@pytest.mark.parametrize(
    ("error", "text", "outcome"),
    [
        (InvalidArgument("invalid cursor"), "request is invalid: invalid cursor", "invalid"),
        (ResourceExhausted("slow down"), "rate limit exceeded", "rate_limited"),
        (Unavailable("archive down"), "failed to process request", "failed"),
        (DeadlineExceeded(), "failed to process request", "failed"),
    ],
)
async def test_failures_become_error_texts(error: MeshError, text: str, outcome: str) -> None:
    port = Port([HistoryBatch([b"a"])], error)
    items, adapter = await _run(port)
    assert items == [HistoryBatch([b"a"]), HistoryFailure(text)]
    assert adapter.outcomes == {outcome: 1} and port.closed


async def test_a_stream_without_completion_is_a_failure() -> None:
    items, adapter = await _run(Port([HistoryBatch([b"a"])]))
    assert items[-1] == HistoryFailure("failed to process request") and adapter.outcomes == {"failed": 1}


class SlowPort(Port):
    """Yields its items, then waits for history-query's next message forever (:attr:`waiting` set)."""

    def __init__(self, items: list[HistoryBatch | HistoryComplete]) -> None:
        super().__init__(items)
        self.waiting = asyncio.Event()

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        try:
            for item in self.items:
                yield item
            self.waiting.set()
            await asyncio.Event().wait()
            yield HistoryComplete(b"", b"h" * 32)  # pragma: no cover - never reached
        finally:
            self.closed = True


async def test_a_query_closed_before_its_completion_is_abandoned() -> None:
    """The node closes the iterator when the requester leaves or the request times out."""
    port = SlowPort([HistoryBatch([b"a"]), HistoryBatch([b"b"])])
    adapter = MailserverBridge(port)
    stream = cast(AsyncGenerator[HistoryItem, None], adapter.query(_query()))
    assert await anext(stream) == HistoryBatch([b"a"])
    await stream.aclose()
    assert adapter.outcomes == {"abandoned": 1} and port.closed


async def test_a_query_cancelled_while_waiting_for_history_is_abandoned() -> None:
    port = SlowPort([HistoryBatch([b"a"])])
    adapter = MailserverBridge(port)

    async def consume() -> None:
        async for _ in adapter.query(_query()):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(port.waiting.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert adapter.outcomes == {"abandoned": 1} and port.closed


async def test_a_completion_closed_right_after_is_only_complete() -> None:
    done = HistoryComplete(b"", b"h" * 32)
    adapter = MailserverBridge(Port([HistoryBatch([b"a"]), done]))
    stream = cast(AsyncGenerator[HistoryItem, None], adapter.query(_query()))
    assert [await anext(stream), await anext(stream)] == [HistoryBatch([b"a"]), done]
    await stream.aclose()  # what the node does after the completion
    assert adapter.outcomes == {"complete": 1}


async def test_an_unexpected_port_error_is_a_failure() -> None:
    class Broken(Port):
        async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
            yield HistoryBatch([b"a"])
            raise RuntimeError("bug")

    adapter = MailserverBridge(Broken([]))
    with pytest.raises(RuntimeError):
        _ = [item async for item in adapter.query(_query())]
    assert adapter.outcomes == {"failed": 1}


def test_history_request_translation() -> None:
    msg = to_history_request(_query())
    assert (msg.lower, msg.upper, msg.limit, msg.cursor) == (10, 20, 100, b"c" * 36)
    assert list(msg.topics) == [TOPIC] and msg.bloom == b""
    assert msg.max_batch_bytes == 5000 and msg.requester_peer_id == b"p" * 32 and msg.request_id == b"r" * 32
    by_bloom = to_history_request(_query(request=HistoryRequest(1, 2, FULL_BLOOM, (), 5)))
    assert by_bloom.bloom == FULL_BLOOM and not by_bloom.topics


def test_the_request_is_forwarded_as_the_peer_sent_it() -> None:
    # history-query binds cursors to the requested query ("now + 60" would differ on the next page) and is the
    # one place that applies defaults: upper 0, limit 0, a limit above 1000 and a bloom beside topics pass.
    as_sent = HistoryRequest(10, 0, FULL_BLOOM, (TOPIC,), 0, b"")
    msg = to_history_request(_query(request=as_sent))
    assert (msg.lower, msg.upper, msg.limit, msg.bloom, list(msg.topics)) == (10, 0, 0, FULL_BLOOM, [TOPIC])
    assert to_history_request(_query(request=HistoryRequest(10, 20, None, (TOPIC,), 5000))).limit == 5000
    assert to_history_request(_query()).upper == 20


def test_publish_results() -> None:
    h = b"h" * 32
    ok = to_publish_result(PublishResult(h, PublishStatus.PUBLISHED, 2))
    assert (ok.status, ok.relayed_to, ok.fault, ok.error) == (
        edgepeer_pb2.PUBLISH_STATUS_PUBLISHED,
        2,
        common_pb2.ENVELOPE_FAULT_UNSPECIFIED,
        "",
    )
    low = to_publish_result(
        PublishResult(h, PublishStatus.REJECTED, fault=EnvelopeFault.LOW_POW, error="x" * 400)
    )
    assert low.fault == common_pb2.ENVELOPE_FAULT_LOW_POW and len(low.error) == 256
    bad = to_publish_result(PublishResult(b"", PublishStatus.REJECTED, error="malformed envelope"))
    assert bad.fault == common_pb2.ENVELOPE_FAULT_MALFORMED
    none = to_publish_result(PublishResult(h, PublishStatus.NO_PEERS))
    assert none.status == edgepeer_pb2.PUBLISH_STATUS_NO_PEERS and none.error


def test_subscription_filters() -> None:
    f = subscription_filter(edgepeer_pb2.StreamEnvelopesRequest(topics=[TOPIC], bloom=FULL_BLOOM))
    assert f.topics == {TOPIC} and f.bloom is None and not f.include_local
    f = subscription_filter(edgepeer_pb2.StreamEnvelopesRequest(bloom=FULL_BLOOM, include_local=True))
    assert f.bloom == FULL_BLOOM and f.include_local
    for bad in (
        edgepeer_pb2.StreamEnvelopesRequest(topics=[b"abc"]),
        edgepeer_pb2.StreamEnvelopesRequest(bloom=b"x" * 10),
        edgepeer_pb2.StreamEnvelopesRequest(topics=[TOPIC] * 10001),
    ):
        with pytest.raises(InvalidArgument):
            subscription_filter(bad)


def test_received_envelope() -> None:
    env = make_envelope(expiry=1000, ttl=100, topic=TOPIC, data=b"payload", nonce=7)
    msg = to_received(LiveEnvelope(env, None, 12.5, 3, ephemeral=True))
    assert msg.envelope.rlp == env.raw and msg.envelope.hash == env.hash and msg.envelope.data == b"payload"
    assert (msg.envelope.sent, msg.envelope.expiry, msg.envelope.nonce) == (900, 1000, 7)
    assert msg.local and msg.ephemeral and msg.sequence == 3 and msg.source_peer_id == b""
    assert (msg.received_at.seconds, msg.received_at.nanos) == (12, 500_000_000)
