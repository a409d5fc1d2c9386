"""``python -m services.history`` as a process: serves, SIGTERM exits 0, bad config exits 2."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import grpc.aio

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from tests.integration.history.history_support import ArchiveHandle

REPO = Path(__file__).resolve().parents[3]
TIMEOUT = 30


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HISTORY_", "OTEL_", "MAILMESH_"))}
    env.update(
        {
            "HISTORY_GRPC_HOST": "127.0.0.1",
            "HISTORY_GRPC_PORT": "0",
            "HISTORY_METRICS_PORT": "-1",
            "MAILMESH_LOG_FORMAT": "json",
        }
    )
    env.update(extra)
    return env


async def _spawn(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.history",
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


async def test_serves_and_exits_zero_on_sigterm(archive: ArchiveHandle, tmp_path: Path) -> None:
    secret_file = tmp_path / "secrets" / "cursor.secret"
    proc = await _spawn(
        _env(HISTORY_ARCHIVE_ADDR=archive.address, HISTORY_CURSOR_SECRET_FILE=str(secret_file))
    )
    logs: list[dict[str, Any]] = []
    try:
        port = await _serving_port(proc, logs)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = history_pb2_grpc.HistoryQueryServiceStub(channel)
            request = history_pb2.HistoryQueryRequest(lower=1, upper=9, topics=[b"\x01\x02\x03\x04"])
            replies = [r async for r in stub.Query(request, timeout=10)]
            assert replies[-1].complete.last_envelope_hash == bytes(32)
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    logs += [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    messages = [entry["msg"] for entry in logs]
    assert "SIGTERM received" in messages and "stopped" in messages
    assert any("created cursor secret file" in m and "share" in m for m in messages)
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert all(entry["service"] == "history" for entry in logs)


async def test_bad_config_exits_two(tmp_path: Path) -> None:
    proc = await _spawn(_env(HISTORY_MAX_LIMIT="5000", HISTORY_CURSOR_SECRET_FILE=str(tmp_path / "s")))
    _, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode == 2
    assert "HISTORY_MAX_LIMIT" in err.decode()
