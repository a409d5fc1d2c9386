"""Shared helpers of the ``make bench`` suites: workloads, services on free ports, CPU accounting, statistics.

Workloads are deterministic (seeded) and shaped like Status traffic rather than like a micro-benchmark:

- **Topics**: 1,000 topics with Zipf(s = 1.2) popularity, so a few public-chat-like topics are hot and most
  are sparse; the 10 hottest carry about 57 % of the envelopes (:class:`TopicModel`).
- **Sizes**: ``data`` is random (encrypted payloads do not compress) and padded to 256-byte steps as Waku
  clients pad, 256 B – 4 KiB with a mean of about 1 KiB (:data:`DATA_SIZES`); ingest uses exactly 1 KiB.

Services run as their own processes (``python -m services.<name>``), as deployed, on free loopback ports; the
benchmark process is only the client, so the three processes share the machine's two cores the way a
single-node deployment would. :class:`CpuMeter` reads each process's CPU time from ``/proc`` and the
machine's busy time from ``/proc/stat``, so every figure says which process spent the time and how much CPU
other work on the machine took meanwhile (the team shares these machines).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from archivestore.types import StoredEnvelope
from bench.harness import percentile
from meshcore.heap import collector_off
from meshharness import CATALOG, FreePorts, ServiceProcess, ServiceSpec, plan, start_async
from wakucodec.constants import STATUS_MIN_POW
from wakucodec.envelope import make_envelope
from wakucodec.pow import seal
from wakucodec.wakumessage import DEFAULT_PUBSUB_TOPIC, message_from_v1, message_hash

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
WORK = CACHE / "work"
LOGS = CACHE / "logs"
PROFILES = CACHE / "profiles"

#: Keyspace of every Cassandra measurement; created fresh and dropped afterwards (never the team's).
BENCH_KEYSPACE = "mailmesh_bench"
#: Payload sizes (bytes, weight %): Waku pads payloads to 256-byte blocks; mean ≈ 1 KiB.
DATA_SIZES: tuple[tuple[int, int], ...] = (
    (256, 25),
    (512, 20),
    (768, 15),
    (1024, 15),
    (1536, 10),
    (2048, 10),
    (4096, 5),
)
MIB = 1 << 20


# ------------------------------------------------------------------------------------------------ stats


@contextlib.contextmanager
def client_collector_off() -> Iterator[None]:
    """No cyclic collection in this (the load-generating) process while the block runs, one after it.

    The client's own collector pauses (up to 17 ms of CPU per full collection over its ~72,000-object heap,
    measured) would land in the latencies it measures and be charged to the service. A timed window of
    seconds makes little cyclic garbage (what it drops is freed by reference counting), so nothing grows.
    """
    with collector_off(collect_after=True):
        yield


def summarize_ms(samples_s: Sequence[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean in milliseconds (nearest rank) and the sample count."""
    if not samples_s:
        return {"n": 0}
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p90_ms": round(percentile(ms, 90), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def env_int(name: str, default: int) -> int:
    """An integer override from the environment (``BENCH_*`` sizes), else ``default``."""
    raw = os.environ.get(name, "").strip()
    return int(raw.replace("_", "")) if raw else default


