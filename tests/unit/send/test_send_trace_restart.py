"""A Send's trace context is stored with its request: an attempt made after a restart, or by the replica that
took the shard over, joins the trace of the Send call that queued it; a Resend moves later attempts into the
Resend's trace. Real SQLite outbox, injected clock, scripted publisher, scheduling passes run by hand."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from meshcore.tracing import traceparent
from msgstore.config import StoreConfig
from msgstore.factory import open_store
from msgstore.protocol import MsgStore
from msgstore.types import Message, SendState
from services.send.engine import SendEngine
from services.send.metrics import SendMetrics
from services.send.ownership import ShardOwnership
from services.send.ports import EngineSettings, PublishOutcome
from services.send.schedule import RetryPolicy
from services.send.sealing import Sealer
from services.send.validation import SendInput, prepare
from tests.unit.send.send_fixtures import RULES, T0, TOPIC, NeverStored


class Script:
    """A publisher that records the trace each publish ran in; reaches no peer while ``failing``."""

    def __init__(self) -> None:
        self.traces: list[int] = []
        self.failing = False

    async def publish(self, raw: bytes, envelope_hash: bytes, *, ephemeral: bool) -> PublishOutcome:
        self.traces.append(trace.get_current_span().get_span_context().trace_id)
        relayed = 0 if self.failing else 1
        return PublishOutcome(envelope_hash, relayed, detail="no peer" if self.failing else "")

    async def pow_target(self) -> float:
        return 0.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MsgStore]:
    cfg = StoreConfig.from_env(
        {"MSGSTORE_SQLITE_PATH": str(tmp_path / "m.db"), "MSGSTORE_OUTBOX_SHARDS": "2"}
    )
    async with open_store(cfg) as opened:
        yield opened


@pytest.fixture
def tracer() -> Iterator[trace.Tracer]:
    provider = TracerProvider()  # the Send and Resend calls' server spans, as the interceptor opens them
    yield provider.get_tracer("test")
    provider.shutdown()


def clock() -> float:
    """Time stands still: every attempt is due at once."""
    return T0


def _engine(store: MsgStore, script: Script, name: str) -> SendEngine:
    policy = RetryPolicy(retries=0, store_check_delay_s=0.0)
    return SendEngine(
        store,
        ShardOwnership(store, 2, name, 3600.0, clock),
        script,
        NeverStored(),
        Sealer(max_pow=0, work_time_s=1),
        EngineSettings(policy=policy, max_in_flight=4, lease_ttl_s=3600.0, adopt_interval_s=3600.0),
        SendMetrics(CollectorRegistry()),
        clock,
    )


async def _one_pass(engine: SendEngine) -> None:
    """One scheduling pass by hand (the loops are not started); what it launched runs to its end."""
    engine._pass()
    async with asyncio.timeout(10):
        while engine._busy:
            await engine.wait_change(0.05)


async def test_an_attempt_after_a_restart_joins_the_trace_of_the_send(
    store: MsgStore, tracer: trace.Tracer
) -> None:
    script = Script()
    first = _engine(store, script, "a")
    await first.first_tick()
    entry = prepare(SendInput("", "", Message(payload=b"x", content_topic=TOPIC)), RULES, T0)
    with tracer.start_as_current_span("/mailmesh.send.v1.SendService/Send") as send:
        stored, created = await first.accept(entry, given_id=False, given_timestamp=False)
    assert created and stored.traceparent == traceparent(send.get_span_context())
    await first.stop()  # before any attempt: the replica stops and gives its shards up
    assert script.traces == []

    later = _engine(store, script, "b")  # a restarted process, or the replica taking the shards over
    await later.first_tick()
    try:
        await _one_pass(later)
    finally:
        await later.stop()
    assert script.traces == [send.get_span_context().trace_id]
    done = await store.outbox.get(entry.request_id, now=T0)
    assert done is not None and done.state is SendState.SUCCEEDED


async def test_a_resend_moves_later_attempts_into_its_own_trace(
    store: MsgStore, tracer: trace.Tracer
) -> None:
    script = Script()
    script.failing = True
    engine = _engine(store, script, "a")
    await engine.first_tick()
    once = dataclasses.replace(RULES, max_attempts=1)  # the first failed attempt is the last one
    entry = prepare(SendInput("", "", Message(payload=b"y", content_topic=TOPIC)), once, T0)
    try:
        with tracer.start_as_current_span("Send") as send:
            await engine.accept(entry, given_id=False, given_timestamp=False)
        await _one_pass(engine)
        failed = await store.outbox.get(entry.request_id, now=T0)
        assert failed is not None and failed.state is SendState.FAILED
        script.failing = False
        with tracer.start_as_current_span("Resend") as resend:
            assert (await engine.resend(entry.request_id))[0]
        await _one_pass(engine)
    finally:
        await engine.stop()
    assert script.traces == [send.get_span_context().trace_id, resend.get_span_context().trace_id]
    done = await store.outbox.get(entry.request_id, now=T0)
    assert done is not None and done.traceparent == traceparent(resend.get_span_context())
