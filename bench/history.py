"""History query latency (issue 3) with 1,000,000 envelopes archived: 20 clients, and deep pagination cost.

Setup, as deployed: ``python -m services.archive`` over the store and ``python -m services.history`` in front
of it, each its own process on loopback; this process plays the 20 clients (one gRPC channel each) and counts
a query from sending the request to the end of its response stream (every batch received and decoded).

Dataset (:class:`bench.support.HistoryDataset`): one day of envelopes in sent order, 1,000 topics with
Zipf(1.2) popularity, payloads 256 B – 4 KiB (mean ≈ 1 KiB). The SQLite file is built directly with the
store adapter (no gRPC) and cached in ``.cache/bench/history-<version>-<rows>-<seed>.sqlite3``; change
``HistoryDataset.version`` when the generator changes. Cassandra is loaded with the adapter into the
``mailmesh_bench`` keyspace for each run (and dropped afterwards), within a time budget
(``BENCH_HISTORY_CASSANDRA_BUDGET_S``, default 600 s); the figures name the size actually loaded.

- **Latency**, each query a 24-hour window whose start is uniform within ±6 h of the data's day, 10 distinct
  topics drawn by popularity (a client follows its active chats), limit 1000, directions alternating;
  p50/p99 of the whole query, also first-batch latency, throughput and CPU per query per process. Three load
  shapes after 40 warm-up queries: (a) **closed loop** — 20 clients, each sending its next query as soon as
  the last one completed (20 queries always in flight: the saturation reading of "20 concurrent clients");
  (b) **open loop** — 20 clients each sending one query per second on schedule for 60 s (nwaku's store
  test shape, docs/benchmarks.md "Reference: nwaku store"); (c) the closed loop again with limit 100 (the page
  size of docs/benchmarks.md "Targets"), to show how the cost scales with envelopes per query.
- **Deep pagination**: one query (the 10 hottest topics, the whole day, limit 1000, forward) followed page by
  page through its cursors up to page 500 (about 57 % of 1 M envelopes match, so page 500 exists), then
  page 1 and page 500 timed alternately, one client; the figure is median(page 500) ÷ median(page 1).

Sizes: ``BENCH_HISTORY_ROWS`` (SQLite, default 1,000,000), ``BENCH_HISTORY_CASSANDRA_ROWS`` (default
1,000,000, loaded in sent order until the budget runs out, so a partial load is the first hours of the same
day at the same density), ``BENCH_HISTORY_<BACKEND>_QUERIES`` (closed-loop queries: SQLite 1000, Cassandra
300), ``BENCH_HISTORY_OPEN_LOOP_S`` (60); ``BENCH_BACKENDS=sqlite`` skips Cassandra.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc.aio

from archivestore.config import StoreConfig
from archivestore.factory import create_store, open_store
from archivestore.types import PutItem
from bench.harness import Result, config
from bench.support import (
    CACHE,
    CpuMeter,
    HistoryDataset,
    Service,
    archive_env,
    cassandra_node,
    cassandra_pid,
    drop_bench_keyspace,
    env_int,
    profile_path,
    profile_summary,
    running,
    settle_cassandra,
    start_archive,
    start_history,
    summarize_ms,
)
from mailmesh.common.v1 import common_pb2
from mailmesh.history.v1 import history_pb2, history_pb2_grpc

LABEL = {"sqlite": "SQLite", "cassandra": "Cassandra"}
CLIENTS = 20
LIMIT = 1000
TOPICS_PER_QUERY = 10
DEEP_PAGE = 500
WARMUP = 40
P50_TARGET_MS = 50.0
P99_TARGET_MS = 400.0
PAGE_RATIO_TARGET = 1.5
#: Open loop: each client sends one query per second (nwaku's store test shape, docs/benchmarks.md "Reference:
#: nwaku store").
OPEN_LOOP_INTERVAL_S = 1.0
#: Deadline of one measured query. A failed query (past this deadline, or failed by history-query itself,
#: e.g. when its 5 s archive deadline expires under overload) counts in the percentiles as this long.
QUERY_DEADLINE_S = 30.0
#: Measured queries per closed-loop run (Cassandra answers about 6 a second: 300 take a minute).
FULL_QUERIES = {"sqlite": 1000, "cassandra": 300}
LOAD_BATCH = 1000
CASSANDRA_LOAD_BATCH = 500
CASSANDRA_LOAD_CONCURRENCY = 4
GRPC_OPTIONS = [("grpc.max_receive_message_length", 64 << 20)]


def _rows_label(rows: int) -> str:
    if rows >= 1_000_000 and rows % 1_000_000 == 0:
        return f"{rows // 1_000_000} M"
    return f"{rows / 1000:g} k" if rows >= 1000 else str(rows)


# ------------------------------------------------------------------------------------------------ datasets


async def _build_sqlite(dataset: HistoryDataset, path: Path) -> dict[str, Any]:
    """Write ``dataset`` with the SQLite adapter into ``path`` (fast path: no gRPC, no ingest)."""
    began = time.perf_counter()
    put_s = 0.0
    async with open_store(
        StoreConfig.from_env(archive_env("sqlite", sqlite_path=path, retention_days=0))
    ) as store:
        for batch in dataset.batches(LOAD_BATCH):
            t = time.perf_counter()
            result = await store.put([PutItem(s.stored()) for s in batch], now=dataset.start)
            put_s += time.perf_counter() - t
            if result.inserted != len(batch):
                raise RuntimeError(f"dataset build: {len(batch) - result.inserted} envelopes not inserted")
    wall = time.perf_counter() - began
    return {"rows": dataset.rows, "build_s": round(wall, 1), "adapter_put_rate": round(dataset.rows / put_s)}


def sqlite_dataset(dataset: HistoryDataset) -> tuple[Path, dict[str, Any]]:
    """The cached SQLite file for ``dataset``, built (about 3 minutes for 1 M rows) when missing."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"history-{dataset.key}.sqlite3"
    if path.exists():
        return path, {"rows": dataset.rows, "cached": True}
    building = CACHE / f"history-{dataset.key}.building"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)
    print(f"  building the SQLite dataset ({dataset.rows} envelopes) → {path.name}", flush=True)
    info = asyncio.run(_build_sqlite(dataset, building))
    for suffix in ("-wal", "-shm"):
        Path(f"{building}{suffix}").unlink(missing_ok=True)
    building.rename(path)
    print(f"  built in {info['build_s']} s", flush=True)
    return path, {**info, "cached": False}


