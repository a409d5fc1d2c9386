"""The whole mesh as processes for the RLPx end-to-end and interop tests: archive (SQLite in a temp dir),
ingest, history-query and one or more edge-peer replicas, started by the process harness (libs/meshharness)
on free loopback ports.

Readiness is event-driven and bounded: each process is waited for with ``grpc.health.v1`` until SERVING;
an edge peer's enode comes from its JSON log line with the ``enode`` field. The fixture stops every process
(SIGTERM, then SIGKILL), requires exit status 0, and fails on any WARNING or ERROR line (or stray output)
from our services that the test did not declare as provoked on purpose (``allow``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshharness import CATALOG, Allow, FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh

ROOT = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 60.0
STOP_GRACE_S = 15.0


@dataclass(frozen=True)
class Edge:
    """A running edge-peer replica and its enode URL."""

    service: ServiceProcess
    enode: str

    @property
    def address(self) -> str:
        """Its gRPC address."""
        return self.service.address

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Scrape its /metrics: {(sample name, sorted labels): value}."""
        return self.service.metrics()

    def metric(self, name: str, **labels: str) -> float:
        """One sample (0 when the series does not exist yet)."""
        return self.service.metric(name, **labels)

    def running(self) -> bool:
        """Whether the process is still running."""
        return self.service.returncode is None

    def tail(self, lines: int = 30) -> str:
        """Its last log lines, for failure messages."""
        return self.service.logs.tail(lines)

    def rss_kib(self) -> int:
        """Resident set size in KiB (``VmRSS``)."""
        for line in Path(f"/proc/{self.service.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


class Mesh:
    """archive + ingest + history + edge peers, as the harness started them."""

    def __init__(self, processes: ProcessMesh) -> None:
        self.processes = processes
        self.edges = [Edge(s, _enode(s)) for s in processes.of_kind("edge_peer")]

    def get(self, name: str) -> ServiceProcess:
        """The service instance called ``name`` (``archive``, ``ingest``, ``history``, ``edge_peer-1``)."""
        return self.processes.get(name)


def _enode(edge: ServiceProcess) -> str:
    """The enode URL the edge peer logs as it starts listening."""
    line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), START_DEADLINE_S)
    assert line.record is not None
    return str(line.record["enode"])


def mesh_fixture(
    state: Path, replicas: int, edge_env: dict[str, str] | None = None, *, allow: Iterable[Allow] = ()
) -> Iterator[Mesh]:
    """Start a mesh, yield it, always stop every process; then require clean exits and a quiet log."""
    state.mkdir(parents=True, exist_ok=True)
    # The shared cursor secret exists beforehand, as deployed (history warns when it has to create one).
    secret = state / CATALOG["history"].state_files["HISTORY_CURSOR_SECRET_FILE"]
    secret.write_text(os.urandom(32).hex() + "\n")
    secret.chmod(0o600)

    def specs() -> list[ServiceSpec]:
        return plan(
            ["archive", "ingest", "history", "edge_peer"],
            ports=FreePorts(),
            state_dir=state,
            replicas={"edge_peer": replicas},
            env={"archive": {"ARCHIVE_BACKEND": "sqlite"}, "edge_peer": dict(edge_env or {})},
        )

    processes = start_mesh(specs, timeout=START_DEADLINE_S, log_dir=state / "logs")
    try:
        yield Mesh(processes)
    finally:
        codes = processes.stop(STOP_GRACE_S)
    assert_clean_stop(processes, codes, allow)


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


def assert_clean_stop(
    mesh: ProcessMesh, codes: Mapping[str, int], allow: Iterable[Allow] = (), *, killed: Collection[str] = ()
) -> None:
    """After ``mesh`` stopped with exit ``codes``: every service the test did not kill (``killed``) exited 0
    on SIGTERM, and no log line is a WARNING/ERROR that ``allow`` does not expect."""
    bad = {name: code for name, code in codes.items() if code != 0 and name not in killed}
    assert not bad, f"services exited non-zero on SIGTERM: {bad}"
    noisy = mesh.unexpected(allow)
    assert not noisy, "unexpected WARNING/ERROR lines:\n" + "\n".join(
        f"{name}: {line.text}" for name, lines in noisy.items() for line in lines
    )


def killed_by_test(mesh: ProcessMesh) -> set[str]:
    """Instances that already exited before the mesh is stopped: killed by the test, on purpose."""
    return {s.name for s in mesh.services if s.returncode is not None}
