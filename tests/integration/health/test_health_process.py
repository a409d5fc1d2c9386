"""``python -m services.health`` as a process: SIGTERM ends open watches and exits 0; bad config exits 2."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from mailmesh.common.v1 import common_pb2
from mailmesh.health.v1 import health_pb2, health_pb2_grpc

REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 30
#: Nothing listens on port 1: every target is refused at once, so the node is Unhealthy with reasons.
NOWHERE = "127.0.0.1:1"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HEALTH_", "OTEL_", "MAILMESH_"))}
    env.update(
        {
            "HEALTH_GRPC_HOST": "127.0.0.1",
            "HEALTH_GRPC_PORT": "0",
            "HEALTH_METRICS_PORT": "-1",
            "HEALTH_EDGE_ADDR": NOWHERE,
            "HEALTH_ARCHIVE_ADDR": NOWHERE,
            "HEALTH_INGEST_ADDR": "",
            "HEALTH_HISTORY_ADDR": "",
            "HEALTH_SEND_ADDR": "",
            "HEALTH_SUBSCRIPTION_ADDR": "",
            "HEALTH_GATEWAY_ADDR": "",
            "HEALTH_SHUTDOWN_GRACE_SECONDS": "600",
            "MAILMESH_LOG_FORMAT": "json",
        }
    )
    env.update(extra)
    return env


async def _spawn(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.health",
        cwd=REPO,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _serving_port(proc: asyncio.subprocess.Process, seen: list[dict[str, Any]]) -> int:
    assert proc.stdout is not None and proc.stderr is not None
    while True:
        line = (await asyncio.wait_for(proc.stdout.readline(), TIMEOUT)).decode()
        if not line:
            raise AssertionError("exited early: " + (await proc.stderr.read()).decode())
        if line.startswith("{"):
            entry = json.loads(line)
            seen.append(entry)
            if entry["msg"].startswith("serving "):
                return int(entry["grpc_port"])


async def test_serves_and_sigterm_ends_open_watches_then_exits_zero() -> None:
    proc = await _spawn(_env())
    logs: list[dict[str, Any]] = []
    try:
        port = await _serving_port(proc, logs)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = health_pb2_grpc.HealthServiceStub(channel)
            report = (await stub.GetHealth(health_pb2.GetHealthRequest(), timeout=10)).report
            assert report.status == common_pb2.HEALTH_STATUS_UNHEALTHY
            assert [r.code for r in report.reasons] == [
                health_pb2.HEALTH_REASON_CODE_NO_PEERS,
                health_pb2.HEALTH_REASON_CODE_ARCHIVE_UNAVAILABLE,
                health_pb2.HEALTH_REASON_CODE_EDGE_PEER_UNREACHABLE,
            ]
            watch = stub.WatchHealth(health_pb2.WatchHealthRequest())
            first = await watch.read()
            assert isinstance(first, health_pb2.WatchHealthResponse)
            assert first.report.status == common_pb2.HEALTH_STATUS_UNHEALTHY
            # The shutdown grace is 600 s: the process exits in time only because the watch is ended for it.
            proc.send_signal(signal.SIGTERM)
            try:
                await watch.read()
                raise AssertionError("the watch should have ended")
            except grpc.aio.AioRpcError as err:
                assert err.code() == grpc.StatusCode.UNAVAILABLE
        out, err_out = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err_out.decode()
    logs += [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    messages = [entry["msg"] for entry in logs]
    assert "SIGTERM received" in messages and "stopped" in messages
    assert any(
        m.startswith("health none -> Unhealthy (0 peers): no Waku peer on any edge peer") for m in messages
    )
    assert all(entry["service"] == "health" for entry in logs)


async def test_bad_config_exits_two_naming_every_problem() -> None:
    proc = await _spawn(_env(HEALTH_HEALTHY_PEERS="2", HEALTH_EDGE_ADDR="nowhere"))
    _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 2
    assert "HEALTH_EDGE_ADDR" in err.decode()
