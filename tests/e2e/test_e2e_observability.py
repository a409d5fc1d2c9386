"""Observability end to end: the whole mesh as processes (archive, ingest, history, edge peer, health, send,
subscription, gateway), every service exporting spans over OTLP to a receiver in this test, and one real
wakunode RLPx peer driving a little traffic: it posts envelopes, asks for their history over RLPx (0x7e), and
receives what a ``SendService.Send`` and a REST ``POST /send`` to the gateway publish.

- Every service's ``/metrics`` has the go-grpc-prometheus server set, every service that calls another has the
  client set with samples, and every metric a dashboard panel or an alert rule names (parsed as PromQL) is
  exported by the service its ``job`` matcher selects; the catalogue in docs/operations.md "Metrics" lists
  exactly what each service exports.
- The history request is ONE trace: the edge peer's ``mailserver request`` span → history-query → archive.
- The Send is ONE trace: the Send call → the send attempt (a background task) → the edge peer's span for its
  envelope. The Publish call that carried the envelope may carry other attempts' envelopes too: it is a trace
  of its own (``send publish batch`` → the call on both sides) that links to the attempt, and the envelope's
  span links to the call.
- The REST ``POST /send`` is ONE trace: the gateway's HTTP request → its Send call → the same chain.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio
import httpx
import pytest
import yaml
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshharness import CATALOG, FreePorts, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from tests.e2e.e2e_rlpx_support import START_DEADLINE_S, STOP_GRACE_S, _enode, archived, assert_clean_stop
from tests.integration.edge_peer.edge_peer_support import envelopes, relay_client
from tools.dashboards import DASHBOARD, expressions
from tools.dashboards.selectors import PROMETHEUS_SERIES, selectors, services_of
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.memory import MemorySink

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "mailmesh" / "files" / "prometheus" / "alerts.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
TOPIC = b"\x0b\x5e\x7e\x01"
BRIDGED = "/waku/1/0x0b5e7e01/rfc26"
WAIT_S = 120.0  # one bound per wait; the awaited events end each wait
SERVICES = ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription", "gateway"]
GRPC_SERVER = ["started_total", "handled_total", "msg_received_total", "msg_sent_total", "handling_seconds"]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a private event loop (the fixtures are synchronous and module-scoped)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


@dataclass(frozen=True)
class Received:
    """One span as the receiver got it, with the ``service.name`` of the process that sent it."""

    service: str
    span: Span

    @property
    def parent(self) -> bytes:
        return bytes(self.span.parent_span_id)


class OtlpReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP/gRPC trace collector in the test process: keeps every span it is sent."""

    def __init__(self) -> None:
        self.spans: list[Received] = []
        self._changed = threading.Condition()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        """Keep the spans of one export call."""
        with self._changed:
            for resource_spans in request.resource_spans:
                attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    self.spans += [Received(attrs.get("service.name", ""), s) for s in scope.spans]
            self._changed.notify_all()
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, found: Callable[[list[Received]], T | None], what: str) -> T:
        """Wait until ``found(spans)`` returns something (the services export every 100 ms)."""
        deadline = time.monotonic() + WAIT_S
        with self._changed:
            while (result := found(list(self.spans))) is None:
                left = deadline - time.monotonic()
                assert left > 0, (
                    f"timed out waiting for {what}: {[(r.service, r.span.name) for r in self.spans]}"
                )
                self._changed.wait(left)
            return result


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[OtlpReceiver, int]]:
    collector = OtlpReceiver()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield collector, port
    server.stop(0)


@pytest.fixture(scope="module")
def mesh(
    receiver: tuple[OtlpReceiver, int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessMesh]:
    state = tmp_path_factory.mktemp("observability-mesh")
    secret = state / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text("33" * 32 + "\n")
    secret.chmod(0o600)
    # Every service exports its spans to the receiver, in batches sent every 100 ms (the SDK's own variable).
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver[1]}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    env: dict[str, dict[str, str]] = {name: dict(otel) for name in SERVICES}
    env["archive"]["ARCHIVE_BACKEND"] = "sqlite"
    env["ingest"]["INGEST_MIN_POW"] = "0"
    env["edge_peer"]["EDGE_MIN_POW"] = "0"
    env["health"].update(  # one RLPx peer makes the node MinimallyHealthy: the Send is not paused
        {"HEALTH_MINIMALLY_HEALTHY_PEERS": "1", "HEALTH_HEALTHY_PEERS": "1", "HEALTH_HOLD_SECONDS": "0"}
    )
    for name in ("send", "subscription"):
        env[name]["MSGSTORE_BACKEND"] = "sqlite"

    def specs() -> list[ServiceSpec]:
        return plan(SERVICES, ports=FreePorts(), state_dir=state, env=env)

    # Eight services starting at once on a loaded two-core machine: three times the usual deadline.
    processes = start_mesh(specs, timeout=3 * START_DEADLINE_S, log_dir=state / "logs")
    try:
        yield processes
    finally:
        codes = processes.stop(STOP_GRACE_S)
    assert_clean_stop(processes, codes)


