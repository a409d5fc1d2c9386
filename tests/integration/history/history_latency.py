"""Quick latency measurement: limit-1000 queries through history → archive (SQLite) with ~100k rows.

Not a test (no ``test_`` prefix): run ``.venv/bin/python -m tests.integration.history.history_latency``
[--rows N] [--queries N] [--concurrency N] [--in-process]. By default the archive and history run as their
own processes (``python -m services.archive`` / ``services.history``) on 127.0.0.1, as deployed, and this
process is only the client; the numbers include both gRPC hops and the client's decoding.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc.aio

from mailmesh.history.v1 import history_pb2, history_pb2_grpc
from meshharness import FreePorts, Mesh, plan
from tests.integration.history.history_support import put, start_archive, start_history
from wakucodec.envelope import make_envelope

DAY = 86_400
START = 1_700_000_000
TOPICS = [i.to_bytes(4, "big") for i in range(1, 51)]  # 50 topics; queries ask for 10 of them


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _one(stub: Any, request: history_pb2.HistoryQueryRequest) -> tuple[float, float, int, bytes]:
    began = time.perf_counter()
    first = 0.0
    delivered = 0
    cursor = b""
    async for response in stub.Query(request, timeout=30):
        if response.HasField("batch") and not first:
            first = time.perf_counter() - began
        if response.HasField("complete"):
            delivered = response.complete.delivered
            cursor = response.complete.next_cursor
    return first, time.perf_counter() - began, delivered, cursor


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--data", type=int, default=1024, help="payload bytes per envelope")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--deep-pages", type=int, default=15)
    parser.add_argument("--in-process", action="store_true", help="run both servers in this process")
    parser.add_argument("--archive-page", type=int, default=0, help="HISTORY_ARCHIVE_PAGE (0 = default)")
    parser.add_argument("--db", type=Path, default=None, help="SQLite file to keep; loaded only if absent")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db: Path = args.db or Path(tmp) / "archive.db"
        load = not db.exists()
        if args.in_process:
            archive_handle = await start_archive(db)
            history_handle = await start_history(archive_handle.address, [b"b" * 32])
            archive_address, history_address = archive_handle.address, history_handle.address

            async def stop_in_process() -> None:
                await history_handle.stop()
                await archive_handle.stop()

            stop: Callable[[], Awaitable[None]] = stop_in_process
        else:
            archive_address, history_address, stop = await _processes(db, args.archive_page)
        try:
            rng = random.Random(7)
            began = time.perf_counter()
            batch = []
            async with grpc.aio.insecure_channel(archive_address) as channel:
                from mailmesh.archive.v1 import archive_pb2_grpc

                archive_stub = archive_pb2_grpc.ArchiveServiceStub(channel)
                for i in range(args.rows if load else 0):
                    sent = START + rng.randrange(DAY)
                    batch.append(
                        make_envelope(
                            expiry=sent + 50,
                            ttl=50,
                            topic=rng.choice(TOPICS),
                            data=rng.randbytes(args.data),
                            nonce=i,
                        )
                    )
                    if len(batch) == 500:
                        await put(archive_stub, batch)
                        batch = []
                if batch:
                    await put(archive_stub, batch)
            if load:
                print(
                    f"loaded {args.rows} envelopes ({args.data} B data), {time.perf_counter() - began:.1f} s"
                )

            async with grpc.aio.insecure_channel(
                history_address, options=[("grpc.max_receive_message_length", 64 << 20)]
            ) as ch:
                stub = history_pb2_grpc.HistoryQueryServiceStub(ch)

                def request(cursor: bytes = b"", direction: Any = 1) -> history_pb2.HistoryQueryRequest:
                    start = START + rng.randrange(DAY // 2)
                    return history_pb2.HistoryQueryRequest(
                        lower=start if not cursor else START,
                        upper=start + DAY if not cursor else START + DAY,
                        topics=rng.sample(TOPICS, 10) if not cursor else TOPICS[:10],
                        limit=1000,
                        cursor=cursor,
                        direction=direction,
                    )

                for _ in range(10):  # warm-up: page cache, connections
                    await _one(stub, request())

                firsts: list[float] = []
                totals: list[float] = []
                delivered: list[int] = []
                queue = [request(direction=1 + i % 2) for i in range(args.queries)]
                wall = time.perf_counter()
                cpu_before = {name: _cpu_s(pid) for name, pid in PIDS.items()}

                async def worker() -> None:
                    while queue:
                        f, t, n, _ = await _one(stub, queue.pop())
                        firsts.append(f)
                        totals.append(t)
                        delivered.append(n)

                await asyncio.gather(*(worker() for _ in range(args.concurrency)))
                wall = time.perf_counter() - wall
                cpu = {
                    name: (_cpu_s(pid) - cpu_before[name]) / args.queries * 1000 for name, pid in PIDS.items()
                }
                print(
                    f"{args.queries} queries (24 h window, 10 of 50 topics, limit 1000, both directions), "
                    f"concurrency {args.concurrency}: mean delivered {statistics.mean(delivered):.0f}; "
                    + ", ".join(f"{name} CPU {ms:.1f} ms/query" for name, ms in cpu.items())
                )
                print(
                    f"  complete: p50 {_pct(totals, 50) * 1000:.1f} ms  p99 {_pct(totals, 99) * 1000:.1f} ms "
                    f"max {max(totals) * 1000:.1f} ms;  first batch: p50 {_pct(firsts, 50) * 1000:.1f} ms  "
                    f"p99 {_pct(firsts, 99) * 1000:.1f} ms;  {args.queries / wall:.1f} queries/s"
                )

                # Deep pagination: the same query page by page; page N should cost about what page 1 does.
                cursor = b""
                page_times = []
                for _ in range(args.deep_pages):
                    _, t, _n, cursor = await _one(stub, request(cursor) if cursor else _fixed())
                    page_times.append(t)
                    if not cursor:
                        break
                shown = ", ".join(f"{t * 1000:.0f}" for t in page_times)
                print(f"  pages 1..{len(page_times)} of one query (ms): {shown}")
        finally:
            await stop()


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


PIDS: dict[str, int] = {}


async def _processes(db: Path, archive_page: int) -> tuple[str, str, Callable[[], Awaitable[None]]]:
    """Start ``python -m services.archive`` and ``python -m services.history``; wait until both serve."""
    quiet = {"MAILMESH_LOG_LEVEL": "WARNING"}
    archive_env = {**quiet, "ARCHIVE_SQLITE_PATH": str(db), "ARCHIVE_RETENTION_DAYS": "0"}
    history_env = {
        **quiet,
        "HISTORY_CURSOR_SECRETS": "bb" * 32,
        **({"HISTORY_ARCHIVE_PAGE": str(archive_page)} if archive_page else {}),
    }
    # HISTORY_LATENCY_PROFILE=<module>:<file>, e.g. services.history:/tmp/h.prof: cProfile that process.
    profiled, _, profile = os.environ.get("HISTORY_LATENCY_PROFILE", "").partition(":")
    profiles = {kind: Path(profile) for kind in ("archive", "history") if f"services.{kind}" == profiled}
    mesh = Mesh(
        plan(
            ["archive", "history"],
            ports=FreePorts(metrics=False),
            env={"archive": archive_env, "history": history_env},
            profiles=profiles,
        )
    )
    await mesh.start_async(60)
    PIDS.update(archive=mesh.get("archive").pid, history=mesh.get("history").pid)

    async def stop() -> None:
        await mesh.stop_async()

    return mesh.get("archive").address, mesh.get("history").address, stop


def _fixed() -> history_pb2.HistoryQueryRequest:
    return history_pb2.HistoryQueryRequest(lower=START, upper=START + DAY, topics=TOPICS[:10], limit=1000)


if __name__ == "__main__":
    asyncio.run(main())
