"""The whole mesh as processes for the RLPx end-to-end tests (issue 4): archive (SQLite in a temp dir),
ingest, history-query and one or more edge-peer replicas, on ports found by binding free sockets first.

Readiness is event-driven and bounded: each process is waited for with ``grpc.health.v1`` Check calls until
SERVING (within a deadline); the edge peer's enode comes from its JSON log line with the ``enode`` field.
Every process is stopped by the fixture's finalizer: SIGTERM, then SIGKILL if it does not exit in time.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from mailmesh.history.v1 import history_pb2, history_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 60.0
STOP_GRACE_S = 15.0


#: Ports are drawn below Linux's ephemeral range (32768+), so the mesh's own outgoing connections (which get
#: ephemeral source ports) cannot take a port between our check and the service's bind.
PORT_RANGE = (20000, 32000)
START_ATTEMPTS = 3


class PortTaken(Exception):
    """A service could not bind its port (someone took it after we checked): start again on new ports."""


def free_ports(count: int) -> list[int]:
    """Distinct ports in :data:`PORT_RANGE` that could be bound a moment ago (checked by binding them)."""
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", random.randint(*PORT_RANGE)))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Service:
    """One running service process."""

    name: str
    module: str
    grpc_port: int
    log: Path
    proc: subprocess.Popen[bytes]
    metrics_port: int = -1
    enode: str = ""

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def log_entries(self) -> list[dict[str, object]]:
        entries = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    entries.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return entries

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Scrape /metrics: {(sample name, sorted labels): value}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def metric(self, name: str, **labels: str) -> float:
        return self.metrics().get((name, tuple(sorted(labels.items()))), 0.0)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def wait_serving(self, deadline: float) -> None:
        """grpc.health.v1 Check until SERVING, bounded by ``deadline`` (monotonic)."""
        with grpc.insecure_channel(self.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while True:
                if self.proc.poll() is not None:
                    text = self.log.read_text(errors="replace").lower()
                    if "address already in use" in text or "cannot listen" in text:
                        raise PortTaken(self.name)
                    raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"{self.name} not SERVING within {START_DEADLINE_S} s:\n{self.tail()}"
                    )
                try:
                    reply = stub.Check(
                        health_pb2.HealthCheckRequest(service=""),
                        timeout=min(remaining, 5.0),
                        wait_for_ready=True,
                    )
                except grpc.RpcError:
                    continue  # not listening yet: retry within the deadline
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after the grace; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("EDGE_", "INGEST_", "HISTORY_", "ARCHIVE_", "OTEL_", "MAILMESH_"))
    }
    env.update({"MAILMESH_LOG_FORMAT": "json", "MAILMESH_LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


@dataclass
class Mesh:
    """archive + ingest + history + edge peers, started in dependency order."""

    state: Path
    services: list[Service] = field(default_factory=list)

    def _spawn(
        self, name: str, module: str, grpc_port: int, env: dict[str, str], metrics_port: int = -1
    ) -> Service:
        log = self.state / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", module], cwd=ROOT, env=_env(env), stdout=out, stderr=subprocess.STDOUT
            )
        service = Service(name, module, grpc_port, log, proc, metrics_port)
        self.services.append(service)
        return service

    def get(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    @property
    def edges(self) -> list[Service]:
        return [s for s in self.services if s.module == "services.edge_peer"]

    def start(self, replicas: int = 1, edge_env: dict[str, str] | None = None) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        archive, ingest, history, *edge_ports = free_ports(3 + 3 * replicas)
        deadline = time.monotonic() + START_DEADLINE_S
        self._spawn(
            "archive",
            "services.archive",
            archive,
            {
                "ARCHIVE_GRPC_HOST": "127.0.0.1",
                "ARCHIVE_GRPC_PORT": str(archive),
                "ARCHIVE_METRICS_PORT": "-1",
                "ARCHIVE_BACKEND": "sqlite",
                "ARCHIVE_SQLITE_PATH": str(self.state / "archive.sqlite3"),
            },
        )
        self._spawn(
            "ingest",
            "services.ingest",
            ingest,
            {
                "INGEST_GRPC_HOST": "127.0.0.1",
                "INGEST_GRPC_PORT": str(ingest),
                "INGEST_METRICS_PORT": "-1",
                "INGEST_ARCHIVE_ADDR": f"127.0.0.1:{archive}",
            },
        )
        self._spawn(
            "history",
            "services.history",
            history,
            {
                "HISTORY_GRPC_HOST": "127.0.0.1",
                "HISTORY_GRPC_PORT": str(history),
                "HISTORY_METRICS_PORT": "-1",
                "HISTORY_ARCHIVE_ADDR": f"127.0.0.1:{archive}",
                "HISTORY_CURSOR_SECRET_FILE": str(self.state / "cursor.secret"),
            },
        )
        for index in range(replicas):
            grpc_port, devp2p_port, metrics_port = edge_ports[3 * index : 3 * index + 3]
            env = {
                "EDGE_GRPC_HOST": "127.0.0.1",
                "EDGE_GRPC_PORT": str(grpc_port),
                "EDGE_METRICS_PORT": str(metrics_port),
                "EDGE_LISTEN_HOST": "127.0.0.1",
                "EDGE_LISTEN_PORT": str(devp2p_port),
                "EDGE_NODE_KEY_FILE": str(self.state / f"edge{index}.nodekey"),
                "EDGE_INGEST_ADDR": f"127.0.0.1:{ingest}",
                "EDGE_HISTORY_ADDR": f"127.0.0.1:{history}",
                "EDGE_INSTANCE": f"edge-{index}",
                **(edge_env or {}),
            }
            self._spawn(f"edge{index}", "services.edge_peer", grpc_port, env, metrics_port)
        for service in self.services:
            service.wait_serving(deadline)
        for edge in self.edges:
            edge.enode = next(str(e["enode"]) for e in edge.log_entries() if e.get("enode"))

    def stop(self) -> dict[str, int]:
        """Stop in reverse order; exit codes by name."""
        return {s.name: s.stop() for s in reversed(self.services)}


def mesh_fixture(state: Path, replicas: int, edge_env: dict[str, str] | None = None) -> Iterator[Mesh]:
    """Start a mesh, yield it, always stop every process (SIGTERM, then SIGKILL)."""
    for attempt in range(START_ATTEMPTS):
        mesh = Mesh(state / f"attempt{attempt}")
        try:
            mesh.start(replicas, edge_env)
            break
        except PortTaken:
            mesh.stop()
            if attempt == START_ATTEMPTS - 1:
                raise
        except BaseException:
            mesh.stop()
            raise
    try:
        yield mesh
    finally:
        codes = mesh.stop()
    bad = {name: code for name, code in codes.items() if code != 0}
    assert not bad, f"services exited non-zero on SIGTERM: {bad}"


def eventually(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    """Poll ``condition`` (e.g. a metric another process updates after its peer saw the effect), bounded."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def archived(history_addr: str, hashes: Sequence[bytes]) -> int:
    """How many of ``hashes`` history-query reports as stored (HistoryQueryService.Lookup, 1000 per call)."""
    with grpc.insecure_channel(history_addr) as channel:
        stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
        stored = 0
        for i in range(0, len(hashes), 1000):
            reply = stub.Lookup(history_pb2.LookupRequest(envelope_hashes=hashes[i : i + 1000]), timeout=10)
            stored += len(reply.stored_envelope_hashes)
        return stored
