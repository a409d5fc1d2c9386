"""Client channels: retries by service config, error translation, deadline propagation, stream metrics."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import grpc.aio
import pytest

from meshcore import errors
from meshcore.clients import make_channel, service_config, translate_rpc_error
from meshcore.codes import ERROR_CODES
from meshcore.deadlines import bind_deadline, remaining_timeout
from meshcore.server import Registration, build_server
from tests.unit.meshcore.support import SERVICE, Running, identity, runtime_for_tests, server_stream, unary


def _labels(rpc: str, code: str | None = None) -> dict[str, str]:
    labels = {"grpc_type": "unary", "grpc_service": SERVICE, "grpc_method": rpc}
    if code is not None:
        labels["grpc_code"] = code
    return labels


async def test_retry_enabled_method_survives_unavailable(running: Running) -> None:
    running.service.flaky_failures = 2
    channel = make_channel(
        f"127.0.0.1:{running.mesh.port}",
        service_name=SERVICE,
        timeout_s=5,
        retry_attempts=3,
        idempotent_methods=("Flaky",),
        initial_backoff_s=0.01,
        max_backoff_s=0.05,
        registry=running.registry,
    )
    async with channel:
        assert await unary(channel, "Flaky")(b"", timeout=5) == b"ok after 3"
    value = running.registry.get_sample_value
    assert value("grpc_server_started_total", _labels("Flaky")) == 3
    assert value("grpc_server_handled_total", _labels("Flaky", "Unavailable")) == 2
    # Retries happen below the interceptors: the caller made (and counted) one call.
    assert value("grpc_client_started_total", _labels("Flaky")) == 1
    assert value("grpc_client_handled_total", _labels("Flaky", "OK")) == 1


async def test_method_not_declared_idempotent_is_not_retried(running: Running) -> None:
    running.service.flaky_failures = 1
    channel = make_channel(
        f"127.0.0.1:{running.mesh.port}",
        service_name=SERVICE,
        timeout_s=5,
        retry_attempts=3,
        idempotent_methods=("Flaky",),
        initial_backoff_s=0.01,
        registry=running.registry,
    )
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await unary(channel, "Flaky2")(b"", timeout=5)
    assert failed.value.code() is grpc.StatusCode.UNAVAILABLE
    assert running.service.flaky_attempts == 1


def test_service_config_shape_and_validation() -> None:
    config = service_config(
        "pkg.Svc", timeout_s=2, retry_attempts=3, idempotent_methods=("Get",), initial_backoff_s=0.1
    )
    assert all("timeout" not in entry for entry in config["methodConfig"])  # see test_short_default_deadline
    [retry] = config["methodConfig"]
    assert retry["name"] == [{"service": "pkg.Svc", "method": "Get"}]
    assert retry["retryPolicy"] == {
        "maxAttempts": 3,
        "initialBackoff": "0.1s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    assert "retryThrottling" in config
    both = service_config(
        "pkg.Svc",
        timeout_s=1,
        retry_attempts=2,
        idempotent_methods=("Get",),
        retryable_codes=(grpc.StatusCode.UNAVAILABLE, "resource_exhausted"),
    )
    assert both["methodConfig"][0]["retryPolicy"]["retryableStatusCodes"] == [
        "UNAVAILABLE",
        "RESOURCE_EXHAUSTED",
    ]
    json.dumps(config)  # what make_channel hands to gRPC
    assert service_config("pkg.Svc", timeout_s=1) == {
        "methodConfig": [],
        "loadBalancingConfig": [{"round_robin": {}}],  # over every replica the target names
    }
    assert service_config("pkg.Svc", timeout_s=1, load_balancing=None) == {"methodConfig": []}
    with pytest.raises(ValueError, match="timeout_s"):
        service_config("pkg.Svc", timeout_s=0)
    with pytest.raises(ValueError, match="idempotent"):
        service_config("pkg.Svc", timeout_s=1, retry_attempts=2)
    with pytest.raises(ValueError, match=r"1\.\.5"):
        service_config("pkg.Svc", timeout_s=1, retry_attempts=6, idempotent_methods=("Get",))
    with pytest.raises(ValueError, match="BOGUS"):
        service_config(
            "pkg.Svc", timeout_s=1, retry_attempts=2, idempotent_methods=("Get",), retryable_codes=("BOGUS",)
        )


@pytest.mark.parametrize("category", list(ERROR_CODES), ids=lambda c: str(getattr(c, "__name__", c)))
def test_translate_rpc_error_inverts_the_server_mapping(category: type[errors.MeshError]) -> None:
    code = ERROR_CODES[category]
    err = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details="boom")
    translated = translate_rpc_error(err)
    expected = errors.Internal if category is errors.MeshError else category
    assert type(translated) is expected
    assert translated.message == "boom"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.CANCELLED, errors.Unavailable),
        (grpc.StatusCode.UNKNOWN, errors.Internal),
        (grpc.StatusCode.UNIMPLEMENTED, errors.Internal),
        (grpc.StatusCode.OUT_OF_RANGE, errors.InvalidArgument),
    ],
)
def test_translate_rpc_error_folds_other_codes(
    code: grpc.StatusCode, expected: type[errors.MeshError]
) -> None:
    err = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=None)
    translated = translate_rpc_error(err)
    assert type(translated) is expected
    assert translated.message == expected.default_message  # never an empty message


async def test_translated_error_round_trips_a_real_call(running: Running) -> None:
    with pytest.raises(errors.NotFound) as raised:
        try:
            await unary(running.channel, "Echo")(b"raise:NotFound", timeout=5)
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
    assert raised.value.message == "NotFound from handler"
    assert raised.value.details["grpc_code"] == "NotFound"
    assert isinstance(raised.value.__cause__, grpc.aio.AioRpcError)


async def test_server_deadline_bounds_downstream_timeouts(running: Running) -> None:
    seen: list[float] = []

    async def budget(request: bytes, context: Any) -> bytes:
        seen.append(remaining_timeout(30.0))
        return b""

    def add(server: grpc.aio.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(budget, identity, identity)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.Budget", {"Get": handler})])

    async with (
        build_server(runtime_for_tests(), [Registration("t.Budget", add)], registry=running.registry) as mesh,
        grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel,
    ):
        get = channel.unary_unary("/t.Budget/Get", identity, identity)
        await get(b"", timeout=2)
        await get(b"")  # no deadline from the caller: the cap applies
    assert 0 < seen[0] <= 2.5  # clocks differ a little between the two ends
    assert seen[1] == 30.0


async def test_remaining_timeout_refuses_an_expired_deadline() -> None:
    async def scenario() -> None:
        bind_deadline(-1.0)
        with pytest.raises(errors.DeadlineExceeded):
            remaining_timeout(5.0)
        bind_deadline(10.0)
        assert 9.0 < remaining_timeout(20.0) <= 10.0
        assert remaining_timeout(1.0) == 1.0
        assert remaining_timeout(20.0, reserve_s=5.0) <= 5.0

    # Its own task, as for a real RPC, so the binding does not outlive the scenario.
    await asyncio.create_task(scenario())
    assert remaining_timeout(3.0) == 3.0


@pytest.mark.parametrize("timeout_s", [0.5, 1.0])
async def test_short_default_deadline_lets_a_fast_call_through(running: Running, timeout_s: float) -> None:
    """A default deadline of a second or less: grpcio's service-config timeout failed such calls at once."""
    channel = make_channel(
        f"127.0.0.1:{running.mesh.port}", service_name=SERVICE, timeout_s=timeout_s, registry=running.registry
    )
    async with channel:
        assert await unary(channel, "Echo")(b"hi") == b"hi"