async def _load_cassandra(dataset: HistoryDataset, budget_s: float) -> dict[str, Any]:
    """Load ``dataset`` into the bench keyspace with the Cassandra adapter, stopping at ``budget_s``."""
    store = create_store(StoreConfig.from_env(archive_env("cassandra", retention_days=0)))
    await store.open()
    began = time.perf_counter()
    loaded = 0
    pending: set[asyncio.Task[int]] = set()

    async def put(batch: Sequence[PutItem]) -> int:
        result = await store.put(batch, now=dataset.start)
        if result.inserted != len(batch):
            raise RuntimeError(f"Cassandra load: {len(batch) - result.inserted} envelopes not inserted")
        return len(batch)

    try:
        for batch in dataset.batches(CASSANDRA_LOAD_BATCH):
            if time.perf_counter() - began > budget_s:
                break
            pending.add(asyncio.ensure_future(put([PutItem(s.stored()) for s in batch])))
            if len(pending) >= CASSANDRA_LOAD_CONCURRENCY:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                loaded += sum(t.result() for t in done)
        if pending:
            loaded += sum(await asyncio.gather(*pending))
    finally:
        await store.close()
    wall = time.perf_counter() - began
    return {
        "rows_planned": dataset.rows,
        "rows_loaded": loaded,
        "load_s": round(wall, 1),
        "load_rate": round(loaded / wall),
        "budget_s": budget_s,
        "complete": loaded == dataset.rows,
    }


# ------------------------------------------------------------------------------------------------ queries


@dataclass(frozen=True)
class Outcome:
    first_s: float
    total_s: float
    delivered: int
    cursor: bytes
    error: str = ""


async def _query(
    stub: Any, request: history_pb2.HistoryQueryRequest, *, deadline_s: float = QUERY_DEADLINE_S
) -> Outcome:
    """One query to the end of its stream; a failed one (e.g. past its deadline) is returned, not raised."""
    began = time.perf_counter()
    first = 0.0
    delivered = 0
    cursor = b""
    try:
        async for response in stub.Query(request, timeout=deadline_s):
            if response.HasField("batch") and not first:
                first = time.perf_counter() - began
            if response.HasField("complete"):
                delivered = response.complete.delivered
                cursor = response.complete.next_cursor
    except grpc.aio.AioRpcError as err:
        elapsed = time.perf_counter() - began
        return Outcome(first or elapsed, elapsed, delivered, b"", f"{err.code().name}: {err.details()}")
    return Outcome(first, time.perf_counter() - began, delivered, cursor)