@dataclass(frozen=True)
class Traffic:
    """What the driver did, and every service's exposition afterwards."""

    request_id: str
    rest_request_id: str
    """The requestId the gateway's ``POST /send`` answered."""
    history_hashes: list[bytes]
    relayed_hashes: set[bytes]
    """The hashes of what both sends' envelopes reached the RLPx peer as."""
    exported: dict[str, set[str]]
    """Service -> every sample name its /metrics can expose (a histogram's _bucket/_sum/_count included)."""
    sampled: dict[str, set[str]]
    """Service -> the names that have at least one sample line."""


async def _drive(processes: ProcessMesh) -> tuple[str, str, list[bytes], set[bytes]]:
    sink = MemorySink()
    client = relay_client(sink)
    await client.start()
    try:
        info = await client.connect(_enode(processes.get("edge_peer")))
        posted = envelopes(5, topic=TOPIC, first=40)
        await client.post(info.pubkey, posted)
        history = processes.get("history").address
        async with asyncio.timeout(WAIT_S):
            while await asyncio.to_thread(archived, history, [e.hash for e in posted]) < len(posted):
                await asyncio.sleep(
                    0.05
                )  # polling the archive's state (bounded above), not a synchronisation
        now = int(time.time())
        request = HistoryRequest(now - 3600, now + 60, None, (TOPIC,), 100)
        got = [e async for e in client.request_history(info.pubkey, request, Dialect.STATUS_PLAIN)]
        async with grpc.aio.insecure_channel(processes.get("send").address) as channel:
            message = common_pb2.WakuMessage(payload=b"traced", content_topic=BRIDGED)
            reply = await send_pb2_grpc.SendServiceStub(channel).Send(
                send_pb2.SendRequest(message=message), timeout=10
            )
        gateway = f"http://127.0.0.1:{processes.get('gateway').spec.env['GATEWAY_HTTP_PORT']}"
        async with httpx.AsyncClient(base_url=gateway, timeout=10) as rest:
            body = {"contentTopic": BRIDGED, "payload": base64.b64encode(b"traced over REST").decode()}
            sent = await rest.post("/send", json=body)
        assert sent.status_code == 200, sent.text
        relayed = await sink.wait_for(2, timeout=WAIT_S)  # both sends' envelopes, relayed to this peer
        return reply.request_id, sent.json()["requestId"], [e.hash for e in got], {e.hash for e in relayed}
    finally:
        await client.stop()


def _exposition(port: int) -> tuple[set[str], set[str]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    exported: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        exported |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    sampled = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{| )", text, re.MULTILINE))
    return exported, sampled


@pytest.fixture(scope="module")
def traffic(mesh: ProcessMesh) -> Traffic:
    request_id, rest_request_id, hashes, relayed = run(_drive(mesh))
    exported: dict[str, set[str]] = {}
    sampled: dict[str, set[str]] = {}
    for name in SERVICES:
        exported[name], sampled[name] = _exposition(mesh.get(name).spec.metrics_port)
    return Traffic(request_id, rest_request_id, hashes, relayed, exported, sampled)


def test_every_server_and_client_has_the_go_grpc_prometheus_metrics(traffic: Traffic) -> None:
    """Every series name on every server; on every client, each call counted as it starts, and as it ends on
    the clients whose calls in this traffic end (the subscription service's calls are streams that stay open
    for the life of the mesh, so its ``handled`` has no sample yet: only its family is required)."""
    samples = [m.replace("handling_seconds", "handling_seconds_count") for m in GRPC_SERVER]
    for name in SERVICES:
        for metric in samples:
            assert f"grpc_server_{metric}" in traffic.sampled[name], (name, metric)
        if not (CATALOG[name].needs or CATALOG[name].observes):
            continue
        for metric in samples:
            assert f"grpc_client_{metric}" in traffic.exported[name], (name, metric)
        ended = samples if name != "subscription" else [m for m in samples if m != "handled_total"]
        for metric in ended:
            assert f"grpc_client_{metric}" in traffic.sampled[name], (name, metric)
    assert len(traffic.history_hashes) == 5  # the history request answered what was posted


def _all_expressions() -> list[tuple[str, str]]:
    found = [
        (f"dashboard panel {title!r}", expr) for title, expr in expressions(json.loads(DASHBOARD.read_text()))
    ]
    groups = yaml.safe_load(RULES.read_text())["groups"]
    found += [(f"alert {rule['alert']}", rule["expr"]) for group in groups for rule in group["rules"]]
    return found


def test_every_dashboard_and_alert_metric_is_exported_by_the_service_it_selects(traffic: Traffic) -> None:
    missing: list[str] = []
    checked = 0
    for where, expr in _all_expressions():
        for sel in selectors(expr):
            services = services_of(sel, SERVICES)
            assert services, f"{where}: {sel.metric} selects no service"
            checked += 1
            if sel.metric in PROMETHEUS_SERIES:
                continue
            if not any(sel.metric in traffic.exported[s] for s in services):
                missing.append(f"{where}: {sel.metric} (job {sel.job!r}: {services})")
    assert not missing, "named but not exported:\n" + "\n".join(missing)
    assert checked > 90


def test_the_metrics_catalogue_lists_exactly_what_each_service_exports(traffic: Traffic) -> None:
    section = OPERATIONS.read_text().split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[str]] = {}
    for service, names in re.findall(r"^\| `(\w+)` \| (.+) \|$", section, re.MULTILINE):
        documented[service] = set(re.findall(r"`([a-z0-9_]+)`", names))
    grpc_set = {f"grpc_{side}_{m}" for side in ("server", "client") for m in GRPC_SERVER}
    for name in SERVICES:
        families = {re.sub(r"_(bucket|sum|count)$", "", n) for n in traffic.exported[name]}
        families = {f for f in families if not f.startswith(("python_", "process_"))} - grpc_set
        assert documented.get(name) == families, (name, families ^ documented.get(name, set()))


