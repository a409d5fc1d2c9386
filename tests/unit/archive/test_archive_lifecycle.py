"""The store gate (open, reachability, close) and the background loop runner."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from archivestore.errors import SchemaError, StoreUnavailable
from archivestore.retention import RetentionPolicy
from services.archive.errors import ArchiveUnavailable
from services.archive.lifecycle import PROBE_HASH, Periodic, StoreGate
from tests.integration.archive.model import ModelStore


class FlakyStore(ModelStore):
    """The reference store whose open() and contains() fail while ``down`` is set."""

    def __init__(self, *, down: bool = True, schema_broken: bool = False) -> None:
        super().__init__(RetentionPolicy(default_s=None))
        self.down = down
        self.schema_broken = schema_broken
        self.opened = self.closed = 0
        self.probed: list[bytes] = []

    async def open(self) -> None:
        if self.schema_broken:
            raise SchemaError("schema version 9 is newer than this code")
        if self.down:
            raise StoreUnavailable("connection refused")
        self.opened += 1

    async def close(self) -> None:
        self.closed += 1

    async def contains(self, hashes: Sequence[bytes], *, now: int) -> list[bool]:
        self.probed += hashes
        if self.down:
            raise StoreUnavailable("timed out")
        return await super().contains(hashes, now=now)


async def test_the_gate_hands_out_the_store_only_once_open() -> None:
    store = FlakyStore()
    reports: list[bool] = []

    async def sink(ok: bool) -> None:
        reports.append(ok)

    gate = StoreGate(store, sink)
    with pytest.raises(ArchiveUnavailable, match="the model store is not open \\(not opened yet\\)"):
        _ = gate.store
    assert not await gate.try_open()
    assert not await gate.try_open()  # a second failure reports nothing new
    with pytest.raises(ArchiveUnavailable, match="connection refused"):
        _ = gate.store
    store.down = False
    assert await gate.try_open() and gate.is_open and gate.store is store
    assert reports == [False, True]
    store.down = True
    await gate.probe(0)
    await gate.probe(0)
    store.down = False
    await gate.probe(0)
    assert reports == [False, True, False, True] and store.probed == [PROBE_HASH] * 3
    await gate.close()
    await gate.close()
    assert store.closed == 1 and not await gate.try_open()
    with pytest.raises(ArchiveUnavailable, match="closed"):
        _ = gate.store


async def test_a_schema_problem_is_not_retried() -> None:
    with pytest.raises(SchemaError):
        await StoreGate(FlakyStore(schema_broken=True)).try_open()


async def test_periodic_runs_until_stopped_or_done_and_survives_failures() -> None:
    calls: list[str] = []
    runners: set[asyncio.Task[object] | None] = set()

    async def flaky() -> None:
        calls.append("run")
        runners.add(asyncio.current_task())
        if len(calls) == 2:
            raise RuntimeError("boom")

    loop = Periodic("test", 0.001, flaky)
    loop.start()
    while loop.runs < 4:
        await asyncio.sleep(0.001)
    await loop.stop()
    await loop.stop()
    # Every run happened in one task, and stop() returned only once that task had ended: no run can follow.
    [runner] = runners
    assert runner is not None and runner.done() and runner.cancelled()
    assert loop.runs == len(calls) >= 4

    attempts: list[asyncio.Task[object] | None] = []

    async def opener() -> bool:
        attempts.append(asyncio.current_task())
        return len(attempts) == 3

    until_done = Periodic("open", 0.001, opener, backoff=2.0, max_interval_s=0.004)
    until_done.start()
    while len(attempts) < 3:
        await asyncio.sleep(0.001)
    opener_task = attempts[-1]
    assert opener_task is not None
    await asyncio.wait_for(opener_task, 30)  # returning True ends the loop on its own (not cancelled)
    assert not opener_task.cancelled() and len(attempts) == 3 and set(attempts) == {opener_task}
    await until_done.stop()
