"""The REST gateway (issue 12): `POST /send` throughput and latency at 50 concurrent clients, SSE fan-out to
200 clients, long-poll wake-up delay.

The whole mesh runs as processes on free ports (archive, ingest, history, edge peer, health, send,
subscription, gateway; SQLite), with one real wakunode RLPx peer connected so the node is healthy and every
send goes out for real. The benchmark process is only the client: HTTP/1.1 keep-alive connections written by
hand over asyncio streams (one request in flight per connection), because a general client library would
spend more CPU per request than the gateway and, sharing the same two cores, lower the figure it measures.

1. **POST /send** — 50 connections each send back to back for ``BENCH_GATEWAY_SECONDS`` (15 s); requests/s
   and p50/p99 latency (first byte written → whole answer read). The same load is then put on a gateway
   whose send service is a stub answering at once (``python -m bench.gateway --stub-send``, its own process):
   the gateway's own ceiling, which says whether the gateway or the send service behind it limits.
2. **SSE fan-out** — run first, on the fresh mesh (the event log still for 2 s): after the POST load the
   mesh digests thousands of requests' later events (store confirmations) for minutes, and the figure would
   measure that backlog. 200 `GET /events/stream` clients; messages are sent at 5/s for 10 s (each makes
   several events); an event's delay is its arrival at a client minus its `emittedAt` (stamped by the
   subscription service as it writes the event, same clock), over every (client, event).
3. **Long-poll wake-up** — one `GET /events?wait=30` waits; a send happens; the delay is the answer's arrival
   minus the first event's `emittedAt`; 30 times. Also before the POST load, for the same reason.

CPU per process is in each result's detail (``CpuMeter``), with what other jobs on the machine used meanwhile.
``BENCH_GATEWAY_PHASES`` picks phases (comma-separated, default all): ``events`` (2 and 3), ``mesh`` (1
through the mesh), ``stub`` (1 against the stub only, no mesh started) — e.g. ``BENCH_GATEWAY_PHASES=stub``
to measure the gateway's own cost per request alone.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.harness import Result, config
from bench.support import LOGS, WORK, CpuMeter, client_collector_off, env_int, summarize_ms
from devp2p.config import ServerConfig, SessionConfig
from meshharness import FreePorts, ServiceProcess, ServiceSpec, plan, start_mesh
from meshharness import Mesh as ProcessMesh
from wakunode.client import CLIENT_CONFIG, WakuClient

FULL = {"seconds": 15, "clients": 50, "sse_clients": 200, "sse_seconds": 10, "wakeups": 30}
QUICK = {"seconds": 3, "clients": 50, "sse_clients": 50, "sse_seconds": 3, "wakeups": 5}
TOPIC = "/waku/1/0x0b0e0c0d/rfc26"
PEER = replace(CLIENT_CONFIG, capabilities=("waku/1",), pow_requirement=0.0)
PEER_SERVER = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=5.0))
_EMITTED = re.compile(rb'"emittedAt":"([^"]+)"')
PHASES = ("events", "mesh", "stub")


def _phases() -> set[str]:
    """The phases ``BENCH_GATEWAY_PHASES`` asks for (default: every one, in the suite's order)."""
    raw = os.environ.get("BENCH_GATEWAY_PHASES", "").strip()
    asked = {p.strip() for p in raw.split(",") if p.strip()} if raw else set(PHASES)
    unknown = asked - set(PHASES)
    if unknown:
        raise ValueError(f"BENCH_GATEWAY_PHASES: unknown {sorted(unknown)}; known: {', '.join(PHASES)}")
    return asked


def _sizes() -> dict[str, int]:
    if config().quick:
        return dict(QUICK)
    return {name: env_int(f"BENCH_GATEWAY_{name.upper()}", default) for name, default in FULL.items()}


# ---------------------------------------------------------------------------------------------- HTTP client


class Conn:
    """One HTTP/1.1 keep-alive connection, one request at a time (what a simple REST client does)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        """Write a whole request, read the whole answer: (status, body)."""
        self.writer.write(raw)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def post(path: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()


def send_body(n: int) -> bytes:
    """A POST /send of ~1 KiB (a Status-sized message), different every time (its own hash)."""
    payload = base64.b64encode(n.to_bytes(8, "big") * 128).decode()
    return post("/send", {"contentTopic": TOPIC, "payload": payload})


async def load(port: int, clients: int, seconds: float) -> tuple[int, list[float], dict[int, int]]:
    """``clients`` connections sending POST /send back to back for ``seconds``: (answers, latencies,
    statuses)."""
    counter = itertools.count()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    stop_at = time.perf_counter() + seconds

    async def one() -> None:
        conn = await Conn.open(port)
        try:
            while time.perf_counter() < stop_at:
                raw = send_body(next(counter))
                began = time.perf_counter()
                status, _ = await conn.request(raw)
                latencies.append(time.perf_counter() - began)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            conn.close()

    with client_collector_off():
        await asyncio.gather(*(one() for _ in range(clients)))
    return len(latencies), latencies, statuses


# ------------------------------------------------------------------------------------------------- the mesh


def _mesh(tmp: Path, send_addr: str | None = None) -> ProcessMesh:
    (tmp / "cursor.secret").write_text("44" * 32 + "\n")
    (tmp / "cursor.secret").chmod(0o600)

    def specs() -> list[ServiceSpec]:
        if send_addr:  # the gateway alone, every upstream the stub (only Send is called)
            stub = {f"GATEWAY_{name}_ADDR": send_addr for name in ("SEND", "SUBSCRIPTION", "HEALTH")}
            return plan(["gateway"], ports=FreePorts(), state_dir=tmp, env={"gateway": stub})
        return plan(
            ["archive", "ingest", "history", "edge_peer", "health", "send", "subscription", "gateway"],
            ports=FreePorts(),
            state_dir=tmp,
            env={
                "ingest": {"INGEST_MIN_POW": "0"},
                "edge_peer": {"EDGE_MIN_POW": "0"},
                "health": {
                    "HEALTH_MINIMALLY_HEALTHY_PEERS": "1",
                    "HEALTH_HEALTHY_PEERS": "1",
                    "HEALTH_HOLD_SECONDS": "0",
                },
            },
        )

    return start_mesh(specs, timeout=120, log_dir=LOGS / "gateway")


def _port(mesh: ProcessMesh) -> int:
    return int(mesh.get("gateway").spec.env["GATEWAY_HTTP_PORT"])


def _enode(edge: ServiceProcess) -> str:
    line = edge.logs.wait_for(lambda line: bool(line.record and line.record.get("enode")), 60)
    assert line.record is not None
    return str(line.record["enode"])


def _pids(mesh: ProcessMesh) -> dict[str, int]:
    return {"bench client": os.getpid(), **{s.name: s.pid for s in mesh.services}}


async def _healthy(port: int) -> None:
    conn = await Conn.open(port)
    try:
        async with asyncio.timeout(60):
            while True:
                _, body = await conn.request(get("/health?wait=10&status=Unhealthy"))
                if json.loads(body)["status"] != "Unhealthy":
                    return
    finally:
        conn.close()


async def _drained(port: int, limit_s: float = 300.0) -> None:
    """Wait until the send service has no pending request (GET /send/requests is empty), bounded."""
    conn = await Conn.open(port)
    try:
        async with asyncio.timeout(limit_s):
            while True:
                _, body = await conn.request(get("/send/requests"))
                if json.loads(body) == []:
                    return
                await asyncio.sleep(1.0)  # polling the outbox, bounded by the timeout
    finally:
        conn.close()


async def _quiet(port: int, limit_s: float = 300.0) -> None:
    """Wait until the event log has been still for 2 s (the subscription service has merged the backlog)."""
    conn = await Conn.open(port)
    try:
        _, body = await conn.request(get("/events?wait=0"))
        after = json.loads(body)["lastSequence"]
        async with asyncio.timeout(limit_s):
            while True:
                _, body = await conn.request(get(f"/events?after={after}&wait=2&limit=1000"))
                page = json.loads(body)
                if not page["events"]:
                    return
                after = page["lastSequence"]
    finally:
        conn.close()


# -------------------------------------------------------------------------------------------- 1. POST /send


async def _send_rate(mesh: ProcessMesh, sizes: dict[str, int], label: str, *, target: bool) -> list[Result]:
    port = _port(mesh)
    await load(port, 10, 1.0)  # warm: connections, code paths, the send service's outbox
    with CpuMeter(_pids(mesh)) as meter:
        count, latencies, statuses = await load(port, sizes["clients"], sizes["seconds"])
    rate = count / meter.wall_s
    stats = summarize_ms(latencies)
    detail = {
        "statuses": statuses,
        "clients": sizes["clients"],
        **stats,
        **meter.report(per=count, unit="request"),
    }
    print(
        f"  {label}: {rate:,.0f} req/s, p50 {stats['p50_ms']} ms, p99 {stats['p99_ms']} ms, {statuses}",
        flush=True,
    )
    return [
        Result(
            f"{label}: POST /send, {sizes['clients']} concurrent clients",
            round(rate, 1),
            "requests/s",
            detail,
            1000.0 if target else None,
        ),
        Result(f"{label}: POST /send latency p50", stats["p50_ms"], "ms", {}, None, lower_is_better=True),
        Result(
            f"{label}: POST /send latency p99",
            stats["p99_ms"],
            "ms",
            {},
            50.0 if target else None,
            lower_is_better=True,
        ),
    ]


# ------------------------------------------------------------------------------------------- 2. SSE fan-out


def _emitted_s(text: bytes) -> float:
    stamp = text.decode().replace("Z", "+00:00")
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


async def _sse_client(port: int, delays: list[float], ready: asyncio.Event, opened: list[int]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(get("/events/stream?types=message:change"))
    try:
        await reader.readuntil(b"\r\n\r\n")
        opened.append(1)
        ready.set()
        while True:
            line = await reader.readline()
            if not line:
                return
            found = _EMITTED.search(line)
            if found is not None:
                delays.append(time.time() - _emitted_s(found.group(1)))
    finally:
        writer.close()


async def _fanout(mesh: ProcessMesh, sizes: dict[str, int]) -> list[Result]:
    port = _port(mesh)
    delays: list[float] = []
    opened: list[int] = []
    ready = asyncio.Event()
    clients = [
        asyncio.create_task(_sse_client(port, delays, ready, opened)) for _ in range(sizes["sse_clients"])
    ]
    try:
        async with asyncio.timeout(60):
            while len(opened) < len(clients):
                await asyncio.sleep(0.05)  # until every stream is open (a bounded state check)
        conn = await Conn.open(port)
        sent = 0
        with CpuMeter(_pids(mesh)) as meter:
            began = time.perf_counter()
            while time.perf_counter() - began < sizes["sse_seconds"]:
                status, _ = await conn.request(send_body(10**9 + sent))
                assert status == 200, status
                sent += 1
                await asyncio.sleep(0.2)  # 5 sends/s: the pace of a chat, not a flood
            await asyncio.sleep(2.0)  # let the last events arrive before the streams close
        conn.close()
    finally:
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)
    stats = summarize_ms(delays)
    per_client = len(delays) / max(len(clients), 1)
    detail = {
        "clients": len(clients),
        "sends": sent,
        "events_per_client": round(per_client, 1),
        **stats,
        **meter.report(),
    }
    print(
        f"  SSE: {len(clients)} clients, {per_client:.0f} events each, p50 {stats.get('p50_ms')} ms, "
        f"p99 {stats.get('p99_ms')} ms",
        flush=True,
    )
    return [
        Result(
            f"SSE fan-out to {len(clients)} clients: event delay p50 (emitted → client)",
            stats["p50_ms"],
            "ms",
            detail,
            None,
            lower_is_better=True,
        ),
        Result(
            f"SSE fan-out to {len(clients)} clients: event delay p99",
            stats["p99_ms"],
            "ms",
            {},
            100.0,
            lower_is_better=True,
        ),
    ]


# --------------------------------------------------------------------------------------------- 3. long poll


async def _wakeups(mesh: ProcessMesh, sizes: dict[str, int]) -> list[Result]:
    port = _port(mesh)
    poller, sender = await Conn.open(port), await Conn.open(port)
    delays: list[float] = []
    try:
        _, body = await poller.request(get("/events?wait=0"))
        after = json.loads(body)["lastSequence"]
        for n in range(sizes["wakeups"]):
            poll = asyncio.create_task(
                poller.request(get(f"/events?after={after}&wait=30&types=message:change&limit=1"))
            )
            await asyncio.sleep(0.3)  # let the poll reach the subscription service before the event exists
            await sender.request(send_body(2 * 10**9 + n))
            status, body = await poll
            arrived = time.time()
            page = json.loads(body)
            assert status == 200 and page["events"], body
            delays.append(arrived - _emitted_s(page["events"][0]["emittedAt"].encode()))
            # Skip past everything this send caused, so the next poll waits for the next send.
            await asyncio.sleep(1.0)
            _, body = await poller.request(get("/events?wait=0&limit=1000"))
            after = json.loads(body)["lastSequence"]
    finally:
        poller.close()
        sender.close()
    stats = summarize_ms(delays)
    print(f"  long poll: wake-up p50 {stats['p50_ms']} ms, p99 {stats['p99_ms']} ms", flush=True)
    return [
        Result(
            "long poll GET /events?wait: wake-up delay p50 (emitted → answer)",
            stats["p50_ms"],
            "ms",
            stats,
            None,
            lower_is_better=True,
        ),
        Result(
            "long poll GET /events?wait: wake-up delay p99",
            stats["p99_ms"],
            "ms",
            {},
            None,
            lower_is_better=True,
        ),
    ]


# ------------------------------------------------------------------------------------------------- the stub


def _stub_main(port_file: str) -> None:
    """``python -m bench.gateway --stub-send FILE``: a SendService answering Send at once; port in FILE."""
    import uuid

    import grpc.aio

    from mailmesh.send.v1 import send_pb2, send_pb2_grpc

    class Stub(send_pb2_grpc.SendServiceServicer):
        async def Send(self, request: Any, context: Any) -> Any:  # noqa: N802
            return send_pb2.SendResponse(request_id=str(uuid.uuid4()), message_hash=bytes(32), created=True)

    async def serve() -> None:
        server = grpc.aio.server()
        send_pb2_grpc.add_SendServiceServicer_to_server(Stub(), server)  # type: ignore[abstract]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        Path(port_file).write_text(str(port))
        await server.wait_for_termination()

    asyncio.run(serve())


async def _start_stub(tmp: Path) -> tuple[asyncio.subprocess.Process, str]:
    port_file = tmp / "stub.port"
    port_file.unlink(missing_ok=True)  # a previous run's port must not be taken for this stub's
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.gateway", "--stub-send", str(port_file)
    )
    async with asyncio.timeout(60):
        while not port_file.exists() or not port_file.read_text():
            await asyncio.sleep(0.05)  # until the stub wrote its port (a bounded state check)
    return proc, f"127.0.0.1:{port_file.read_text()}"


# ---------------------------------------------------------------------------------------------------- suite


async def _suite(sizes: dict[str, int], phases: set[str]) -> list[Result]:
    tmp = WORK / "gateway"
    tmp.mkdir(parents=True, exist_ok=True)
    for old in tmp.iterdir():
        if old.is_file():
            old.unlink()
    results: list[Result] = []
    if phases & {"events", "mesh"}:
        results += await _mesh_phases(tmp, sizes, phases)
    if "stub" in phases:
        results += await _stub_phase(tmp, sizes)
    return results


async def _mesh_phases(tmp: Path, sizes: dict[str, int], phases: set[str]) -> list[Result]:
    results: list[Result] = []
    mesh = await asyncio.to_thread(_mesh, tmp)
    peer = WakuClient(config=PEER, server_config=PEER_SERVER)
    try:
        await peer.start()
        await peer.connect(_enode(mesh.get("edge_peer")), timeout=15)
        await _healthy(_port(mesh))
        if "events" in phases:
            # The event figures first, on a mesh with no backlog: after the POST load the mesh is still
            # digesting thousands of requests' later events (store confirmations) for minutes, and those
            # figures would measure that backlog, not the fan-out.
            await _quiet(_port(mesh))
            results += await _fanout(mesh, sizes)
            results += await _wakeups(mesh, sizes)
        if "mesh" in phases:
            await _drained(_port(mesh))
            await _quiet(_port(mesh))
            results += await _send_rate(
                mesh, sizes, "through the mesh (send service on SQLite, 1 RLPx peer)", target=True
            )
    finally:
        await peer.stop()
        await asyncio.to_thread(mesh.stop, 30)
    return results


async def _stub_phase(tmp: Path, sizes: dict[str, int]) -> list[Result]:
    stub_dir = tmp / "stub"
    stub_dir.mkdir(exist_ok=True)
    stub, address = await _start_stub(stub_dir)
    try:
        mesh = await asyncio.to_thread(_mesh, stub_dir, address)
        try:
            return await _send_rate(mesh, sizes, "gateway alone (stub send service)", target=False)
        finally:
            await asyncio.to_thread(mesh.stop, 30)
    finally:
        stub.terminate()
        await stub.wait()


def run() -> list[Result]:
    """Run the gateway suite."""
    return asyncio.run(_suite(_sizes(), _phases()))


def _main(argv: Sequence[str]) -> None:
    if len(argv) == 2 and argv[0] == "--stub-send":
        _stub_main(argv[1])
        return
    for result in run():
        print(result)


if __name__ == "__main__":
    _main(sys.argv[1:])