def _checked(outcome: Outcome) -> Outcome:
    if outcome.error:
        raise RuntimeError(f"history query failed: {outcome.error}")
    return outcome


def _requests(
    dataset: HistoryDataset, n: int, seed: int, limit: int = LIMIT
) -> list[history_pb2.HistoryQueryRequest]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        lower = dataset.start + rng.randrange(-6 * 3600, 6 * 3600)
        out.append(
            history_pb2.HistoryQueryRequest(
                lower=lower,
                upper=lower + 86_400 - 1,
                topics=dataset.topics.pick_distinct(rng, TOPICS_PER_QUERY),
                limit=limit,
                direction=common_pb2.DIRECTION_FORWARD if i % 2 else common_pb2.DIRECTION_BACKWARD,
            )
        )
    return out


def _summary(outcomes: Sequence[Outcome], meter: CpuMeter, limit: int) -> dict[str, Any]:
    """Latency percentiles, with a failed query counted as taking the whole deadline (it got no answer)."""
    delivered = [o.delivered for o in outcomes]
    errors = [o.error for o in outcomes if o.error]
    ok = [o for o in outcomes if not o.error]
    return {
        "queries": len(outcomes),
        "failed": len(errors),
        "errors": sorted(set(errors))[:3],
        "clients": CLIENTS,
        "limit": limit,
        "complete": summarize_ms([QUERY_DEADLINE_S if o.error else o.total_s for o in outcomes]),
        "complete_of_successful": summarize_ms([o.total_s for o in ok]),
        "first_batch": summarize_ms([o.first_s for o in ok]),
        "queries_per_s": round(len(outcomes) / meter.wall_s, 1),
        "mean_delivered": round(statistics.fmean(delivered), 1),
        "full_pages": sum(1 for d in delivered if d == limit),
        "cpu": meter.report(len(outcomes), "query"),
    }


class Clients:
    """CLIENTS gRPC channels to history-query, one per simulated client."""

    def __init__(self, address: str) -> None:
        self.channels = [grpc.aio.insecure_channel(address, options=GRPC_OPTIONS) for _ in range(CLIENTS)]
        self.stubs = [history_pb2_grpc.HistoryQueryServiceStub(ch) for ch in self.channels]

    async def close(self) -> None:
        for ch in self.channels:
            await ch.close()

    async def closed_loop(
        self, requests: Sequence[history_pb2.HistoryQueryRequest], pids: dict[str, int] | None
    ) -> tuple[list[Outcome], CpuMeter | None]:
        """Every client sends its next query as soon as the previous one completed (saturation)."""
        queue = deque(requests)
        outcomes: list[Outcome] = []

        async def client(stub: Any) -> None:
            while queue:
                outcomes.append(await _query(stub, queue.popleft()))

        if pids is None:
            await asyncio.gather(*(client(s) for s in self.stubs))
            return outcomes, None
        with CpuMeter(pids) as meter:
            await asyncio.gather(*(client(s) for s in self.stubs))
        return outcomes, meter

    async def open_loop(
        self, requests: Sequence[history_pb2.HistoryQueryRequest], interval_s: float, pids: dict[str, int]
    ) -> tuple[list[Outcome], CpuMeter]:
        """Each client sends a query every ``interval_s`` on schedule, even while earlier ones run."""
        per_client = len(requests) // CLIENTS
        outcomes: list[Outcome] = []
        rng = random.Random(3)

        async def client(k: int, stub: Any) -> None:
            start = time.perf_counter() + rng.random() * interval_s
            tasks = []
            for j in range(per_client):
                delay = start + j * interval_s - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.ensure_future(_query(stub, requests[k * per_client + j])))
            outcomes.extend(await asyncio.gather(*tasks))

        with CpuMeter(pids) as meter:
            await asyncio.gather(*(client(k, s) for k, s in enumerate(self.stubs)))
        return outcomes, meter


