"""The Cassandra adapter when the node goes away: bounded failures, no lost acknowledgements, recovery.

These tests stop (SIGTERM, through tools/cassandra/ctl.py) or freeze (SIGSTOP) the shared local node, so
each one puts it back (start / SIGCONT) in a ``finally`` and waits until it answers again: the node is
running when the module ends, as it was when it began. Every wait is a poll against a deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from archivestore.cassandra.store import CassandraStore
from archivestore.errors import StoreUnavailable
from archivestore.types import StoredEnvelope
from tests.integration.archive import cassandra_fixtures as cf
from tests.integration.archive.contract import (
    BASE,
    DAY,
    KEEP,
    TOPICS,
    env,
    flatten,
    items,
    ordered,
    paginate,
    q,
)
from tools.cassandra import ctl
from wakucodec.bloom import FULL_BLOOM

pytestmark = [pytest.mark.cassandra, pytest.mark.timeout(600)]

cassandra_node = cf.cassandra_node
cassandra_admin = cf.cassandra_admin
cassandra_keyspace = cf.cassandra_keyspace

REQUEST_TIMEOUT_S = 3.0
#: A put against a dead or frozen node must fail within this (request timeout + driver bookkeeping).
FAIL_WITHIN_S = 3 * REQUEST_TIMEOUT_S
#: After the node answers CQL again, the store must be writing within this (reconnection backs off ≤ 10 s).
RECOVER_WITHIN_S = 60.0
BATCH = 50


@pytest.fixture
async def store(
    cassandra_node: ctl.NodeConfig, cassandra_admin: Any, cassandra_keyspace: str
) -> AsyncIterator[CassandraStore]:
    """A store with a short request timeout on the emptied module keyspace."""
    cf.truncate_keyspace(cassandra_admin, cassandra_keyspace)
    s = CassandraStore(
        [cassandra_node.host],
        cassandra_node.native_port,
        cassandra_keyspace,
        KEEP,
        request_timeout=REQUEST_TIMEOUT_S,
        connect_timeout=2.0,
    )
    await s.open()
    yield s
    await s.close()


def batch(n: int) -> list[StoredEnvelope]:
    """The ``n``-th batch of 1 KiB envelopes (distinct across batches)."""
    return [env(BASE + n * BATCH + i, TOPICS[i % 3], n, size=1024) for i in range(BATCH)]


async def until(what: str, deadline_s: float, attempt: Callable[[], Awaitable[bool]]) -> float:
    """Poll ``attempt`` until it returns True; fail after ``deadline_s``. Returns the seconds it took."""
    began = time.monotonic()
    while True:
        if await attempt():
            return time.monotonic() - began
        if time.monotonic() - began > deadline_s:
            pytest.fail(f"{what}: not within {deadline_s:.0f} s")
        await asyncio.sleep(0.2)  # poll interval, not synchronisation


async def put_until_unavailable(
    store: CassandraStore, acked: list[StoredEnvelope], start: int, deadline_s: float
) -> tuple[int, float]:
    """Keep putting batches until one raises StoreUnavailable; each put is bounded by ``FAIL_WITHIN_S``.

    Returns the next batch number and how long the failing put took.
    """
    n = start
    began = time.monotonic()
    while time.monotonic() - began < deadline_s:
        envs = batch(n)
        t0 = time.monotonic()
        try:
            await asyncio.wait_for(store.put(items(envs), now=BASE), timeout=FAIL_WITHIN_S)
        except StoreUnavailable:
            return n, time.monotonic() - t0
        except TimeoutError:
            pytest.fail(f"put hung for more than {FAIL_WITHIN_S} s instead of raising StoreUnavailable")
        acked.extend(envs)
        n += 1
    pytest.fail(f"puts kept succeeding for {deadline_s:.0f} s while the node was down")


async def node_answers(cfg: ctl.NodeConfig) -> bool:
    """One probe of CQL (in a thread: the driver call blocks)."""
    try:
        await asyncio.to_thread(ctl.release_version, cfg, 3.0)
    except Exception:  # every driver error means "not yet"
        return False
    return True


async def put_succeeds(store: CassandraStore, envs: list[StoredEnvelope]) -> bool:
    """One put attempt; False on StoreUnavailable (the caller retries the same batch: idempotent)."""
    try:
        await store.put(items(envs), now=BASE)
    except StoreUnavailable:
        return False
    return True


async def assert_all_present(store: CassandraStore, acked: list[StoredEnvelope]) -> None:
    """Every acknowledged envelope is stored, byte for byte, and found by each read path."""
    assert all(await store.contains([e.hash for e in acked], now=BASE))
    got = flatten(await paginate(store, q(BASE - DAY, BASE + DAY, bloom=FULL_BLOOM, limit=500)))
    assert set(ordered(acked)) <= set(got)
    by_topic = flatten(await paginate(store, q(BASE - DAY, BASE + DAY, topics=TOPICS[:3], limit=500)))
    assert by_topic == got
    assert await store.get(envelope_hash=acked[-1].hash, now=BASE) == acked[-1]


async def test_node_stopped_mid_ingest_fails_fast_loses_nothing_and_recovers(
    store: CassandraStore, cassandra_node: ctl.NodeConfig
) -> None:
    acked: list[StoredEnvelope] = []
    for n in range(4):  # acknowledged before the stop
        await store.put(items(batch(n)), now=BASE)
        acked.extend(batch(n))
    stopper = asyncio.create_task(asyncio.to_thread(ctl.stop, cassandra_node))
    try:
        # Ingest continues while the node drains and exits: puts succeed until one fails, within the bound.
        n, took = await put_until_unavailable(store, acked, 4, deadline_s=120.0)
        assert took < FAIL_WITHIN_S
        assert await stopper
        began = time.monotonic()
        with pytest.raises(StoreUnavailable):  # a dead node: fails at once (no host), nothing to wait for
            await store.put(items(batch(n)), now=BASE)
        assert time.monotonic() - began < FAIL_WITHIN_S
        with pytest.raises(StoreUnavailable):
            await store.query(q(topics=TOPICS[:1]), now=BASE)
    finally:
        await asyncio.gather(stopper, return_exceptions=True)
        await asyncio.to_thread(ctl.start, cassandra_node)
    await until("the node answers CQL", 300.0, lambda: node_answers(cassandra_node))
    # The same store (no reopen) reconnects on its own; the failed batch is simply retried.
    await until("the store writes again", RECOVER_WITHIN_S, lambda: put_succeeds(store, batch(n)))
    acked.extend(batch(n))
    await assert_all_present(store, acked)


async def test_frozen_node_times_out_within_the_request_timeout_and_recovers(
    store: CassandraStore, cassandra_node: ctl.NodeConfig
) -> None:
    """A node that stops answering without closing its sockets (GC pause, SIGSTOP): the client timeout
    bounds every put; nothing hangs; when the node resumes the store carries on."""
    acked: list[StoredEnvelope] = []
    await store.put(items(batch(0)), now=BASE)
    acked.extend(batch(0))
    pid = ctl.running_pid(cassandra_node)
    assert pid is not None, "the local node must be running (started by make cassandra-start)"
    os.kill(pid, signal.SIGSTOP)
    try:
        for n in (1, 2):
            began = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(store.put(items(batch(n)), now=BASE), timeout=FAIL_WITHIN_S + 5)
            assert time.monotonic() - began < FAIL_WITHIN_S
    finally:
        os.kill(pid, signal.SIGCONT)
    await until("the store writes again", RECOVER_WITHIN_S, lambda: put_succeeds(store, batch(1)))
    acked.extend(batch(1))
    await until("batch 2 is written", RECOVER_WITHIN_S, lambda: put_succeeds(store, batch(2)))
    acked.extend(batch(2))
    await assert_all_present(store, acked)
