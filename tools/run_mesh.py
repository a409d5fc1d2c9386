"""Run the whole Mailmesh mesh as local processes (``make run``) and stop it cleanly on Ctrl-C / SIGTERM.

Each service runs as ``python -m services.<name>`` with its ports and peers passed as environment variables
(the same variables the Helm chart sets). Output lines are prefixed with the service name. If any service
exits on its own, the rest are stopped and the runner exits non-zero, so a broken mesh never looks healthy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ServiceSpec:
    """How to start one service locally."""

    name: str
    module: str
    env: dict[str, str] = field(default_factory=dict)


#: Offsets from the base ports (DESIGN.md: edge-peer 50051, ingest 50052, archive 50053, history 50054, …).
OFFSETS = {"edge_peer": 1, "ingest": 2, "archive": 3, "history": 4}


def mesh_specs(
    archive: str,
    state_dir: Path,
    *,
    grpc_base: int = 50050,
    metrics_base: int = 9150,
    devp2p_port: int = 30303,
) -> list[ServiceSpec]:
    """The services in start order, on ``base + offset`` ports (defaults are DESIGN.md's ports)."""
    grpc_port = {name: grpc_base + off for name, off in OFFSETS.items()}
    metrics_port = {name: metrics_base + off for name, off in OFFSETS.items()}
    addr = {name: f"127.0.0.1:{port}" for name, port in grpc_port.items()}
    return [
        ServiceSpec(
            "archive",
            "services.archive",
            {
                "ARCHIVE_GRPC_PORT": str(grpc_port["archive"]),
                "ARCHIVE_METRICS_PORT": str(metrics_port["archive"]),
                "ARCHIVE_BACKEND": archive,
                "ARCHIVE_SQLITE_PATH": str(state_dir / "archive.sqlite3"),
            },
        ),
        ServiceSpec(
            "ingest",
            "services.ingest",
            {
                "INGEST_GRPC_PORT": str(grpc_port["ingest"]),
                "INGEST_METRICS_PORT": str(metrics_port["ingest"]),
                "INGEST_ARCHIVE_ADDR": addr["archive"],
            },
        ),
        ServiceSpec(
            "history",
            "services.history",
            {
                "HISTORY_GRPC_PORT": str(grpc_port["history"]),
                "HISTORY_METRICS_PORT": str(metrics_port["history"]),
                "HISTORY_ARCHIVE_ADDR": addr["archive"],
                "HISTORY_CURSOR_SECRET_FILE": str(state_dir / "cursor.secret"),
            },
        ),
        ServiceSpec(
            "edge_peer",
            "services.edge_peer",
            {
                "EDGE_GRPC_PORT": str(grpc_port["edge_peer"]),
                "EDGE_METRICS_PORT": str(metrics_port["edge_peer"]),
                "EDGE_LISTEN_PORT": str(devp2p_port),
                "EDGE_NODE_KEY_FILE": str(state_dir / "edge-peer.nodekey"),
                "EDGE_INGEST_ADDR": addr["ingest"],
                "EDGE_HISTORY_ADDR": addr["history"],
            },
        ),
    ]


async def _pump(name: str, stream: asyncio.StreamReader) -> None:
    width = 10
    while line := await stream.readline():
        sys.stdout.write(f"{name:<{width}}| {line.decode(errors='replace')}")
        sys.stdout.flush()


async def run(specs: list[ServiceSpec], grace_s: float) -> int:
    """Start every service, wait for a signal or a crash, then stop them all."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    procs: dict[str, asyncio.subprocess.Process] = {}
    pumps: list[asyncio.Task[None]] = []
    for spec in specs:
        env = {**os.environ, **spec.env}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            spec.module,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches only us; we decide how children stop
        )
        procs[spec.name] = proc
        assert proc.stdout is not None
        pumps.append(asyncio.create_task(_pump(spec.name, proc.stdout)))
    waiters = {asyncio.create_task(p.wait()): name for name, p in procs.items()}
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({stopper, *waiters}, return_when=asyncio.FIRST_COMPLETED)
    crashed = [waiters[t] for t in done if t in waiters]
    if crashed:
        print(f"mesh: {', '.join(crashed)} exited on its own; stopping the rest", flush=True)
    else:
        print("mesh: stopping (signal received)", flush=True)
    for proc in procs.values():
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs.values())), timeout=grace_s)
    except TimeoutError:
        for name, proc in procs.items():
            if proc.returncode is None:
                print(f"mesh: {name} did not stop within {grace_s}s; killing", flush=True)
                proc.kill()
        await asyncio.gather(*(p.wait() for p in procs.values()))
    await asyncio.gather(*pumps, return_exceptions=True)
    stopper.cancel()
    for name, proc in procs.items():
        print(f"mesh: {name} exited with {proc.returncode}", flush=True)
    return 1 if crashed else 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", choices=["sqlite", "cassandra"], default="sqlite")
    parser.add_argument("--state-dir", type=Path, default=ROOT / "var" / "mesh")
    parser.add_argument("--grace", type=float, default=15.0, help="seconds to wait for a clean stop")
    parser.add_argument("--grpc-base-port", type=int, default=50050, help="gRPC port = base + service offset")
    parser.add_argument("--metrics-base-port", type=int, default=9150, help="metrics port = base + offset")
    parser.add_argument("--devp2p-port", type=int, default=30303, help="the edge peer's RLPx TCP port")
    ns = parser.parse_args(argv)
    ns.state_dir.mkdir(parents=True, exist_ok=True)
    specs = mesh_specs(
        ns.archive,
        ns.state_dir,
        grpc_base=ns.grpc_base_port,
        metrics_base=ns.metrics_base_port,
        devp2p_port=ns.devp2p_port,
    )
    return asyncio.run(run(specs, ns.grace))


if __name__ == "__main__":
    sys.exit(main())
