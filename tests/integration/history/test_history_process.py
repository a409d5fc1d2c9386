"""``python -m services.history`` as a process (the harness): serves, SIGTERM exits 0, bad config exits 2."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import grpc.aio

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshharness import FreePorts, ServiceSpec, plan, spawn, start_mesh
from tests.integration.history.history_support import ArchiveHandle

TIMEOUT = 60.0  # a cold interpreter imports grpc and OpenTelemetry first


def _specs(**extra: str) -> list[ServiceSpec]:
    return plan(
        ["history"], ports=FreePorts(metrics=False), env={"history": {"MAILMESH_LOG_FORMAT": "json", **extra}}
    )


async def test_serves_and_exits_zero_on_sigterm(archive: ArchiveHandle, tmp_path: Path) -> None:
    secret_file = tmp_path / "secrets" / "cursor.secret"
    settings = {"HISTORY_ARCHIVE_ADDR": archive.address, "HISTORY_CURSOR_SECRET_FILE": str(secret_file)}
    mesh = await asyncio.to_thread(start_mesh, lambda: _specs(**settings), timeout=TIMEOUT)
    history = mesh.get("history")
    try:
        async with grpc.aio.insecure_channel(history.address) as channel:
            stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
            request = history_pb2.HistoryQueryRequest(lower=1, upper=9, topics=[b"\x01\x02\x03\x04"])
            replies = [r async for r in stub.Query(request, timeout=10)]
            assert replies[-1].complete.last_envelope_hash == bytes(32)
    finally:
        code = await history.stop_async(TIMEOUT)
    assert code == 0 and not history.killed, history.logs.tail()
    messages = history.logs.messages()
    assert "SIGTERM received" in messages and "stopped" in messages
    assert any("created cursor secret file" in m and "share" in m for m in messages)
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert all(record["service"] == "history" for record in history.logs.records())


async def test_bad_config_exits_two(tmp_path: Path) -> None:
    [spec] = _specs(HISTORY_MAX_LIMIT="5000", HISTORY_CURSOR_SECRET_FILE=str(tmp_path / "s"))
    history = spawn(spec)
    assert await history.wait_exit_async(TIMEOUT) == 2
    assert "HISTORY_MAX_LIMIT" in history.logs.text()
