"""End to end (issue 3): the mesh as `make run` starts it — ingest → archive → history-query, real processes.

Drives the real runner (tools/run_mesh.py) on free ports with an SQLite archive in a temp dir: envelopes go
in through IngestService, come back out of HistoryQueryService page by page through authenticated cursors,
survive a stop and restart of the whole mesh, and the runner stops every service cleanly on SIGINT (Ctrl-C).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from mailmesh.common.v1 import common_pb2
from mailmesh.health.v1 import health_pb2, health_pb2_grpc
from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshharness import (
    ENV_PREFIXES,
    Allow,
    LogLine,
    ServiceProcess,
    ServiceSpec,
    free_base,
    is_noise,
    spawn,
    wait_serving,
)
from wakucodec.bloom import bloom_match, topic_to_bloom, topics_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.pow import seal
from wakucodec.responses import split_sized

SERVICES = {"edge_peer": 1, "ingest": 2, "archive": 3, "history": 4, "health": 7}  # the catalog's offsets
TOPICS = [bytes([0xE2, 0xE0, 0x00, i]) for i in range(4)] + [
    bytes.fromhex("0a1b2c08"),
    bytes.fromhex("5d6e7f08"),
]
BLOOM_TOPICS = TOPICS[4:]
START_DEADLINE_S = 180.0  # the runner itself waits up to 120 s for each service
STOP_DEADLINE_S = 75.0  # five services, each with the runner's 10 s grace, stopped one after another
READY = "mesh: every service is SERVING"
#: A first start creates the cursor secret and warns that replicas must share it (services/history README).
#: The restart test stops and starts the whole mesh: the subscription service's history feed finds history
#: restarted (a new epoch) and says what it may have missed (services/subscription README).
EXPECTED = [
    Allow(r"^created cursor secret file .* with a random secret", logger="services.history.cursorkeys"),
    Allow(r"^history feed .*: cannot resume after sequence", logger="services.subscription.followers"),
]


class Mesh:
    """One run of tools/run_mesh.py, through the process harness."""

    def __init__(self, state: Path, grpc_base: int, metrics_base: int) -> None:
        self.state, self.grpc_base, self.metrics_base = state, grpc_base, metrics_base
        self.runner: ServiceProcess | None = None
        self.runs: list[ServiceProcess] = []

    def addr(self, service: str) -> str:
        return f"127.0.0.1:{self.grpc_base + SERVICES[service]}"

    def start(self) -> None:
        """Start the runner and wait for its line saying every service is SERVING (it checks health)."""
        args = (
            "--state-dir", str(self.state),
            "--grpc-base-port", str(self.grpc_base),
            "--metrics-base-port", str(self.metrics_base),
            "--devp2p-port", str(self.grpc_base + 9),  # free_base checked base+1 … base+9 (the gateway has 8)
            "--grace", "10",
        )  # fmt: skip
        spec = ServiceSpec(
            name="run_mesh", module="tools.run_mesh", args=args, env={"MAILMESH_LOG_LEVEL": "WARNING"}
        )
        self.runner = spawn(spec, strip_env_prefixes=ENV_PREFIXES)
        self.runs.append(self.runner)
        self.runner.logs.wait_for(lambda line: line.text.startswith(READY), START_DEADLINE_S)
        for service in SERVICES:  # and each answers health on the port the runner gave it
            wait_serving(self.addr(service), "", 10)

    def stop(self) -> int:
        """SIGINT, as Ctrl-C does; returns the runner's exit code."""
        assert self.runner is not None
        return self.runner.stop(STOP_DEADLINE_S, sig=signal.SIGINT)

    def noise(self) -> list[str]:
        """Lines at WARNING or above and stray output, from every service and the runner, over every run."""
        noisy = []
        for run in self.runs:
            for line in run.logs.lines:
                _name, sep, text = line.text.partition("| ")  # "archive   | {...}" from a service
                if not sep:
                    if not line.text.startswith("mesh: "):
                        noisy.append(line.text)  # the runner's own output is only its "mesh: " lines
                    continue
                service_line = LogLine.parse(text)
                if is_noise(service_line) and not any(a.matches(service_line) for a in EXPECTED):
                    noisy.append(line.text)
        return noisy


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[Mesh]:
    m = Mesh(tmp_path / "state", free_base(9), free_base(8))
    try:
        m.start()
        yield m
    finally:  # also when start() failed half-way: never leave a runner (and its services) behind
        if m.runner is not None and m.runner.returncode is None:
            m.stop()
    assert m.noise() == [], "\n".join(m.noise())


def _envelopes(count: int, now: int) -> list[Envelope]:
    out: list[Envelope] = []
    for i in range(count):
        sent = now - 3600 + (i * 7) % 3000  # out of order, many per second
        ttl = 7200
        # Sealed to the PoW a Status client uses, so ingest's minimum PoW (0.000002) accepts them.
        out.append(
            seal(sent + ttl, ttl, TOPICS[i % len(TOPICS)], os.urandom(64), target_pow=0.002, work_time_s=5)
        )
    return out


