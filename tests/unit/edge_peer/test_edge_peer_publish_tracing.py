"""Trace context on the edge peer: each published envelope that carries a ``traceparent`` gets a ``publish
envelope`` span in its own trace, linked to the call that carried it; a history request's span records its
outcome before it ends, whatever the outcome (no "Setting attribute on ended span")."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mailmesh.edgepeer.v1 import edgepeer_pb2
from meshcore.errors import InvalidArgument, MeshError, ResourceExhausted, Unavailable
from meshcore.tracing import parse_traceparent, traceparent
from services.edge_peer.logic import EdgePeer
from services.edge_peer.mailserver_bridge import MailserverBridge
from services.edge_peer.servicer import EdgePeerServicer
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.validation import EnvelopeFault
from wakunode.ports import HistoryBatch, HistoryComplete, HistoryItem, MailserverQuery
from wakunode.publish import PublishResult, PublishStatus

TRACE_A = "00-" + "a1" * 16 + "-" + "b2" * 8 + "-01"
TRACE_B = "00-" + "c3" * 16 + "-" + "d4" * 8 + "-01"


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def test_a_traceparent_round_trips_and_a_bad_one_is_none() -> None:
    parsed = parse_traceparent(TRACE_A)
    assert parsed is not None and parsed.is_remote
    assert (parsed.trace_id, parsed.span_id) == (int("a1" * 16, 16), int("b2" * 8, 16))
    assert traceparent(parsed) == TRACE_A
    assert [parse_traceparent(v) for v in ("", "garbage", "00-" + "0" * 32 + "-" + "b2" * 8 + "-01")] == [
        None,
        None,
        None,  # an all-zero trace id is invalid (Trace Context, "trace-id")
    ]
    assert traceparent(trace.INVALID_SPAN_CONTEXT) == ""


class FakeNode:
    """What EdgePeer.publish needs of a WakuNode: one result per envelope (REJECTED for b"bad")."""

    def __init__(self) -> None:
        self.fail: Exception | None = None
        self.config = SimpleNamespace(max_message_size=1 << 20)

    def attach(self, directory: object) -> None:
        """EdgePeer attaches its trust directory."""

    async def publish(
        self, envelopes: Sequence[bytes], *, ephemeral: bool, relay_timeout: float
    ) -> list[PublishResult]:
        if self.fail is not None:
            raise self.fail
        return [
            PublishResult(raw.ljust(32, b"."), PublishStatus.REJECTED, 0, EnvelopeFault.EXPIRED, "expired")
            if raw == b"bad"
            else PublishResult(raw.ljust(32, b"."), PublishStatus.PUBLISHED, 2)
            for raw in envelopes
        ]


class FakeServer:
    def set_trusted(self, pubkey: bytes, trusted: bool) -> None:
        """Unused."""

    def is_trusted(self, pubkey: bytes) -> bool:
        """Unused."""
        return False


def _edge(node: FakeNode, provider: TracerProvider) -> EdgePeer:
    return EdgePeer(
        cast(Any, node),
        cast(Any, FakeServer()),
        cast(Any, None),
        cast(Any, None),
        None,
        instance="test",
        tracer_provider=provider,
    )


async def test_each_traced_envelope_gets_a_span_in_its_own_trace_linked_to_the_call(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    edge = _edge(FakeNode(), provider)
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("the Publish call") as call:
        results = await edge.publish(
            [b"one", b"two", b"bad", b"four"],
            ephemeral=False,
            relay_timeout=1.0,
            traceparents=[TRACE_A, "", TRACE_B],  # "two" has none, "four" is past the list
        )
    assert len(results) == 4
    published = [s for s in exporter.get_finished_spans() if s.name == "publish envelope"]
    assert [_ids(s.parent) for s in published] == [
        _ids(parse_traceparent(TRACE_A)),
        _ids(parse_traceparent(TRACE_B)),
    ]
    assert all(s.context.trace_id == s.parent.trace_id for s in published if s.parent)
    assert [[_ids(link.context) for link in s.links] for s in published] == [
        [_ids(call.get_span_context())]
    ] * 2
    first, bad = (dict(s.attributes or {}) for s in published)
    assert first == {
        "mailmesh.envelope_hash": b"one".ljust(32, b".").hex(),
        "mailmesh.publish_status": "published",
        "mailmesh.relayed_to": 2,
    }
    assert bad["mailmesh.publish_status"] == "rejected" and bad["mailmesh.relayed_to"] == 0
    assert [s.status.status_code for s in published] == [trace.StatusCode.UNSET, trace.StatusCode.ERROR]


async def test_envelope_spans_end_when_the_publish_fails(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    node = FakeNode()
    node.fail = RuntimeError("node stopped")
    with pytest.raises(RuntimeError):
        await _edge(node, provider).publish(
            [b"one"], ephemeral=False, relay_timeout=1.0, traceparents=[TRACE_A]
        )
    [span] = exporter.get_finished_spans()
    assert span.name == "publish envelope" and span.status.status_code is trace.StatusCode.ERROR


async def test_publish_takes_at_most_one_traceparent_per_envelope(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    servicer = EdgePeerServicer(_edge(FakeNode(), provider), stream_queue=1, stream_queue_bytes=1)
    with pytest.raises(InvalidArgument) as refused:
        await servicer.Publish(
            edgepeer_pb2.PublishRequest(envelopes=[b"one"], traceparents=[TRACE_A, TRACE_B]), None
        )
    assert refused.value.message.startswith("traceparents:")
    reply = await servicer.Publish(
        edgepeer_pb2.PublishRequest(envelopes=[b"one"], traceparents=[TRACE_B]), None
    )
    assert [r.relayed_to for r in reply.results] == [2]
    [span] = exporter.get_finished_spans()
    assert span.parent is not None and _ids(span.parent) == _ids(parse_traceparent(TRACE_B))


def _ids(context: trace.SpanContext | None) -> tuple[int, int]:
    assert context is not None
    return context.trace_id, context.span_id


# ------------------------------------------------------------------------------------ history request span


class Port:
    """history-query's stream: ``items``, then ``error`` raised (if any)."""

    def __init__(self, items: list[HistoryBatch | HistoryComplete], error: Exception | None = None) -> None:
        self.items, self.error = items, error

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryBatch | HistoryComplete]:
        for item in self.items:
            yield item
        if self.error is not None:
            raise self.error