# ------------------------------------------------------------------------------------------------ CPU


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (and of its finished, waited-for children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from ``/proc/stat`` (all cores)."""
    parts = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]  # idle + iowait
    total = sum(parts[:8])  # guest time is already inside user/nice
    tick = os.sysconf("SC_CLK_TCK")
    return (total - idle) / tick, total / tick


@dataclass
class CpuMeter:
    """CPU seconds spent by named processes over a measured interval, and by everything else on the machine.

    ``other_cpu_s`` is the machine's busy time minus ours: work of other people (or Cassandra when it is not
    one of the named processes). Divide by the wall time for cores used.
    """

    pids: Mapping[str, int]
    _start: dict[str, float] = field(default_factory=dict)
    _busy0: float = 0.0
    _wall0: float = 0.0
    _load0: float = 0.0

    def __enter__(self) -> CpuMeter:
        self._start = {name: proc_cpu_s(pid) for name, pid in self.pids.items()}
        self._busy0 = machine_busy_s()[0]
        self._wall0 = time.perf_counter()
        self._load0 = os.getloadavg()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._wall0
        self.cpu_s = {name: proc_cpu_s(pid) - self._start[name] for name, pid in self.pids.items()}
        busy = machine_busy_s()[0] - self._busy0
        self.other_cpu_s = max(0.0, busy - sum(self.cpu_s.values()))
        self.machine_busy_s = busy
        self.load = (self._load0, os.getloadavg()[0])

    def report(self, per: int | None = None, unit: str = "op") -> dict[str, Any]:
        """Cores used per process (and per ``unit`` in ms when ``per`` is given), plus other load."""
        wall = max(self.wall_s, 1e-9)
        out: dict[str, Any] = {
            "wall_s": round(self.wall_s, 2),
            "cores_used": {name: round(cpu / wall, 2) for name, cpu in self.cpu_s.items()},
            "other_cores_used": round(self.other_cpu_s / wall, 2),
            "loadavg_1m": [round(v, 1) for v in self.load],
        }
        if per:
            out[f"cpu_ms_per_{unit}"] = {name: round(cpu / per * 1000, 3) for name, cpu in self.cpu_s.items()}
        return out


# ------------------------------------------------------------------------------------------------ workload


@dataclass(frozen=True)
class TopicModel:
    """``count`` topics with Zipf(``s``) popularity; topic ``k`` (0-based) has weight ``1 / (k + 1) ** s``."""

    count: int = 1000
    s: float = 1.2
    topics: tuple[bytes, ...] = field(init=False)
    cumulative: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        # Spread over the 4-byte space like real topics (derived from keccak of a name); 0xbe is a marker.
        topics = tuple(b"\xbe" + k.to_bytes(3, "big") for k in range(self.count))
        weights = [1 / (k + 1) ** self.s for k in range(self.count)]
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "cumulative", tuple(itertools.accumulate(weights)))

    def share(self, k: int) -> float:
        """Fraction of envelopes on the ``k`` hottest topics."""
        return self.cumulative[k - 1] / self.cumulative[-1]

    def hottest(self, k: int) -> list[bytes]:
        """The ``k`` most popular topics."""
        return list(self.topics[:k])

    def pick(self, rng: random.Random) -> bytes:
        """One topic, by popularity."""
        x = rng.random() * self.cumulative[-1]
        return self.topics[min(bisect.bisect_left(self.cumulative, x), self.count - 1)]

    def pick_distinct(self, rng: random.Random, k: int) -> list[bytes]:
        """``k`` distinct topics, by popularity (what a client subscribed to active chats asks for)."""
        chosen: dict[bytes, None] = {}
        while len(chosen) < k:
            chosen[self.pick(rng)] = None
        return list(chosen)


class Payloads:
    """Random payload bytes without paying ``randbytes`` per envelope: slices of one random buffer.

    Every envelope still gets a distinct hash (the nonce differs); the bytes are incompressible like
    encrypted payloads.
    """

    def __init__(self, rng: random.Random, size: int = 8 * MIB) -> None:
        self._buf = rng.randbytes(size)
        self._rng = rng
        self._sizes = [size for size, _ in DATA_SIZES]
        self._cum = list(itertools.accumulate(weight for _, weight in DATA_SIZES))

    def size(self) -> int:
        """A payload size from :data:`DATA_SIZES`."""
        return self._sizes[bisect.bisect_right(self._cum, self._rng.randrange(self._cum[-1]))]

    def take(self, size: int) -> bytes:
        """``size`` random-looking bytes."""
        offset = self._rng.randrange(len(self._buf) - size)
        return self._buf[offset : offset + size]


@dataclass(frozen=True, slots=True)
class Sample:
    """One generated envelope with every field the ingest, archive and store APIs ask for."""

    raw: bytes
    hash: bytes
    expiry: int
    ttl: int
    topic: bytes
    nonce: int
    message_hash: bytes

    @property
    def sent(self) -> int:
        """``expiry - ttl``."""
        return self.expiry - self.ttl

    def stored(self) -> StoredEnvelope:
        """As the archive store takes it."""
        return StoredEnvelope(self.sent, self.hash, self.topic, self.expiry, self.raw, self.message_hash)


def make_sample(
    sent: int, ttl: int, topic: bytes, data: bytes, nonce: int, *, pow_target: float = 0
) -> Sample:
    """Encode one envelope and compute its envelope and 14/WAKU2 message hashes (as ingest does).

    With ``pow_target`` the nonce is mined (Go's ``Seal``) instead of taken from ``nonce``.
    """
    if pow_target > 0:
        env = seal(sent + ttl, ttl, topic, data, target_pow=pow_target, work_time_s=60)
    else:
        env = make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=nonce)
    msg = message_hash(DEFAULT_PUBSUB_TOPIC, message_from_v1(topic, data, sent))
    return Sample(env.raw, env.hash, env.expiry, ttl, topic, env.nonce, msg)


def ingest_samples(
    count: int,
    *,
    now: int,
    data_size: int = 1024,
    span_s: int = 3600,
    ttl: int = 7200,
    seed: int = 1,
    pow_target: float = STATUS_MIN_POW,
) -> list[Sample]:
    """``count`` envelopes of ``data_size`` bytes sent over the ``span_s`` seconds before ``now``, in order.

    ``ttl`` keeps them unexpired for the whole run (ingest validates against the batch's ``received_at``);
    nonces are mined to ``pow_target`` (status-go's node minimum by default) as a client's ``Seal`` does,
    so ingest accepts every one. The first 8 data bytes are the index: no two envelopes are equal.
    """
    rng = random.Random(seed)
    topics = TopicModel()
    payloads = Payloads(rng)
    base = now - span_s
    tag = seed << 40
    return [
        make_sample(
            base + i * span_s // count,
            ttl,
            topics.pick(rng),
            (tag + i).to_bytes(8, "big") + payloads.take(data_size - 8),
            0,
            pow_target=pow_target,
        )
        for i in range(count)
    ]


@dataclass(frozen=True)
class HistoryDataset:
    """The history workload: ``rows`` envelopes sent in one day from ``start``, topics by :class:`TopicModel`.

    1 M envelopes in a day is 11.6 envelopes/s, about the status.prod fleet's whole rate
    (~10 msg/s, docs/benchmarks.md "Reference: nwaku store") in one archive. Sent times are uniform over the
    day and envelopes are generated (and loaded) in sent order, as an archive fills.
    """

    rows: int
    start: int = 1_700_000_000
    span_s: int = 86_400
    seed: int = 20261122
    ttl: int = 50
    #: Changes whenever the generated content changes; part of the cache key.
    version: int = 1
    topics: TopicModel = field(default_factory=TopicModel)

    @property
    def key(self) -> str:
        """Cache key: version, size and seed."""
        return f"v{self.version}-{self.rows}-s{self.seed}"

    def batches(self, size: int) -> Iterator[list[Sample]]:
        """The dataset in sent order, ``size`` envelopes at a time (deterministic)."""
        rng = random.Random(self.seed)
        # Sorted uniform sent times, generated as a sorted sequence directly (exponential spacings).
        payloads = Payloads(rng)
        gaps = [rng.expovariate(1.0) for _ in range(self.rows + 1)]
        scale = self.span_s / sum(gaps)
        at = 0.0
        batch: list[Sample] = []
        for i in range(self.rows):
            at += gaps[i] * scale
            sent = self.start + min(int(at), self.span_s - 1)
            data = payloads.take(payloads.size())
            batch.append(make_sample(sent, self.ttl, self.topics.pick(rng), data, i))
            if len(batch) == size:
                yield batch
                batch = []
        if batch:
            yield batch


# ------------------------------------------------------------------------------------------------ services


def _spec(
    kind: str, env: Mapping[str, str], *, name: str, profile: Path | None, metrics: bool
) -> ServiceSpec:
    """One catalog service on free loopback ports, quiet (WARNING, text), with a short shutdown grace."""
    prefix = CATALOG[kind].prefix
    defaults = {
        "MAILMESH_LOG_LEVEL": "WARNING",
        "MAILMESH_LOG_FORMAT": "text",
        f"{prefix}_SHUTDOWN_GRACE_SECONDS": "5",
    }
    [spec] = plan(
        [kind],
        ports=FreePorts(metrics=metrics),
        env={kind: {**defaults, **env}},
        profiles={kind: profile} if profile is not None else None,
    )
    return replace(spec, name=name)


@dataclass
class Service:
    """A Mailmesh service running as ``python -m services.<module>`` on 127.0.0.1 (a harness process)."""

    process: ServiceProcess

    @property
    def name(self) -> str:
        """Its instance name (also its log file's name under :data:`LOGS`)."""
        return self.process.name

    @property
    def address(self) -> str:
        """``127.0.0.1:port``."""
        return self.process.address

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status, or None while it runs."""
        return self.process.returncode

    @property
    def profile(self) -> Path | None:
        """Where its cProfile goes, if it runs under one."""
        return self.process.spec.profile

    async def stop(self, timeout: float = 30) -> int:
        """SIGTERM (graceful drain; a cProfile'd process writes its profile), SIGKILL if it hangs."""
        return await self.process.stop_async(timeout)


async def start_service(
    kind: str,
    env: Mapping[str, str],
    *,
    name: str | None = None,
    profile: Path | None = None,
    metrics: bool = False,
    timeout: float = 120,
) -> Service:
    """Start catalog service ``kind`` with ``env`` on free ports and wait until it SERVES (its log goes to
    ``LOGS/<name>.log``; the archive serves once its store is open)."""
    spec = _spec(kind, env, name=name or kind, profile=profile, metrics=metrics)
    process = await start_async(spec, timeout=timeout, log_file=LOGS / f"{spec.name}.log")
    return Service(process)


def archive_env(backend: str, *, sqlite_path: Path | None = None, retention_days: int = 30) -> dict[str, str]:
    """Archive settings for a benchmark: the chosen backend, no background duties that would add noise."""
    env = {
        "ARCHIVE_BACKEND": backend,
        "ARCHIVE_RETENTION_DAYS": str(retention_days),
        "ARCHIVE_PURGE_INTERVAL_SECONDS": "0",
        "ARCHIVE_STATS_INTERVAL_SECONDS": "0",
        "ARCHIVE_HEALTH_PROBE_SECONDS": "0",
    }
    if backend == "sqlite":
        assert sqlite_path is not None
        env["ARCHIVE_SQLITE_PATH"] = str(sqlite_path)
    else:
        from tools.cassandra import ctl

        node = ctl.NodeConfig.from_env()
        env["ARCHIVE_CASSANDRA_HOSTS"] = node.host
        env["ARCHIVE_CASSANDRA_PORT"] = str(node.native_port)
        env["ARCHIVE_CASSANDRA_KEYSPACE"] = BENCH_KEYSPACE
    return env


async def start_archive(env: Mapping[str, str], *, profile: Path | None = None) -> Service:
    """``python -m services.archive`` with ``env`` (see :func:`archive_env`)."""
    return await start_service("archive", env, profile=profile)


async def start_ingest(
    archive: Service, env: Mapping[str, str] | None = None, *, profile: Path | None = None
) -> Service:
    """``python -m services.ingest`` in front of ``archive``."""
    full = {"INGEST_ARCHIVE_ADDR": archive.address, **(env or {})}
    return await start_service("ingest", full, profile=profile)


async def start_history(
    archive: Service, env: Mapping[str, str] | None = None, *, profile: Path | None = None
) -> Service:
    """``python -m services.history`` in front of ``archive`` with a fixed cursor secret."""
    full = {
        "HISTORY_ARCHIVE_ADDR": archive.address,
        "HISTORY_CURSOR_SECRETS": "b5" * 32,
        **(env or {}),
    }
    return await start_service("history", full, profile=profile)


@dataclass
class EdgeService:
    """A running ``python -m services.edge_peer``: its gRPC service, enode URL and Prometheus port."""

    service: Service
    enode: str
    node_key_file: Path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.service.pid

    @property
    def metrics_port(self) -> int:
        """Its Prometheus port."""
        return self.service.process.spec.metrics_port

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Scrape its ``/metrics`` (``{(sample name, sorted labels): value}``)."""
        return self.service.process.metrics()

    async def stop(self, timeout: float = 30) -> int:
        """SIGTERM (the edge flushes its ingest buffer), SIGKILL if it hangs; removes its node key."""
        code = await self.service.stop(timeout)
        self.node_key_file.unlink(missing_ok=True)
        return code


async def start_edge(
    ingest: Service,
    history: Service,
    env: Mapping[str, str] | None = None,
    *,
    name: str = "edge-peer",
    profile: Path | None = None,
) -> EdgeService:
    """``python -m services.edge_peer`` in front of ``ingest`` and ``history``, devp2p and metrics on free
    loopback ports, a fresh node key under :data:`WORK`; the enode URL comes from its ``NodeInfo``.

    Every other setting is the service's default (as deployed) unless ``env`` sets it.
    """
    from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc

    WORK.mkdir(parents=True, exist_ok=True)
    key_file = WORK / f"{name}.nodekey"
    key_file.unlink(missing_ok=True)
    full = {
        "EDGE_NODE_KEY_FILE": str(key_file),
        "EDGE_INGEST_ADDR": ingest.address,
        "EDGE_HISTORY_ADDR": history.address,
        "EDGE_INSTANCE": name,
        **(env or {}),
    }
    service = await start_service("edge_peer", full, name=name, profile=profile, metrics=True)
    try:
        async with grpc.aio.insecure_channel(service.address) as channel:
            info = await edgepeer_pb2_grpc.EdgePeerServiceStub(channel).NodeInfo(
                edgepeer_pb2.NodeInfoRequest(), timeout=10
            )
    except BaseException:
        await service.stop(5)
        raise
    return EdgeService(service, info.enode, key_file)


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (``VmRSS`` in ``/proc/<pid>/status``; 0 if gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def profile_path(suite: str, backend: str, service: str) -> Path | None:
    """Where to write ``service``'s cProfile when ``BENCH_PROFILE`` names it (comma-separated), else None.

    ``BENCH_PROFILE=archive,history python -m bench.run --suite history`` runs those services under
    ``python -m cProfile``; :func:`profile_summary` turns the file into the top functions.
    """
    wanted = {w.strip() for w in os.environ.get("BENCH_PROFILE", "").split(",") if w.strip()}
    if service not in wanted:
        return None
    return PROFILES / f"{suite}-{backend}-{service}.prof"


def profile_summary(path: Path, top: int = 25) -> str:
    """The ``top`` functions by own time and by cumulative time, as pstats prints them."""
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    text = out.getvalue()
    path.with_suffix(".txt").write_text(text)
    return text


@contextlib.asynccontextmanager
async def running(*services: Service) -> AsyncIterator[None]:
    """Stop ``services`` (in reverse order) when the block ends."""
    try:
        yield
    finally:
        for service in reversed(services):
            await service.stop()


# ------------------------------------------------------------------------------------------------ Cassandra


@contextlib.contextmanager
def cassandra_node() -> Iterator[None]:
    """The local Cassandra (``make cassandra-start``): started if it is not answering, stopped again if so.

    The node is the one ``tools/cassandra/ctl.py`` finds from the ``CASSANDRA_*`` variables, so a private
    node (its own state dir and ports) can be used on a machine where others stop and start the shared one.
    Raises with the controller's output when it cannot start: the Cassandra figures must not silently go
    missing.
    """
    ctl = [sys.executable, str(ROOT / "tools" / "cassandra" / "ctl.py")]
    status = subprocess.run([*ctl, "status"], cwd=ROOT, capture_output=True, text=True, check=False)
    started = False
    if status.returncode != 0:
        print("  starting the local Cassandra (make cassandra-start)", flush=True)
        start = subprocess.run([*ctl, "start"], cwd=ROOT, capture_output=True, text=True, check=False)
        if start.returncode != 0:
            raise RuntimeError(f"Cassandra did not start:\n{start.stdout}\n{start.stderr}")
        started = True
    try:
        yield
    finally:
        if started:
            subprocess.run([*ctl, "stop"], cwd=ROOT, capture_output=True, check=False)


def cassandra_pid() -> int | None:
    """The pid of the local Cassandra JVM on the default CQL port, if the controller recorded one."""
    from tools.cassandra import ctl

    with contextlib.suppress(Exception):
        return ctl.running_pid(ctl.NodeConfig.from_env())
    return None


def drop_bench_keyspace() -> None:
    """DROP KEYSPACE IF EXISTS :data:`BENCH_KEYSPACE` (nothing else is ever touched)."""
    from tools.cassandra import ctl

    cfg = ctl.NodeConfig.from_env()
    with ctl.session(cfg) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {BENCH_KEYSPACE}", timeout=120)


def settle_cassandra(keyspace: str = BENCH_KEYSPACE, timeout_s: float = 600.0) -> dict[str, float | bool]:
    """Flush ``keyspace`` and wait until the node has no compaction running or pending.

    A freshly loaded keyspace keeps the node compacting for minutes; queries measured meanwhile share the two
    cores with that and read more SSTables than an archive at rest would. History figures are for the
    archive at rest, so the suite settles first and records how long that took. Polls ``nodetool
    compactionstats`` (pending) and ``system_views.sstable_tasks`` (running) every 2 s, up to ``timeout_s``.
    """
    from tools.cassandra import ctl

    ctl_cmd = [sys.executable, str(ROOT / "tools" / "cassandra" / "ctl.py")]
    began = time.perf_counter()
    subprocess.run([*ctl_cmd, "nodetool", "flush", keyspace], cwd=ROOT, capture_output=True, check=True)
    cfg = ctl.NodeConfig.from_env()
    settled = False
    with ctl.session(cfg) as session:
        while time.perf_counter() - began < timeout_s:
            stats = subprocess.run(
                [*ctl_cmd, "nodetool", "compactionstats"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            pending = re.search(r"pending tasks\s+(\d+)", stats)
            running = list(session.execute("SELECT task_id FROM system_views.sstable_tasks"))
            if pending is not None and int(pending.group(1)) == 0 and not running:
                settled = True
                break
            time.sleep(2.0)
    return {"settle_s": round(time.perf_counter() - began, 1), "settled": settled}