def _ingest(addr: str, envs: list[Envelope], batch: int = 250) -> tuple[int, int]:
    accepted = duplicates = 0
    with grpc.insecure_channel(addr) as ch:
        stub = ingest_pb2_grpc.IngestServiceStub(ch)
        for n, start in enumerate(range(0, len(envs), batch)):
            received = Timestamp()
            received.GetCurrentTime()
            req = ingest_pb2.IngestBatchRequest(
                batch=ingest_pb2.IngestBatch(
                    batch_id=n, envelopes=[e.raw for e in envs[start : start + batch]], received_at=received
                )
            )
            ack = stub.IngestBatch(req, timeout=30).ack
            assert not ack.rejections, ack.rejections
            accepted += ack.accepted
            duplicates += ack.duplicates
    return accepted, duplicates


def _page_all(
    addr: str, *, lower: int, upper: int, limit: int, topics: list[bytes] | None = None, bloom: bytes = b""
) -> tuple[list[bytes], int]:
    """Follow cursors to the end; returns every raw envelope delivered and the number of pages."""
    out: list[bytes] = []
    cursor = b""
    pages = 0
    with grpc.insecure_channel(addr) as ch:
        stub = history_pb2_grpc.HistoryQueryServiceStub(ch)
        while True:
            pages += 1
            req = history_pb2.HistoryQueryRequest(
                lower=lower, upper=upper, limit=limit, cursor=cursor, topics=topics or [], bloom=bloom
            )
            complete = None
            for resp in stub.Query(req, timeout=30):
                if resp.HasField("batch"):
                    out.extend(split_sized(resp.batch.envelopes_rlp, resp.batch.envelope_sizes))
                else:
                    complete = resp.complete
            assert complete is not None
            cursor = complete.next_cursor
            if not cursor:
                return out, pages


def test_ingested_envelopes_page_out_of_history_and_survive_a_restart(mesh: Mesh) -> None:
    now = int(time.time())
    envs = _envelopes(1500, now)
    accepted, duplicates = _ingest(mesh.addr("ingest"), envs)
    assert (accepted, duplicates) == (1500, 0)

    # Re-ingesting the same envelopes writes nothing: idempotent by envelope hash.
    assert _ingest(mesh.addr("ingest"), envs[:500]) == (0, 500)

    lower, upper = now - 3600, now
    wanted_topics = TOPICS[:3]
    expected = sorted((e.sent, e.hash, e.raw) for e in envs if e.topic in wanted_topics)
    got, pages = _page_all(mesh.addr("history"), lower=lower, upper=upper, limit=150, topics=wanted_topics)
    assert pages >= 5
    assert got == [raw for _, _, raw in expected]  # oldest first, no duplicates, no gaps

    # A bloom matches every topic whose bloom bits it covers (false positives included, as in status-go).
    bloom = topics_to_bloom(BLOOM_TOPICS)
    bloom_expected = sorted(
        (e.sent, e.hash, e.raw) for e in envs if bloom_match(bloom, topic_to_bloom(e.topic))
    )
    assert 0 < len(bloom_expected) < len(envs)
    bloom_got, _ = _page_all(mesh.addr("history"), lower=lower, upper=upper, limit=400, bloom=bloom)
    assert bloom_got == [raw for _, _, raw in bloom_expected]

    assert mesh.stop() == 0  # Ctrl-C stops every service cleanly

    mesh.start()  # same state dir: acknowledged data survives a restart
    again, _ = _page_all(mesh.addr("history"), lower=lower, upper=upper, limit=1000, topics=wanted_topics)
    assert again == [raw for _, _, raw in expected]


def test_a_forged_cursor_is_refused_with_a_clear_error(mesh: Mesh) -> None:
    with grpc.insecure_channel(mesh.addr("history")) as ch:
        stub = history_pb2_grpc.HistoryQueryServiceStub(ch)
        req = history_pb2.HistoryQueryRequest(lower=1, upper=2, topics=[TOPICS[0]], cursor=b"\x00" * 36)
        with pytest.raises(grpc.RpcError) as info:
            list(stub.Query(req, timeout=10))
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "cursor" in (info.value.details() or "")


def test_the_health_service_sees_the_mesh_and_reports_no_waku_peers(mesh: Mesh) -> None:
    """make run's health service reads the runner's edge peer and archive: no Waku peer yet → Unhealthy.

    The runner spawns every service before waiting for them, so the health service's first polls may find the
    edge peer or the archive not yet listening: follow WatchHealth (every change) until a report has polled
    both.
    """

    def polled(report: health_pb2.HealthReport) -> bool:
        archive = [s.status for s in report.services if s.service == "archive"]
        return all(e.reachable for e in report.edge_peers) and archive == [health_pb2.SERVING_STATUS_SERVING]

    with grpc.insecure_channel(mesh.addr("health")) as ch:
        watch = health_pb2_grpc.HealthServiceStub(ch).WatchHealth(
            health_pb2.WatchHealthRequest(mode=health_pb2.WATCH_MODE_ANY), timeout=30
        )
        report = next(m.report for m in watch if polled(m.report))
        watch.cancel()
    assert [e.target for e in report.edge_peers] == [mesh.addr("edge_peer")]
    assert report.status == common_pb2.HEALTH_STATUS_UNHEALTHY
    assert report.connection_status == common_pb2.CONNECTION_STATUS_DISCONNECTED
    assert [r.code for r in report.reasons][:1] == [health_pb2.HEALTH_REASON_CODE_NO_PEERS]