async def test_a_call_without_timeout_gets_the_default_deadline_and_an_explicit_one_wins(
    running: Running,
) -> None:
    channel = make_channel(
        f"127.0.0.1:{running.mesh.port}", service_name=SERVICE, timeout_s=0.3, registry=running.registry
    )
    async with channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await unary(channel, "Block")(b"")  # blocks until released: only the default deadline ends it
        assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        default_left = running.service.block_time_remaining
        # The server computes its remaining time from the grpc-timeout header against its own clock, so it
        # may read a hair above 0.3 (0.30006 seen): the point is the 0.3 s default, not no deadline or 30 s.
        assert default_left is not None and 0 < default_left <= 0.35
        running.service.block_started.clear()
        call = unary(channel, "Block")(b"", timeout=30)
        await running.service.block_started.wait()
        explicit_left = running.service.block_time_remaining
        assert explicit_left is not None and explicit_left > 20  # the caller's own timeout, not the default
        running.service.release.set()
        assert await call == b"released"


async def _handled_eventually(running: Running, labels: dict[str, str]) -> float:
    """The client's handled count once recorded (the call's done callback records it), bounded."""
    async with asyncio.timeout(10):
        while (found := running.registry.get_sample_value("grpc_client_handled_total", labels)) is None:
            await asyncio.sleep(0.01)  # polling a counter another callback sets, not a synchronisation
    return found


async def test_a_response_stream_read_only_in_part_is_still_counted_as_handled(running: Running) -> None:
    """The edge peer stops reading history's Query stream at its completion message, the last one, and never
    reads the end of the stream: the RPC still counts as handled (OK, as the server ended it)."""
    call = server_stream(running.channel, "Repeat")(b"abc", timeout=5)
    async for reply in call:
        if reply == b"abc#2":  # the last message: stop reading, neither draining nor cancelling the call
            break
    labels = {"grpc_type": "server_stream", "grpc_service": SERVICE, "grpc_method": "Repeat"}
    assert await _handled_eventually(running, {**labels, "grpc_code": "OK"}) == 1
    assert running.registry.get_sample_value("grpc_client_msg_received_total", labels) == 3
    assert running.registry.get_sample_value("grpc_client_handling_seconds_count", labels) == 1


async def test_a_response_stream_cancelled_unread_counts_as_canceled_once(running: Running) -> None:
    call = server_stream(running.channel, "Endless")(b"x", timeout=5)
    async for _ in call:
        break
    call.cancel()
    labels = {"grpc_type": "server_stream", "grpc_service": SERVICE, "grpc_method": "Endless"}
    assert await _handled_eventually(running, {**labels, "grpc_code": "Canceled"}) == 1
    assert running.registry.get_sample_value("grpc_client_handling_seconds_count", labels) == 1
