"""Run the whole Mailmesh mesh as local processes (``make run``) and stop it cleanly on Ctrl-C / SIGTERM.

Each service runs as ``python -m services.<name>`` with its ports and peers passed as environment variables
(the same variables the Helm chart sets), started by the process harness (``libs/meshharness``) from its
catalog. Output lines are prefixed with the service name. If any service exits on its own, the rest are
stopped and the runner exits non-zero, so a broken mesh never looks healthy.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from meshharness import CATALOG, FixedPorts, Mesh, ServiceProcess, ServiceSpec, plan

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 120.0  # the archive reports SERVING only once its store is open (Cassandra: a while)
_WIDTH = 10
_print_lock = threading.Lock()


def mesh_specs(
    archive: str,
    state_dir: Path,
    *,
    grpc_base: int = 50050,
    metrics_base: int = 9150,
    devp2p_port: int = 30303,
) -> list[ServiceSpec]:
    """Every catalog service in start order, on ``base + offset`` ports (the services' default ports)."""
    return plan(
        list(CATALOG),
        ports=FixedPorts(grpc_base, metrics_base, {"EDGE_LISTEN_PORT": devp2p_port}),
        state_dir=state_dir,
        env={"archive": {"ARCHIVE_BACKEND": archive}},
        inherit_env=True,  # a shell's ARCHIVE_CASSANDRA_HOSTS (say) reaches the service, as it always has
    )


def say(text: str) -> None:
    """Print one runner line (the reader threads print service lines concurrently)."""
    with _print_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def _echo(name: str, line: str) -> None:
    say(f"{name:<{_WIDTH}}| {line}")


def run(specs: list[ServiceSpec], grace_s: float) -> int:
    """Start every service, wait for a signal or a crash, then stop them all."""
    stop = threading.Event()
    crashed: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    def on_exit(service: ServiceProcess) -> None:
        if not stop.is_set():
            crashed.append(service.name)
            stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    # Own sessions: Ctrl-C reaches only us, and we stop the services in reverse dependency order.
    mesh = Mesh(specs, echo=_echo, own_session=True, max_lines=1000)
    mesh.spawn()
    for service in mesh.services:
        service.on_exit(on_exit)
    failed = False
    try:
        for service in mesh.services:
            service.wait_serving(START_TIMEOUT_S, cancel=stop)
        if not stop.is_set():
            where = ", ".join(f"{s.name} {s.address}" for s in mesh.services)
            say(f"mesh: every service is SERVING ({where})")
    except Exception as err:  # it exited, or never came up: the mesh is broken
        say(f"mesh: {err}")
        failed = True
        stop.set()
    stop.wait()
    if crashed or failed:
        say(f"mesh: {', '.join(crashed) or 'a service'} exited on its own or never served; stopping the rest")
    else:
        say("mesh: stopping (signal received)")

    def stopped(service: ServiceProcess) -> None:
        if service.killed:
            say(f"mesh: {service.name} did not stop within {grace_s}s; killed")
        say(f"mesh: {service.name} exited with {service.returncode}")

    mesh.stop(grace_s, on_stopped=stopped)
    return 1 if crashed or failed else 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--archive", choices=["sqlite", "cassandra"], default="sqlite")
    parser.add_argument("--state-dir", type=Path, default=ROOT / "var" / "mesh")
    parser.add_argument("--grace", type=float, default=15.0, help="seconds each service gets to stop cleanly")
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
    return run(specs, ns.grace)


if __name__ == "__main__":
    sys.exit(main())
