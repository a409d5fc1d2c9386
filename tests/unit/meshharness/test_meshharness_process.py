"""The process harness against a tiny real service (tests/unit/meshcore/sigterm_app.py, wired like a real
``__main__``): spawn, SERVING, log capture, SIGTERM, the SIGKILL fallback, exits and taken ports."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator

import grpc
import pytest

from meshharness import (
    Allow,
    Mesh,
    PortTaken,
    ServiceExited,
    ServiceProcess,
    ServiceSpec,
    free_ports,
    spawn,
    start,
    start_async,
)
from tests.unit.meshcore.support import SERVICE, identity

APP = "tests.unit.meshcore.sigterm_app"
START_S = 60.0  # a cold interpreter imports grpc and OpenTelemetry first


def app_spec(name: str = "sigapp", port: int | None = None, **env: str) -> ServiceSpec:
    grpc_port = port if port is not None else free_ports(1)[0]
    return ServiceSpec(
        name=name,
        module=APP,
        env={
            "SIGAPP_GRPC_HOST": "127.0.0.1",
            "SIGAPP_GRPC_PORT": str(grpc_port),
            "SIGAPP_METRICS_PORT": "-1",
            "MAILMESH_LOG_FORMAT": "json",
            **env,
        },
        grpc_port=grpc_port,
        health=SERVICE,
    )


@pytest.fixture
def stopped_at_end() -> Iterator[list[ServiceProcess]]:
    """Processes a test started; stopped (SIGKILL at once) if the test left them running."""
    started: list[ServiceProcess] = []
    yield started
    for service in started:
        service.stop(0)


def block(address: str) -> grpc.Future[bytes]:
    """Start a ``Block`` call (it returns only when the server cuts it) and return its future."""
    channel = grpc.insecure_channel(address)
    call = channel.unary_unary(f"/{SERVICE}/Block", identity, identity).future(b"", timeout=START_S)
    call.add_done_callback(lambda _: channel.close())
    return call


def test_start_waits_for_serving_captures_logs_and_sigterm_exits_zero(
    stopped_at_end: list[ServiceProcess],
) -> None:
    spec = app_spec()
    service = start(spec, timeout=START_S)
    stopped_at_end.append(service)
    serving = service.logs.wait_for(lambda line: line.msg.startswith("serving "), START_S)
    assert serving.record is not None and serving.record["grpc_port"] == spec.grpc_port
    assert service.stop(30) == 0
    assert not service.killed
    assert {"SIGTERM received", "stopped"} <= set(service.logs.messages())
    assert "HOOK RAN" in [line.text for line in service.logs.lines]  # a raw (non-JSON) line is kept too
    assert all(record["service"] == "sigapp" for record in service.logs.records())
    assert service.logs.unexpected([Allow(r"^HOOK RAN$"), Allow(r"^READY ")]) == []


def test_sigkill_when_sigterm_does_not_end_it_in_time(stopped_at_end: list[ServiceProcess]) -> None:
    # The app would wait 600 s for the in-flight Block call; the harness's grace is far shorter.
    service = start(app_spec(SIGAPP_SHUTDOWN_GRACE_SECONDS="600"), timeout=START_S)
    stopped_at_end.append(service)
    call = block(service.address)
    service.logs.wait_for(lambda line: line.text == "BLOCKED", START_S)
    assert service.stop(1) == -signal.SIGKILL
    assert service.killed
    assert "SIGTERM received" in service.logs.messages()  # it got the SIGTERM first
    with pytest.raises(grpc.RpcError):
        call.result()


def test_a_process_that_exits_before_serving_fails_the_start_with_its_output() -> None:
    with pytest.raises(ServiceExited) as info:
        start(app_spec(SIGAPP_CRASH="true", MAILMESH_LOG_FORMAT="text"), timeout=START_S)
    assert info.value.returncode == 1
    assert "crash requested" in info.value.tail


def test_a_taken_port_is_reported_as_port_taken() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        with pytest.raises(PortTaken):
            start(app_spec(port=int(holder.getsockname()[1])), timeout=START_S)


def test_noisy_lines_are_reported_unless_allowed(stopped_at_end: list[ServiceProcess]) -> None:
    service = start(app_spec(SIGAPP_SHUTDOWN_GRACE_SECONDS="600"), timeout=START_S)
    stopped_at_end.append(service)
    call = block(service.address)
    service.logs.wait_for(lambda line: line.text == "BLOCKED", START_S)
    service.send_signal(signal.SIGINT)
    service.logs.wait_for(lambda line: "shutting down" in line.msg, START_S)
    service.send_signal(signal.SIGINT)  # a second signal cuts the drain short, with a WARNING
    assert service.wait_exit(START_S) == 0
    with pytest.raises(grpc.RpcError):
        call.result()
    expected = [Allow(r"^HOOK RAN$"), Allow(r"^READY "), Allow(r"^BLOCKED$")]
    noisy = service.logs.unexpected(expected)
    assert [(line.level, line.msg) for line in noisy] == [
        ("WARNING", "SIGINT again: cancelling in-flight RPCs now")
    ]
    assert service.logs.unexpected([*expected, Allow(r"again: cancelling", logger="meshcore.server")]) == []


def test_wait_for_a_line_ends_when_the_process_exits() -> None:
    service = spawn(app_spec(SIGAPP_CRASH="true"))
    with pytest.raises(ServiceExited):
        service.logs.wait_for(lambda line: line.msg == "never written", START_S)
    assert service.returncode == 1


def test_a_mesh_stops_in_reverse_order(stopped_at_end: list[ServiceProcess]) -> None:
    mesh = Mesh([app_spec("first"), app_spec("second")])
    mesh.start(START_S)
    stopped_at_end.extend(mesh.services)
    order: list[str] = []
    assert mesh.stop(30, on_stopped=lambda s: order.append(s.name)) == {"second": 0, "first": 0}
    assert order == ["second", "first"]
    assert mesh.unexpected([Allow(r"^HOOK RAN$"), Allow(r"^READY ")]) == {}


async def test_asyncio_callers_use_the_async_variants(stopped_at_end: list[ServiceProcess]) -> None:
    service = await start_async(app_spec(), timeout=START_S)
    stopped_at_end.append(service)
    assert await service.stop_async(30) == 0
