"""The subscription service (issue 11): event fan-out to 100 streaming consumers, GetMessageRecord, and a
deep ``skip=10000&take=100`` listing with 1,000,000 records.

Setup, as deployed: ``python -m services.subscription`` is its own process (one writer, SQLite unless
stated); the edge peer's live feed and the health watch it follows are played by this process
(:class:`bench.messaging_support.FakeFeeds`), and the consumers run in a child process of their own.

- **Fan-out**: one subscription; 100 live ``StreamEvents`` consumers (every event type, a channel each);
  envelopes injected one per StreamEnvelopes message at a fixed rate, each becoming one commit and two
  events (``message:received``, ``message:change``). Latency of an event at a consumer is its arrival time
  minus its ``emitted_at`` (taken when the writer starts the commit, so the SQLite commit is included);
  also from injection (the record's ``received_at``) to arrival. Warm-up envelopes until every consumer
  has an event; only measured envelopes count. Goal: p99 ≤ 50 ms (issue 11).
- **Records at scale**: :class:`~bench.messaging_support.RecordDataset` (1 M records, one day, Zipf topics,
  ten subscriptions) seeded with the store's writer in commits of 2,000 (seeding rate reported apart; the
  SQLite file is cached in ``.cache/bench/messaging-records-<key>.sqlite3``), then the service on it:
  ``GetMessageRecord`` by hash (one in ten by request id) from 20 concurrent clients, and
  ``ListMessageRecords`` of the most popular content topic and of the busiest subscription with
  ``skip`` 0 and 10,000, ``take`` 100, one client. Cassandra: the same in keyspace
  ``mailmesh_bench_messaging`` (dropped afterwards), seeded with the same writer within a time budget (the
  records written when it runs out are the ones measured, and reported).

Sizes: ``BENCH_MESSAGING_RATES`` (envelopes/s, default ``25,100``), ``BENCH_MESSAGING_SECONDS`` (20),
``BENCH_MESSAGING_CONSUMERS`` (100), ``BENCH_MESSAGING_ROWS`` (1,000,000), ``BENCH_MESSAGING_CASSANDRA_ROWS``
(1,000,000; quick: 20,000), ``BENCH_MESSAGING_CASSANDRA_BUDGET_S`` (900: 1 M were seeded in 558 s on a
loaded box, docs/benchmarks.md "messaging"),
``BENCH_MESSAGING_GETS`` (4,000), ``BENCH_MESSAGING_LISTS`` (100); ``BENCH_BACKENDS=sqlite`` skips Cassandra.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import queue
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc.aio

from bench.harness import Result, config
from bench.messaging_support import (
    END,
    MEASURED,
    WARM,
    FakeFeeds,
    RecordDataset,
    consume,
    content_topic,
)
from bench.support import CACHE, WORK, CpuMeter, Service, env_int, start_service, summarize_ms
from mailmesh.subscription.v1 import subscription_pb2, subscription_pb2_grpc
from msgstore.config import StoreConfig
from msgstore.factory import create_store
from msgstore.protocol import MsgStore

P99_TARGET_MS = 50.0
KEYSPACE = "mailmesh_bench_messaging"
LIST_SKIPS = (0, 10_000)
TAKE = 100
CLIENTS = 20


def run() -> list[Result]:
    """Every measurement of the suite."""
    return asyncio.run(_run())


async def _run() -> list[Result]:
    quick = config().quick
    rates = [float(r) for r in os.environ.get("BENCH_MESSAGING_RATES", "25,100").split(",") if r.strip()]
    seconds = env_int("BENCH_MESSAGING_SECONDS", 3 if quick else 20)
    consumers = env_int("BENCH_MESSAGING_CONSUMERS", 10 if quick else 100)
    results: list[Result] = []
    for rate in rates[:1] if quick else rates:
        results += await fanout(rate, seconds, consumers)
    backends = os.environ.get("BENCH_BACKENDS", "sqlite,cassandra").split(",")
    rows = env_int("BENCH_MESSAGING_ROWS", 20_000 if quick else 1_000_000)
    results += await records_at_scale("sqlite", rows)
    if "cassandra" in backends:
        cassandra_rows = env_int("BENCH_MESSAGING_CASSANDRA_ROWS", 20_000 if quick else 1_000_000)
        results += await records_at_scale("cassandra", cassandra_rows)
    return results


def _service_env(feeds: FakeFeeds, store: dict[str, str]) -> dict[str, str]:
    return {
        "SUBSCRIPTION_EDGE_ADDR": feeds.address,
        "SUBSCRIPTION_HEALTH_ADDR": feeds.address,
        "SUBSCRIPTION_HISTORY_ADDR": "127.0.0.1:1",  # no stored check, no served history here
        "SUBSCRIPTION_HISTORY_SERVED_ADDRS": "none",
        "SUBSCRIPTION_CONSUMER_BUFFER": "1000000",
        "SUBSCRIPTION_MAINTAIN_INTERVAL_SECONDS": "86400",
        "MSGSTORE_RECORD_RETENTION_SECONDS": "0",
        **store,
    }


def _sqlite(path: Path) -> dict[str, str]:
    return {"MSGSTORE_BACKEND": "sqlite", "MSGSTORE_SQLITE_PATH": str(path)}


def _cassandra() -> dict[str, str]:
    from tools.cassandra import ctl

    node = ctl.NodeConfig.from_env()
    return {
        "MSGSTORE_BACKEND": "cassandra",
        "MSGSTORE_CASSANDRA_HOSTS": node.host,
        "MSGSTORE_CASSANDRA_PORT": str(node.native_port),
        "MSGSTORE_CASSANDRA_KEYSPACE": KEYSPACE,
        "MSGSTORE_CASSANDRA_REQUEST_TIMEOUT_SECONDS": "60",
    }


async def _until(check: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# ------------------------------------------------------------------------------------------------ fan-out


async def fanout(rate: float, seconds: float, consumers: int) -> list[Result]:
    """Event latency at ``consumers`` live consumers with envelopes arriving at ``rate`` per second."""
    WORK.mkdir(parents=True, exist_ok=True)
    db = WORK / "messaging-fanout.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    feeds = FakeFeeds()
    await feeds.start()
    service = await start_service("subscription", _service_env(feeds, _sqlite(db)), name="subscription")
    ctx = multiprocessing.get_context("spawn")
    out: Any = ctx.Queue()
    child = ctx.Process(target=consume, args=(service.address, consumers, out), daemon=True)
    try:
        async with grpc.aio.insecure_channel(service.address) as channel:
            stub = subscription_pb2_grpc.SubscriptionServiceStub(channel)
            await _subscribe(stub)
        await _until(lambda: feeds.streams_with(b"\xbe\xef\x00\x01") > 0, "the edge feed opened")
        child.start()
        n = 0
        while True:  # warm up until every consumer has seen an event
            feeds.inject(WARM + n.to_bytes(4, "big"))
            n += 1
            await asyncio.sleep(0.1)
            try:
                assert out.get_nowait()[0] == "ready"
                break
            except queue.Empty:
                if not child.is_alive():
                    raise RuntimeError("the consumer process died") from None
        count = int(rate * seconds)
        began = time.perf_counter()
        with CpuMeter(
            {"subscription": service.pid, "consumers": child.pid or 0, "bench": os.getpid()}
        ) as cpu:
            for i in range(count):
                delay = began + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                feeds.inject(MEASURED + i.to_bytes(4, "big"))
            feeds.inject(END)
            kind, samples = await asyncio.to_thread(out.get, True, 300)
        assert kind == "done"
        child.join(30)
    finally:
        if child.is_alive():
            child.kill()
        await service.stop()
        await feeds.stop()
    measured = [s for s in samples if s[0] == MEASURED[0]]
    first: dict[int, float] = {}
    for _, sequence, arrived, _, _ in measured:
        first[sequence] = min(arrived, first.get(sequence, arrived))
    commit = summarize_ms([arrived - emitted for _, _, arrived, emitted, _ in measured])
    inject = summarize_ms([arrived - injected for _, _, arrived, _, injected in measured])
    # the parts: the commit (SQLite, fsync of the WAL) and the first delivery; then the spread over the
    # consumers, which is the fan-out itself (one event loop writing to each consumer in turn)
    to_first = summarize_ms([first[sequence] - emitted for _, sequence, _, emitted, _ in measured])
    spread = summarize_ms([arrived - first[sequence] for _, sequence, arrived, _, _ in measured])
    expected = 2 * count * consumers
    detail = {
        "consumers": consumers,
        "envelopes_per_s": rate,
        "envelopes": count,
        "events_delivered": len(measured),
        "events_expected": expected,
        "event_latency_from_emitted_at": commit,
        "event_latency_from_injection": inject,
        "first_consumer_after_emitted_at": to_first,
        "arrival_after_first_consumer": spread,
        "deliveries_per_s": round(len(measured) / max(cpu.wall_s, 1e-9)),
        **cpu.report(per=len(measured), unit="delivery"),
    }
    label = f"fan-out to {consumers} StreamEvents consumers, {rate:g} envelopes/s ({2 * rate:g} events/s)"
    return [
        Result(f"{label}: event latency p50", commit["p50_ms"], "ms", detail, None, True),
        Result(f"{label}: event latency p99", commit["p99_ms"], "ms", {}, P99_TARGET_MS, True),
        Result(f"{label}: arrival after the first consumer (the fan-out itself) p99", spread["p99_ms"], "ms"),
        Result(f"{label}: events lost", float(expected - len(measured)), "events", {}, 0.0, True),
    ]


async def _subscribe(stub: Any) -> str:
    request = subscription_pb2.SubscribeRequest(content_topics=[content_topic()])
    for _ in range(300):  # the writer lease is taken a moment after SERVING
        try:
            return str((await stub.Subscribe(request, timeout=10)).subscription_id)
        except grpc.aio.AioRpcError as err:
            if err.code() is not grpc.StatusCode.UNAVAILABLE:
                raise
            await asyncio.sleep(0.05)
    raise RuntimeError("no writer")


# ------------------------------------------------------------------------------------------------ at scale


async def seed(store: MsgStore, dataset: RecordDataset, budget_s: float) -> tuple[int, float]:
    """Write the dataset with the store's own writer (2,000 records a commit) until ``budget_s``; returns
    (records written, seconds). The store keeps the figures (position ``bench/seeded``), so a run that reuses
    the cached file still reports how fast it was built, and when."""
    lease = await store.leases.acquire("records/writer", "bench-seed", 3600.0, time.time())
    if lease is None:
        raise RuntimeError("the records writer lease is held")
    writer = await store.records.writer(lease, now=time.time())
    written = 0
    topic, subscription = dataset.content_topic(0), dataset.subscription_id(0)
    matching = {"topic": 0, "subscription": 0}  # the listings measured: their sizes, without reading them
    began = time.perf_counter()
    for batch in dataset.batches(2000):
        await writer.commit(batch, [], now=time.time())
        written += len(batch)
        matching["topic"] += sum(r.message.content_topic == topic for r in batch)
        matching["subscription"] += sum(subscription in r.subscription_ids for r in batch)
        if time.perf_counter() - began > budget_s:
            break
    took = time.perf_counter() - began
    marker = {
        "records": written,
        "seconds": round(took, 1),
        "when": time.strftime("%Y-%m-%d %H:%M UTC"),
        "matching": matching,
    }
    await writer.commit([], [], now=time.time(), positions={"bench/seeded": json.dumps(marker).encode()})
    await store.leases.release(lease)
    return written, took


async def records_at_scale(backend: str, rows: int) -> list[Result]:
    """Seed (or reuse) ``rows`` records, then time GetMessageRecord and deep listings through the service."""
    dataset = RecordDataset(rows)
    if backend == "sqlite":
        CACHE.mkdir(parents=True, exist_ok=True)
        store_env = _sqlite(CACHE / f"messaging-records-{dataset.key}.sqlite3")
        budget = float("inf")
    else:
        store_env = _cassandra()
        budget = float(env_int("BENCH_MESSAGING_CASSANDRA_BUDGET_S", 900))
        await _drop_keyspace()
    store = create_store(StoreConfig.from_env({**store_env, "MSGSTORE_RECORD_RETENTION_SECONDS": "0"}))
    await store.open()
    try:
        seeded = await store.records.position("bench/seeded")
        if seeded is None:
            await seed(store, dataset, budget)
            seeded = await store.records.position("bench/seeded")
            assert seeded is not None
            seeding: dict[str, Any] = {"reused": False, **json.loads(seeded)}
        else:
            seeding = {"reused": True, **json.loads(seeded)}  # the figures of the run that built it
        rows = int(seeding["records"])
        counts: dict[str, int] = seeding.pop("matching", None) or {  # a file seeded before it was kept
            "topic": len(await store.records.list_by_topic(dataset.content_topic(0), None, None)),
            "subscription": len(
                await store.records.list_by_subscription(dataset.subscription_id(0), None, None)
            ),
        }
    finally:
        await store.close()
    results: list[Result] = []
    label = {"sqlite": "SQLite", "cassandra": "Cassandra"}[backend] + f" {rows:,} records"
    rate = seeding["records"] / max(seeding["seconds"], 1e-9)
    results.append(
        Result(
            f"{label}: seeding with the store's writer (2,000 a commit)", round(rate), "records/s", seeding
        )
    )
    feeds = FakeFeeds()
    await feeds.start()
    service = await start_service(
        "subscription", _service_env(feeds, store_env), name=f"subscription-{backend}"
    )
    try:
        results += await _gets(service, dataset, rows, label)
        results += await _lists(service, dataset, label, counts)
    finally:
        await service.stop()
        await feeds.stop()
        if backend == "cassandra":
            await _drop_keyspace()
    return results


async def _gets(service: Service, dataset: RecordDataset, rows: int, label: str) -> list[Result]:
    calls = env_int("BENCH_MESSAGING_GETS", 400 if config().quick else 4000)
    rng = random.Random(5)
    keys = [rng.randrange(rows) for _ in range(calls)]
    latencies: list[float] = []
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = subscription_pb2_grpc.SubscriptionServiceStub(channel)

        async def client(mine: Sequence[int]) -> None:
            for i in mine:
                if i % 10 == 0:
                    request = subscription_pb2.GetMessageRecordRequest(request_id=dataset.request_id(i))
                else:
                    request = subscription_pb2.GetMessageRecordRequest(message_hash=dataset.message_hash(i))
                started = time.perf_counter()
                reply = await stub.GetMessageRecord(request, timeout=30)
                latencies.append(time.perf_counter() - started)
                assert reply.record.message_hash == dataset.message_hash(i)

        await client(keys[:50])  # warm
        latencies.clear()
        with CpuMeter({"subscription": service.pid, "bench": os.getpid()}) as cpu:
            await asyncio.gather(*(client(keys[c::CLIENTS]) for c in range(CLIENTS)))
    stats = summarize_ms(latencies)
    detail = {"clients": CLIENTS, "calls": calls, "latency": stats, **cpu.report(per=calls, unit="call")}
    detail["calls_per_s"] = round(calls / max(cpu.wall_s, 1e-9))
    name = f"{label}: GetMessageRecord, {CLIENTS} clients (1 in 10 by request id)"
    return [
        Result(f"{name}: p50", stats["p50_ms"], "ms", detail, None, True),
        Result(f"{name}: p99", stats["p99_ms"], "ms", {}, None, True),
    ]


async def _lists(
    service: Service, dataset: RecordDataset, label: str, counts: dict[str, int]
) -> list[Result]:
    repeats = env_int("BENCH_MESSAGING_LISTS", 20 if config().quick else 100)
    filters = {
        "topic": subscription_pb2.RecordFilter(content_topic=dataset.content_topic(0)),
        "subscription": subscription_pb2.RecordFilter(subscription_id=dataset.subscription_id(0)),
    }
    results: list[Result] = []
    async with grpc.aio.insecure_channel(service.address) as channel:
        stub = subscription_pb2_grpc.SubscriptionServiceStub(channel)
        for kind, flt in filters.items():
            for skip in sorted(
                {min(s, max(0, counts[kind] - TAKE)) for s in LIST_SKIPS}
            ):  # quick: fewer rows
                request = subscription_pb2.ListMessageRecordsRequest(filter=flt, skip=skip, take=TAKE)
                latencies: list[float] = []
                for n in range(repeats + 3):
                    started = time.perf_counter()
                    got = [
                        r
                        async for chunk in stub.ListMessageRecords(request, timeout=60)
                        for r in chunk.records
                    ]
                    if n >= 3:  # the first calls warm the caches
                        latencies.append(time.perf_counter() - started)
                    assert len(got) == TAKE, (kind, skip, len(got))
                stats = summarize_ms(latencies)
                detail = {"matching_records": counts[kind], "calls": repeats, "latency": stats}
                name = (
                    f"{label}: ListMessageRecords by {kind} ({counts[kind]:,} match), skip={skip} take={TAKE}"
                )
                results.append(Result(f"{name}: p50", stats["p50_ms"], "ms", detail, None, True))
                results.append(Result(f"{name}: p99", stats["p99_ms"], "ms", {}, None, True))
    return results


async def _drop_keyspace() -> None:
    from cassandra.cluster import Cluster

    from tools.cassandra import ctl

    node = ctl.NodeConfig.from_env()

    def drop() -> None:
        cluster = Cluster([node.host], port=node.native_port)
        try:
            cluster.connect().execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}", timeout=120)
        finally:
            cluster.shutdown()

    await asyncio.to_thread(drop)
