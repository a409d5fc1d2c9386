"""End to end (issue 3): the mesh as `make run` starts it — ingest → archive → history-query, real processes.

Drives the real runner (tools/run_mesh.py) on free ports with an SQLite archive in a temp dir: envelopes go
in through IngestService, come back out of HistoryQueryService page by page through authenticated cursors,
survive a stop and restart of the whole mesh, and the runner stops every service cleanly on SIGINT (Ctrl-C).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from wakucodec.bloom import bloom_match, topic_to_bloom, topics_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.pow import seal
from wakucodec.responses import split_sized

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {"edge_peer": 1, "ingest": 2, "archive": 3, "history": 4}  # tools/run_mesh.py OFFSETS
TOPICS = [bytes([0xE2, 0xE0, 0x00, i]) for i in range(4)] + [
    bytes.fromhex("0a1b2c08"),
    bytes.fromhex("5d6e7f08"),
]
BLOOM_TOPICS = TOPICS[4:]
START_DEADLINE_S = 60.0


def _free_base(count: int = 5) -> int:
    """A base port such that base+1 … base+count are free right now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1]) - 1
        if base + count > 65000:
            continue
        try:
            holders = []
            for off in range(1, count + 1):
                h = socket.socket()
                holders.append(h)
                h.bind(("127.0.0.1", base + off))
        except OSError:
            continue
        finally:
            for h in holders:
                h.close()
        return base
    raise RuntimeError("no free port range found")


class Mesh:
    """One run of tools/run_mesh.py."""

    def __init__(self, state: Path, grpc_base: int, metrics_base: int) -> None:
        self.state, self.grpc_base, self.metrics_base = state, grpc_base, metrics_base
        self.proc: subprocess.Popen[bytes] | None = None

    def addr(self, service: str) -> str:
        return f"127.0.0.1:{self.grpc_base + SERVICES[service]}"

    def start(self) -> None:
        """Start the runner and wait until every service is SERVING."""
        cmd = [
            sys.executable,
            str(ROOT / "tools" / "run_mesh.py"),
            "--state-dir",
            str(self.state),
            "--grpc-base-port",
            str(self.grpc_base),
            "--metrics-base-port",
            str(self.metrics_base),
            "--devp2p-port",
            str(self.grpc_base + 5),  # _free_base checked base+1 … base+5
            "--grace",
            "10",
        ]
        env = {**os.environ, "MAILMESH_LOG_LEVEL": "WARNING"}
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for service in SERVICES:
            self._wait_serving(service)

    def _wait_serving(self, service: str) -> None:
        """Block on grpc.health.v1 Watch until SERVING (event-driven, bounded by a deadline)."""
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert self.proc is not None and self.proc.poll() is None, self.output()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{service} not SERVING within {START_DEADLINE_S}s\n{self.output()}")
            with grpc.insecure_channel(self.addr(service)) as ch:
                try:
                    grpc.channel_ready_future(ch).result(timeout=min(remaining, 5.0))
                    watch = health_pb2_grpc.HealthStub(ch).Watch(
                        health_pb2.HealthCheckRequest(service=""), timeout=min(remaining, 10.0)
                    )
                    for update in watch:
                        if update.status == health_pb2.HealthCheckResponse.SERVING:
                            watch.cancel()
                            return
                except (grpc.FutureTimeoutError, grpc.RpcError):
                    continue  # not listening yet, or the watch hit its timeout: try again within the deadline

    def stop(self) -> int:
        """SIGINT, as Ctrl-C does; returns the runner's exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=40)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()

    def output(self) -> str:
        """The runner's last output, once it has exited (for failure messages)."""
        if self.proc is None or self.proc.stdout is None or self.proc.poll() is None:
            return ""
        return self.proc.stdout.read().decode(errors="replace")[-4000:]


@pytest.fixture
def mesh(tmp_path: Path) -> Iterator[Mesh]:
    m = Mesh(tmp_path / "state", _free_base(), _free_base())
    try:
        m.start()
        yield m
    finally:  # also when start() failed half-way: never leave a runner (and its services) behind
        if m.proc is not None and m.proc.poll() is None:
            m.stop()


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