def _trace(spans: list[Received], trace_id: bytes) -> list[Received]:
    return [r for r in spans if bytes(r.span.trace_id) == trace_id]


def _chain(trace: list[Received], leaf: Received) -> list[tuple[str, str]] | None:
    """(service, span name) from ``leaf`` up to the root of its trace; None while an ancestor has not arrived
    (a span is exported when it ends, and a parent ends after its children)."""
    by_id = {bytes(r.span.span_id): r for r in trace}
    chain, node = [(leaf.service, leaf.span.name)], leaf
    while node.parent:
        if node.parent not in by_id:
            return None
        node = by_id[node.parent]
        chain.append((node.service, node.span.name))
    return chain


Match = Callable[[Received], bool]


def _complete(
    spans: list[Received], root: Match, leaf: Match
) -> tuple[list[tuple[str, str]], list[Received]] | None:
    """(a ``leaf``'s chain up to the root, the whole trace) once the trace of a ``root`` span holds a ``leaf``
    whose every ancestor has arrived; None until then."""
    for first in (r for r in spans if root(r)):
        trace = _trace(spans, bytes(first.span.trace_id))
        for candidate in (r for r in trace if leaf(r)):
            chain = _chain(trace, candidate)
            if chain is not None:
                return chain, trace
    return None


def test_a_history_request_over_rlpx_is_one_trace_edge_history_archive(
    receiver: tuple[OtlpReceiver, int], traffic: Traffic
) -> None:
    collector = receiver[0]
    chain, trace = collector.wait_for(
        lambda spans: _complete(
            spans,
            lambda r: r.span.name == "mailserver request",
            lambda r: r.service == "archive" and r.span.name.endswith("/QueryEnvelopes"),
        ),
        "the archive's span and all its ancestors in the history request's trace",
    )
    requests = [r for r in collector.spans if r.span.name == "mailserver request"]
    assert len(requests) == 1  # one 0x7e, one trace
    assert chain == [
        ("archive", "/mailmesh.archive.v1.ArchiveService/QueryEnvelopes"),
        ("history", "/mailmesh.archive.v1.ArchiveService/QueryEnvelopes"),
        ("history", "/mailmesh.history.v1.HistoryQueryService/Query"),
        ("edge-peer", "/mailmesh.history.v1.HistoryQueryService/Query"),
        ("edge-peer", "mailserver request"),
    ]
    assert [r.service for r in trace if not r.parent] == ["edge-peer"]  # one root: nothing else began a trace
    assert requests[0].span.kind == Span.SPAN_KIND_SERVER


def _ids(span_or_link: Any) -> tuple[bytes, bytes]:
    return bytes(span_or_link.trace_id), bytes(span_or_link.span_id)


def _carrier(spans: list[Received], envelope: Received) -> list[Received] | None:
    """The trace of the Publish call that carried ``envelope`` (the edge peer's span for one envelope links
    to the call's server span), from that server span up to its root; None until all of it arrived."""
    [link] = envelope.span.links
    by_id = {_ids(r.span): r for r in spans}
    if (node := by_id.get(_ids(link))) is None:
        return None
    chain = [node]
    while node.parent:
        if (node := by_id.get((bytes(node.span.trace_id), node.parent))) is None:
            return None
        chain.append(node)
    return chain