async def _latency(
    history: Service, dataset: HistoryDataset, queries: int, open_s: int, pids: dict[str, int]
) -> dict[str, dict[str, Any]]:
    clients = Clients(history.address)
    try:
        await clients.closed_loop(_requests(dataset, WARMUP, seed=1), None)
        out: dict[str, dict[str, Any]] = {}
        outcomes, meter = await clients.closed_loop(_requests(dataset, queries, seed=2), pids)
        assert meter is not None
        out["closed"] = _summary(outcomes, meter, LIMIT)
        requests = _requests(dataset, CLIENTS * open_s, seed=4)
        outcomes, meter = await clients.open_loop(requests, OPEN_LOOP_INTERVAL_S, pids)
        out["open"] = {**_summary(outcomes, meter, LIMIT), "per_client_rate": 1 / OPEN_LOOP_INTERVAL_S}
        outcomes, meter = await clients.closed_loop(_requests(dataset, queries, seed=5, limit=100), pids)
        assert meter is not None
        out["closed_limit_100"] = _summary(outcomes, meter, 100)
        return out
    finally:
        await clients.close()


async def _deep(history: Service, dataset: HistoryDataset, rounds: int) -> dict[str, Any]:
    """Follow one query's cursors to page DEEP_PAGE (or its last full page); time page 1 vs that page."""
    fixed = history_pb2.HistoryQueryRequest(
        lower=dataset.start,
        upper=dataset.start + dataset.span_s - 1,
        topics=dataset.topics.hottest(TOPICS_PER_QUERY),
        limit=LIMIT,
        direction=common_pb2.DIRECTION_FORWARD,
    )

    def page(cursor: bytes) -> history_pb2.HistoryQueryRequest:
        request = history_pb2.HistoryQueryRequest()
        request.CopyFrom(fixed)
        request.cursor = cursor
        return request

    async with grpc.aio.insecure_channel(history.address, options=GRPC_OPTIONS) as ch:
        stub = history_pb2_grpc.HistoryQueryServiceStub(ch)
        walk: list[float] = []
        cursor = b""
        deep_cursor = b""
        deep = 1
        began = time.perf_counter()
        while True:
            outcome = _checked(await _query(stub, page(cursor), deadline_s=120))
            walk.append(outcome.total_s)
            if outcome.delivered == LIMIT and len(walk) > 1:
                deep, deep_cursor = len(walk), cursor
            if len(walk) >= DEEP_PAGE or not outcome.cursor:
                break
            cursor = outcome.cursor
        walk_s = time.perf_counter() - began
        first: list[float] = []
        last: list[float] = []
        for _ in range(rounds):
            first.append(_checked(await _query(stub, page(b""), deadline_s=120)).total_s)
            outcome = _checked(await _query(stub, page(deep_cursor), deadline_s=120))
            if outcome.delivered != LIMIT:
                raise RuntimeError(f"page {deep} delivered {outcome.delivered}, expected {LIMIT}")
            last.append(outcome.total_s)
    ratio = statistics.median(last) / statistics.median(first)
    marks = sorted({1, 2, 10, 50, 100, 250, len(walk)} & set(range(1, len(walk) + 1)))
    return {
        "page": deep,
        "ratio": round(ratio, 3),
        "page_1": summarize_ms(first),
        f"page_{deep}": summarize_ms(last),
        "rounds": rounds,
        "walk_pages": len(walk),
        "walk_s": round(walk_s, 1),
        "walk_ms_at_page": {str(p): round(walk[p - 1] * 1000, 1) for p in marks},
        "walk_median_ms": round(statistics.median(walk) * 1000, 1),
    }


# ------------------------------------------------------------------------------------------------ suite