def _query() -> MailserverQuery:
    return MailserverQuery(
        request=HistoryRequest(10, 20, None, (b"\x01\x02\x03\x04",), 100),
        dialect=Dialect.STATUS_PLAIN,
        request_id=b"r" * 32,
        requester_id=b"p" * 32,
        max_batch_bytes=5000,
        max_batch_envelopes=0,
    )


def _outcome(span: ReadableSpan) -> object:
    return (span.attributes or {}).get("mailmesh.outcome")


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (InvalidArgument("invalid cursor"), "invalid"),
        (ResourceExhausted("slow down"), "rate_limited"),
        (Unavailable("archive down"), "failed"),
        (RuntimeError("bug"), "failed"),
        (None, "failed"),  # a stream that ended without its completion
    ],
)
async def test_a_failed_history_request_records_its_outcome_on_its_span(
    spans: tuple[TracerProvider, InMemorySpanExporter],
    caplog: pytest.LogCaptureFixture,
    error: MeshError | None,
    outcome: str,
) -> None:
    provider, exporter = spans
    bridge = MailserverBridge(Port([HistoryBatch([b"a"])], error), provider)
    with caplog.at_level(logging.WARNING):
        try:
            _ = [item async for item in bridge.query(_query())]
        except RuntimeError:
            assert outcome == "failed"
    [span] = exporter.get_finished_spans()
    assert span.name == "mailserver request" and _outcome(span) == outcome
    assert bridge.outcomes == {outcome: 1}
    assert not [r for r in caplog.records if "ended span" in r.getMessage()]


async def test_complete_and_abandoned_history_requests_record_their_outcome(
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    done = HistoryComplete(b"", b"h" * 32)
    bridge = MailserverBridge(Port([HistoryBatch([b"a"]), done]), provider)
    assert [item async for item in bridge.query(_query())][-1] == done
    stream = cast(AsyncGenerator[HistoryItem, None], bridge.query(_query()))
    assert await anext(stream) == HistoryBatch([b"a"])
    await stream.aclose()  # the requester left
    assert [_outcome(s) for s in exporter.get_finished_spans()] == ["complete", "abandoned"]