def _relayed_envelope(collector: OtlpReceiver, trace_id: bytes, traffic: Traffic) -> Received:
    """The edge peer's span, in the trace ``trace_id``, for the envelope the RLPx peer received (an attempt
    that reached no peer would have a span too), once it and its parent (the attempt) have arrived."""

    def found(spans: list[Received]) -> Received | None:
        trace = _trace(spans, trace_id)
        ids = {bytes(r.span.span_id) for r in trace}
        for r in trace:
            attributes = {a.key: a.value.string_value for a in r.span.attributes}
            named = bytes.fromhex(attributes.get("mailmesh.envelope_hash", ""))
            if r.span.name == "publish envelope" and named in traffic.relayed_hashes and r.parent in ids:
                return r
        return None

    return collector.wait_for(found, "the edge peer's span for the envelope the peer received")


def _the_call_links_to_the_attempt(collector: OtlpReceiver, envelope: Received) -> None:
    """The shared Publish call's own trace: ``send publish batch`` → the call on both sides, the batch span
    linked to the attempt that put ``envelope`` in it (the envelope span's parent)."""
    call = collector.wait_for(lambda spans: _carrier(spans, envelope), "the Publish call that carried it")
    assert [(r.service, r.span.name) for r in call] == [
        ("edge-peer", "/mailmesh.edgepeer.v1.EdgePeerService/Publish"),
        ("send", "/mailmesh.edgepeer.v1.EdgePeerService/Publish"),
        ("send", "send publish batch"),
    ]
    assert (bytes(envelope.span.trace_id), envelope.parent) in {_ids(link) for link in call[-1].span.links}
    assert call[-1].span.kind == Span.SPAN_KIND_PRODUCER


def test_a_send_is_one_trace_from_the_call_to_the_edge_peer_publish(
    receiver: tuple[OtlpReceiver, int], traffic: Traffic
) -> None:
    collector = receiver[0]
    chain, trace = collector.wait_for(
        lambda spans: _complete(
            spans,
            # The gRPC Send's own span is a root; the REST send's has the gateway's call as parent.
            lambda r: r.service == "send" and r.span.name.endswith("SendService/Send") and not r.parent,
            lambda r: r.service == "edge-peer" and r.span.name == "publish envelope",
        ),
        "the edge peer's span for the envelope and all its ancestors in the Send's trace",
    )
    assert chain == [
        ("edge-peer", "publish envelope"),
        ("send", "send attempt"),
        ("send", "/mailmesh.send.v1.SendService/Send"),
    ]
    attempt = next(r for r in trace if r.span.name == "send attempt")
    attributes = {a.key: a.value.string_value for a in attempt.span.attributes}
    assert attributes["mailmesh.request_id"] == traffic.request_id
    roots = [r for r in trace if not r.parent]
    assert [r.span.name for r in roots] == ["/mailmesh.send.v1.SendService/Send"]
    envelope = _relayed_envelope(collector, bytes(roots[0].span.trace_id), traffic)
    _the_call_links_to_the_attempt(collector, envelope)


def test_a_rest_send_is_one_trace_from_the_gateway_to_the_edge_peer_publish(
    receiver: tuple[OtlpReceiver, int], traffic: Traffic
) -> None:
    collector = receiver[0]
    chain, trace = collector.wait_for(
        lambda spans: _complete(
            spans,
            lambda r: r.service == "gateway" and not r.parent,
            lambda r: r.service == "edge-peer" and r.span.name == "publish envelope",
        ),
        "the edge peer's span for the envelope and all its ancestors in the REST send's trace",
    )
    assert chain == [
        ("edge-peer", "publish envelope"),
        ("send", "send attempt"),
        ("send", "/mailmesh.send.v1.SendService/Send"),
        ("gateway", "/mailmesh.send.v1.SendService/Send"),
        ("gateway", "POST /send"),
    ]
    attempt = next(r for r in trace if r.span.name == "send attempt")
    attributes = {a.key: a.value.string_value for a in attempt.span.attributes}
    assert attributes["mailmesh.request_id"] == traffic.rest_request_id
    roots = [r for r in trace if not r.parent]
    assert [(r.service, r.span.name) for r in roots] == [("gateway", "POST /send")]
    assert roots[0].span.kind == Span.SPAN_KIND_SERVER
    envelope = _relayed_envelope(collector, bytes(roots[0].span.trace_id), traffic)
    _the_call_links_to_the_attempt(collector, envelope)
