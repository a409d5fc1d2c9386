"""The engine's serving order and backoff with an injected clock and a scripted publisher, on a real
SQLite outbox (no network): fresh requests before retries, retries newest first, no retry before its due
time. Scheduling passes run by hand, one at a time, so the order is the engine's choice and nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from msgstore.config import StoreConfig
from msgstore.factory import open_store
from msgstore.protocol import MsgStore
from msgstore.types import Message, OutboxEntry, SendState
from services.send.engine import SendEngine
from services.send.metrics import SendMetrics
from services.send.ownership import ShardOwnership
from services.send.ports import EngineSettings, PublishOutcome
from services.send.schedule import RetryPolicy
from services.send.sealing import Sealer, envelope_fields
from services.send.validation import SendInput, prepare
from tests.unit.send.send_fixtures import RULES, T0, TOPIC, NeverStored
from wakucodec.envelope import make_envelope


class Clock:
    """Time the test moves."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


class Script:
    """A publisher that fails the requests listed in ``failing`` and records what it was asked, in order."""

    def __init__(self) -> None:
        self.failing: set[bytes] = set()
        self.published: list[bytes] = []

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        self.published.append(envelope_hash)
        relayed = 0 if envelope_hash in self.failing else 1
        return PublishOutcome(envelope_hash, relayed, detail="" if relayed else "no peer")

    async def pow_target(self) -> float:
        return 0.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MsgStore]:
    cfg = StoreConfig.from_env(
        {
            "MSGSTORE_SQLITE_PATH": str(tmp_path / "m.db"),
            "MSGSTORE_OUTBOX_SHARDS": "2",
            "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "1",
        }
    )
    async with open_store(cfg) as opened:
        yield opened


async def _entry(payload: bytes, clock: Clock) -> OutboxEntry:
    return prepare(SendInput("", "", Message(payload=payload, content_topic=TOPIC)), RULES, clock())


async def _wait(
    engine: SendEngine, store: MsgStore, rid: str, state: SendState, attempts: int
) -> OutboxEntry:
    """The request once it is in ``state`` after ``attempts`` attempts (bounded; woken by each save)."""
    async with asyncio.timeout(10):
        while True:
            entry = await store.outbox.get(rid, now=T0)
            if entry is not None and (entry.state, entry.progress.attempts) == (state, attempts):
                return entry
            await engine.wait_change(0.05)


async def _one_pass(engine: SendEngine) -> None:
    """Run one scheduling pass by hand (the loop is not started) and let what it launched finish."""
    engine._pass()
    async with asyncio.timeout(10):
        while engine._busy:
            await engine.wait_change(0.05)


async def test_fresh_before_retries_and_retries_newest_first(store: MsgStore) -> None:
    clock, script = Clock(), Script()
    policy = RetryPolicy(retries=3, backoff_s=1.0, store_check_delay_s=0.0)
    engine = SendEngine(
        store,
        ShardOwnership(store, 2, "test", 3600.0, clock),
        script,
        NeverStored(),
        Sealer(max_pow=0, work_time_s=1),
        EngineSettings(policy=policy, max_in_flight=1, lease_ttl_s=3600.0, adopt_interval_s=3600.0),
        SendMetrics(CollectorRegistry()),
        clock,
    )
    await engine.first_tick()  # owns both shards; the loops are not started: passes run by hand
    try:
        old, new = await _entry(b"old", clock), await _entry(b"new", clock)
        script.failing |= {_hash_of(old), _hash_of(new)}
        await engine.accept(old, given_id=False, given_timestamp=False)
        await _one_pass(engine)
        clock.now += 0.5
        await engine.accept(new, given_id=False, given_timestamp=False)
        await _one_pass(engine)
        for e in (old, new):
            await _wait(engine, store, e.request_id, SendState.RETRY_WAIT, 1)
        clock.now += 10  # both retries are due; two fresh requests arrive
        fresh = []
        for payload in (b"f1", b"f2"):
            fresh.append(await _entry(payload, clock))
            await engine.accept(fresh[-1], given_id=False, given_timestamp=False)
            clock.now += 0.1
        before = len(script.published)
        for _ in range(4):
            await _one_pass(engine)  # max_in_flight = 1: one attempt per pass, the first in serving order
        # Fresh first (oldest first), then the retries newest first (most recently attempted first).
        assert script.published[before:] == [
            _hash_of(fresh[0]),
            _hash_of(fresh[1]),
            _hash_of(new),
            _hash_of(old),
        ]
        assert [
            (await _wait(engine, store, e.request_id, SendState.RETRY_WAIT, 2)).sent for e in (new, old)
        ] == [
            False,
            False,
        ]
    finally:
        await engine.stop()


async def test_no_retry_starts_before_its_due_time(store: MsgStore) -> None:
    clock, script = Clock(), Script()
    engine = SendEngine(
        store,
        ShardOwnership(store, 2, "test", 3600.0, clock),
        script,
        NeverStored(),
        Sealer(max_pow=0, work_time_s=1),
        EngineSettings(policy=RetryPolicy(), max_in_flight=4, lease_ttl_s=3600.0, adopt_interval_s=3600.0),
        SendMetrics(CollectorRegistry()),
        clock,
    )
    await engine.first_tick()
    try:
        e = await _entry(b"x", clock)
        script.failing.add(_hash_of(e))
        await engine.accept(e, given_id=False, given_timestamp=False)
        await _one_pass(engine)
        waiting = await _wait(engine, store, e.request_id, SendState.RETRY_WAIT, 1)
        assert waiting.progress.next_attempt_at == pytest.approx(clock.now + 1.0)
        clock.now += 0.999
        await _one_pass(engine)  # not due yet: the pass starts nothing
        assert len(script.published) == 1
        clock.now += 0.002
        await _one_pass(engine)
        again = await _wait(engine, store, e.request_id, SendState.RETRY_WAIT, 2)
        assert len(script.published) == 2
        assert again.progress.next_attempt_at == pytest.approx(clock.now + 2.0)  # the second delay: 2 s
    finally:
        await engine.stop()


def _hash_of(entry: OutboxEntry) -> bytes:
    expiry, ttl, topic, data = envelope_fields(entry)
    return make_envelope(expiry=expiry, ttl=ttl, topic=topic, data=data).hash
