"""The send service (issue 11): Sends accepted and persisted per second, and send → sent / stored latency.

Setup, as deployed: ``python -m services.archive`` (SQLite), ``services.ingest``, ``services.history``,
``services.edge_peer`` and ``services.send``, each its own process on loopback ports with its default
settings (only addresses, ports, the store and ``SEND_HEALTH_ADDR=""`` — no health service, so nothing is
paused) and one relaying Waku peer (``wakunode.WakuClient``, waku/1, PoW 0, full bloom) connected to the edge
peer over RLPx. The messaging store is SQLite (a fresh file) or the local Cassandra node (keyspace
``mailmesh_bench``, dropped afterwards). This process is the gRPC client.

1. **accepted + persisted, engine idle** — before the send service starts, this process takes every outbox
   shard lease under another owner's name for an hour, so the service accepts and persists each Send (the
   RequestID is answered once the request is durable) and never works on it: the Send path alone.
   ``BENCH_SEND_SECONDS`` (15 s) of 50 callers back to back (closed loop); rate = completed Sends ÷ time,
   p50/p99 of each call. By Little's law a closed loop's latency is 50 ÷ rate, so the same path is then
   offered **1,000 Sends/s** open loop for as long (at most 50 in flight; latency from each Send's scheduled
   start, so a stall is not hidden) — the p99 target is for that.
2. **the same while the engine sends them** — a fresh store, the service owns its shards, every request is
   sealed and published through the edge peer to the Waku peer (four state changes each). Closed loop as in 1,
   then the time until nothing is pending.
3. **send → sent, send → stored** — on a fresh store and service, ``BENCH_SEND_LATENCY`` (200) Sends, one
   every 50 ms, each with ``confirm_mode = STORE`` (the archive is the store: no storeNodes). A
   ``WatchSendStatuses`` stream (live) timestamps the first status of each request with ``sent`` and with
   ``stored``; the figure is from the Send call's start to that arrival. The Waku peer's receipt of the
   envelope is reported beside it.

CPU per Send comes from ``/proc`` (:class:`bench.support.CpuMeter`): the send process's (and the edge peer's,
this process's, Cassandra's JVM's) CPU seconds ÷ Sends are barely moved by other jobs on the machine, unlike
the rates. The client side (loops, the timing watch) is in :mod:`bench.send_load`. ``BENCH_PROFILE=send``
runs the service under cProfile; ``BENCH_BACKENDS`` chooses the backends (``sqlite,cassandra``);
``BENCH_SEND_SECONDS`` and ``BENCH_SEND_LATENCY`` the sizes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio

from bench.harness import Result, config
from bench.send_load import (
    IN_FLIGHT,
    LATENCY_GAP_S,
    Arrivals,
    Run,
    closed_loop,
    drained,
    open_loop,
    timed_sends,
)
from bench.support import (
    BENCH_KEYSPACE,
    WORK,
    CpuMeter,
    EdgeService,
    Service,
    archive_env,
    cassandra_node,
    cassandra_pid,
    drop_bench_keyspace,
    env_int,
    profile_path,
    profile_summary,
    running,
    start_archive,
    start_edge,
    start_history,
    start_ingest,
    start_service,
    summarize_ms,
)
from devp2p.config import ServerConfig, SessionConfig
from mailmesh.send.v1 import send_pb2_grpc
from msgstore.config import StoreConfig
from msgstore.factory import open_store
from msgstore.sharding import lease_name
from wakunode.client import WakuClient
from wakunode.config import NodeConfig

FULL = {"seconds": 15, "latency": 200}
QUICK = {"seconds": 3, "latency": 20}
RATE_TARGET = 1000.0
P99_TARGET_MS = 25.0
SENT_TARGET_MS = 50.0
STORED_TARGET_MS = 1000.0
PEER_CONFIG = NodeConfig(pow_requirement=0.0, capabilities=("waku/1",))
PEER_SERVER = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=5.0))
GHOST = "bench-ghost"
_cassandra: dict[str, int] = {}  # the local node's JVM pid while the Cassandra backend is measured


def _size(name: str) -> int:
    return QUICK[name] if config().quick else env_int(f"BENCH_SEND_{name.upper()}", FULL[name])


def _store_env(backend: str, path: Path) -> dict[str, str]:
    if backend == "sqlite":
        return {"MSGSTORE_BACKEND": "sqlite", "MSGSTORE_SQLITE_PATH": str(path)}
    from tools.cassandra import ctl

    node = ctl.NodeConfig.from_env()
    return {
        "MSGSTORE_BACKEND": "cassandra",
        "MSGSTORE_CASSANDRA_HOSTS": node.host,
        "MSGSTORE_CASSANDRA_PORT": str(node.native_port),
        "MSGSTORE_CASSANDRA_KEYSPACE": BENCH_KEYSPACE,
    }


async def _fresh_store(backend: str, path: Path) -> dict[str, str]:
    if backend == "sqlite":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        await asyncio.to_thread(drop_bench_keyspace)
    return _store_env(backend, path)


async def _ghost_leases(env: dict[str, str]) -> None:
    """Take every outbox shard lease under another owner for an hour (the service then only accepts)."""
    cfg = StoreConfig.from_env(env)
    async with open_store(cfg) as store:
        for shard in range(cfg.outbox_shards):
            taken = await store.leases.acquire(lease_name(shard), GHOST, 3600.0, time.time())
            assert taken is not None, f"outbox shard {shard} is held already"


@dataclass
class _Mesh:
    archive: Service
    ingest: Service
    history: Service
    edge: EdgeService


async def _start_send(mesh: _Mesh, backend: str, store_env: dict[str, str], tag: str) -> Service:
    env = {
        "SEND_EDGE_ADDR": mesh.edge.service.address,
        "SEND_HISTORY_ADDR": mesh.history.address,
        "SEND_HEALTH_ADDR": "",
        **store_env,
    }
    return await start_service(
        "send", env, name=f"send-{tag}", profile=profile_path("send", f"{backend}-{tag}", "send")
    )


def _report(service: Service) -> None:
    if service.profile is not None and service.profile.exists():
        print(profile_summary(service.profile, 30)[:12000], flush=True)


def _rate_results(label: str, run: Run, cpu: dict[str, Any], *, targets: bool) -> list[Result]:
    stats = summarize_ms(run.latencies)
    detail = {**stats, "cpu": cpu, "in_flight": IN_FLIGHT}
    return [
        Result(
            f"{label}: Sends accepted + persisted, {IN_FLIGHT} in flight (closed loop)",
            round(run.rate, 1),
            "Sends/s",
            detail,
            target=RATE_TARGET if targets else None,
        ),
        Result(f"{label}: Send p50 at {IN_FLIGHT} in flight", stats["p50_ms"], "ms", lower_is_better=True),
        Result(
            f"{label}: Send p99 at {IN_FLIGHT} in flight",
            stats["p99_ms"],
            "ms",
            target=P99_TARGET_MS if targets else None,
            lower_is_better=True,
        ),
    ]


async def _measure(
    label: str, send: Service, work: Callable[[Any], Awaitable[Run]], edge: EdgeService
) -> tuple[Run, dict[str, Any]]:
    pids = {"send": send.pid, "edge peer": edge.pid, "bench client": os.getpid()}
    if (jvm := _cassandra.get("pid")) is not None:
        pids["cassandra"] = jvm
    async with grpc.aio.insecure_channel(send.address) as channel:
        stub = send_pb2_grpc.SendServiceStub(channel)
        with CpuMeter(pids) as meter:
            run = await work(stub)
    cpu = meter.report(per=max(1, len(run.latencies)), unit="Send")
    print(f"  {label}: {run.rate:,.0f}/s {summarize_ms(run.latencies)} cpu {cpu}", flush=True)
    return run, cpu


async def _latency(send: Service, arrivals: Arrivals, n: int) -> list[Result]:
    """Send → sent / stored as a client sees them (see the module docstring, 3)."""
    async with grpc.aio.insecure_channel(send.address) as channel:
        times = await timed_sends(send_pb2_grpc.SendServiceStub(channel), n)
    started = times.started
    sent = summarize_ms([times.sent[r] - t for r, t in started.items() if r in times.sent])
    stored = summarize_ms([times.stored[r] - t for r, t in started.items() if r in times.stored])
    hashes = times.envelope
    peer = summarize_ms(
        [arrivals.at[hashes[r]] - t for r, t in started.items() if hashes.get(r) in arrivals.at]
    )
    print(f"  send -> sent {sent}; stored {stored}; peer {peer}", flush=True)
    common = {
        "sends": n,
        "gap_ms": LATENCY_GAP_S * 1000,
        "peer_received": peer,
        "never_stored": n - stored["n"],
    }
    p50, p99 = "send → sent p50, one Waku peer", "send → sent p99, one Waku peer"
    s50, s99 = "send → stored p50 (archive as store)", "send → stored p99 (archive as store)"
    return [
        Result(p50, sent["p50_ms"], "ms", {**common, **sent}, target=SENT_TARGET_MS, lower_is_better=True),
        Result(p99, sent["p99_ms"], "ms", lower_is_better=True),
        Result(s50, stored["p50_ms"], "ms", stored, target=STORED_TARGET_MS, lower_is_better=True),
        Result(s99, stored["p99_ms"], "ms", lower_is_better=True),
    ]


async def _backend(backend: str) -> list[Result]:
    seconds = float(_size("seconds"))
    tag = "SQLite" if backend == "sqlite" else "Cassandra"
    WORK.mkdir(parents=True, exist_ok=True)
    store_path = WORK / "send-messaging.sqlite3"
    archive_path = WORK / "send-archive.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{archive_path}{suffix}").unlink(missing_ok=True)
    results: list[Result] = []
    counter = [0]
    archive = await start_archive(archive_env("sqlite", sqlite_path=archive_path))
    async with running(archive):
        ingest = await start_ingest(archive)
        history = await start_history(archive)
        edge = await start_edge(ingest, history, name="send-edge")
        mesh = _Mesh(archive, ingest, history, edge)
        arrivals = Arrivals()
        peer = WakuClient(config=PEER_CONFIG, server_config=PEER_SERVER, sink=arrivals)
        async with running(ingest, history), contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(edge.stop)
            await peer.start()
            stack.push_async_callback(peer.stop)
            await peer.connect(edge.enode, timeout=15, trust=False)
            # 1. the Send path alone: every shard held by another owner
            store_env = await _fresh_store(backend, store_path)
            await _ghost_leases(store_env)
            send = await _start_send(mesh, backend, store_env, "idle")
            async with running(send):
                closed, cpu = await _measure(
                    "idle, closed loop", send, lambda s: closed_loop(s, seconds, counter), edge
                )
                paced, paced_cpu = await _measure(
                    "idle, 1,000/s offered", send, lambda s: open_loop(s, seconds, counter), edge
                )
            _report(send)
            # The goals are for the default backend (SQLite); Cassandra's figures are reported.
            goals = backend == "sqlite"
            results += _rate_results(f"{tag}, engine idle", closed, cpu, targets=goals)
            paced_stats = summarize_ms(paced.latencies)
            results += [
                Result(
                    f"{tag}, engine idle: Send p50 at 1,000/s offered (≤ {IN_FLIGHT} in flight)",
                    paced_stats["p50_ms"],
                    "ms",
                    {**paced_stats, "throttled": paced.throttled, "cpu": paced_cpu},
                    lower_is_better=True,
                ),
                Result(
                    f"{tag}, engine idle: Send p99 at 1,000/s offered (≤ {IN_FLIGHT} in flight)",
                    paced_stats["p99_ms"],
                    "ms",
                    target=P99_TARGET_MS if goals else None,
                    lower_is_better=True,
                ),
            ]
            # 2. the engine sends every request
            store_env = await _fresh_store(backend, store_path)
            send = await _start_send(mesh, backend, store_env, "engine")
            async with running(send):
                busy, busy_cpu = await _measure(
                    "engine sending, closed loop", send, lambda s: closed_loop(s, seconds, counter), edge
                )
                async with grpc.aio.insecure_channel(send.address) as channel:
                    drain_s = await drained(send_pb2_grpc.SendServiceStub(channel))
                busy_cpu["drain_after_s"] = round(drain_s, 1)
            _report(send)
            results += _rate_results(f"{tag}, engine sending", busy, busy_cpu, targets=False)
            # 3. latency with one connected peer, on a fresh store and service
            store_env = await _fresh_store(backend, store_path)
            send = await _start_send(mesh, backend, store_env, "latency")
            async with running(send):
                results += [
                    Result(f"{tag}: {r.name}", r.value, r.unit, r.detail, r.target, r.lower_is_better)
                    for r in await _latency(send, arrivals, _size("latency"))
                ]
    return results


def run() -> list[Result]:
    """Run the send suite (SQLite, then Cassandra on the local node)."""
    backends = [
        b for b in ("sqlite", "cassandra") if b in os.environ.get("BENCH_BACKENDS", "sqlite,cassandra")
    ]
    results: list[Result] = []
    for backend in backends:
        if backend == "cassandra":
            with cassandra_node():
                if (jvm := cassandra_pid()) is not None:
                    _cassandra["pid"] = jvm
                try:
                    results += asyncio.run(_backend(backend))
                finally:
                    _cassandra.clear()
                    with contextlib.suppress(Exception):
                        drop_bench_keyspace()
        else:
            results += asyncio.run(_backend(backend))
    return results