async def _measure(
    backend: str, dataset: HistoryDataset, env: dict[str, str], rows: int, setup: dict[str, Any]
) -> list[Result]:
    quick = config().quick
    if quick:
        queries = 100 if backend == "sqlite" else 40
    else:
        queries = env_int(f"BENCH_HISTORY_{backend.upper()}_QUERIES", FULL_QUERIES[backend])
    open_s = (4 if backend == "sqlite" else 2) if quick else env_int("BENCH_HISTORY_OPEN_LOOP_S", 60)
    rounds = 3 if quick else 20
    archive = await start_archive(env, profile=profile_path("history", backend, "archive"))
    async with running(archive):
        history = await start_history(archive, profile=profile_path("history", backend, "history"))
        async with running(history):
            pids = {"bench clients": os.getpid(), "history": history.pid, "archive": archive.pid}
            jvm = cassandra_pid() if backend == "cassandra" else None
            if jvm is not None:
                pids["cassandra"] = jvm
            print(f"  {backend}: latency ({CLIENTS} clients)", flush=True)
            latency = await _latency(history, dataset, queries, open_s, pids)
            print(f"  {backend}: deep pagination", flush=True)
            deep = await _deep(history, dataset, rounds)
    for service in (archive, history):
        if service.profile is not None and service.profile.exists():
            print(profile_summary(service.profile, 20)[:6000], flush=True)
    label = f"{LABEL[backend]} {_rows_label(rows)}"
    shape = f"24 h, {TOPICS_PER_QUERY} topics, limit {LIMIT}"
    closed, opened, small = latency["closed"], latency["open"], latency["closed_limit_100"]
    rate = f"{1 / OPEN_LOOP_INTERVAL_S:g}"
    results = []
    for name, run, target in (
        (f"{CLIENTS} clients back to back", closed, True),
        (f"{CLIENTS} clients × {rate} query/s", opened, True),
        (f"{CLIENTS} clients back to back, limit 100", small, False),
    ):
        what = shape if run is not small else f"24 h, {TOPICS_PER_QUERY} topics"
        for q, tgt in (("p50", P50_TARGET_MS), ("p99", P99_TARGET_MS)):
            results.append(
                Result(
                    f"{label}: history query {q}, {name} ({what})",
                    run["complete"][f"{q}_ms"],
                    "ms",
                    detail={"dataset": setup, **run} if q == "p50" else {"complete": run["complete"]},
                    target=tgt if target else None,
                    lower_is_better=True,
                )
            )
    results.insert(
        2,
        Result(
            f"{label}: history queries/s, {CLIENTS} clients back to back (limit {LIMIT})",
            closed["queries_per_s"],
            "queries/s",
            detail={"cpu": closed["cpu"], "mean_delivered": closed["mean_delivered"]},
        ),
    )
    results.append(
        Result(
            f"{label}: page {deep['page']} / page 1 cost (cursor, limit {LIMIT}, one client)",
            deep["ratio"],
            "×",
            detail=deep,
            target=PAGE_RATIO_TARGET,
            lower_is_better=True,
        )
    )
    return results


def _sqlite(quick: bool) -> list[Result]:
    rows = 20_000 if quick else env_int("BENCH_HISTORY_ROWS", 1_000_000)
    dataset = HistoryDataset(rows)
    path, setup = sqlite_dataset(dataset)
    env = archive_env("sqlite", sqlite_path=path, retention_days=0)
    return asyncio.run(_measure("sqlite", dataset, env, rows, {**setup, "file_mb": _mb(path)}))


def _cassandra(quick: bool) -> list[Result]:
    rows = 4_000 if quick else env_int("BENCH_HISTORY_CASSANDRA_ROWS", 1_000_000)
    budget = 60.0 if quick else float(env_int("BENCH_HISTORY_CASSANDRA_BUDGET_S", 600))
    with cassandra_node():
        drop_bench_keyspace()
        try:
            dataset = HistoryDataset(rows)
            print(f"  loading Cassandra ({rows} envelopes, budget {budget:.0f} s)", flush=True)
            setup = asyncio.run(_load_cassandra(dataset, budget))
            print(f"  loaded {setup['rows_loaded']} in {setup['load_s']} s; settling", flush=True)
            setup |= settle_cassandra()
            print(
                f"  flushed and compacted in {setup['settle_s']} s (settled: {setup['settled']})", flush=True
            )
            env = archive_env("cassandra", retention_days=0)
            return asyncio.run(_measure("cassandra", dataset, env, setup["rows_loaded"], setup))
        finally:
            with contextlib.suppress(Exception):  # best effort: the node may be what failed
                drop_bench_keyspace()


def _mb(path: Path) -> float:
    return round(path.stat().st_size / 1e6, 1)


def run() -> list[Result]:
    """Run the history suite (SQLite from the cached dataset, then Cassandra)."""
    quick = config().quick
    backends = os.environ.get("BENCH_BACKENDS", "sqlite,cassandra")
    results: list[Result] = []
    if "sqlite" in backends:
        results += _sqlite(quick)
    if "cassandra" in backends:
        results += _cassandra(quick)
    return results
