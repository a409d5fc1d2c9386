"""One fault on one hop, from "the hop works" to "everything acknowledged arrived": a campaign case.

For each case (``hop`` × ``fault``) the load for that hop runs throughout, and the case checks, in order:

1. **It works first**: the load gets an answer through the hop before the fault.
2. **The fault shows**: under a fault that must fail calls (a reset or a black hole anywhere, latency past
   the deadline on a hop of unary calls) a call on the hop ends DEADLINE_EXCEEDED or UNAVAILABLE — its
   deadline fired, its connection was reset, or keepalive dropped a silent connection — while the fault is
   still on. Other faults (200 ms of latency, slow reads, latency on a stream) are tolerated: the load may
   go on through them or calls may fail; either is recorded.
3. **Nothing hangs**, measured as an ordering, not a duration: every call the client had started when the
   fault began (and, for unary calls, when it showed) has ended before the fault is cleared. A long-lived
   stream counts too under a fault that must fail calls: it must have been ended, not left waiting.
4. **Retries are bounded**: call attempts that reached the wire (HTTP/2 request streams the proxy counted)
   are at most the hop's ``max_attempts`` per call the client started, or had in flight, in the case.
5. **Nothing is lost**: after the fault clears the load succeeds again and every item it was told succeeded
   has arrived (:meth:`bench.faults_traffic.Traffic.missing`).

The client's side comes from the client process's go-grpc-prometheus counters (``grpc_client_*``), scoped to
the hop's gRPC services.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.faults_mesh import FaultMesh, Hop
from bench.faults_traffic import Traffic
from meshharness import FaultProxy, ServiceProcess

__all__ = ["FAULTS", "CaseError", "HopSpec", "run_case"]

EVIDENCE_S = 90.0
"""Longest wait for a fault to show, or for the hop to answer (a bound on failure only, not a figure)."""


@dataclass(frozen=True)
class HopSpec:
    """One hop: its client's gRPC services, whether its call is a long stream, its load, its attempts."""

    hop: Hop
    services: tuple[str, ...]
    """``grpc_service`` labels of the client's calls on this hop."""
    traffic: Callable[[FaultMesh], Traffic]
    stream: bool = False
    """The hop's call is a long-lived stream (no deadline of its own: keepalive ends it when silent)."""
    max_attempts: int = 1
    """Attempts per call the client's retry policy allows (1: none)."""

    @property
    def name(self) -> str:
        """``client→dependency``."""
        return f"{self.hop[0]}→{self.hop[1]}"


@dataclass(frozen=True)
class Fault:
    """A fault the proxy injects; ``fails`` says where calls must fail under it (module docstring, 2.)."""

    name: str
    apply: Callable[[FaultProxy], None]
    fails: str
    """``always``, ``unary`` (hops whose calls have deadlines) or ``never`` (tolerated)."""

    def must_fail(self, spec: HopSpec) -> bool:
        """Whether calls on ``spec``'s hop must fail under this fault."""
        return self.fails == "always" or (self.fails == "unary" and not spec.stream)


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("latency_200ms", lambda p: p.latency(0.2), fails="never"),
        # Past every unary deadline of the campaign (SETTINGS: 0.5 s to 3 s), and past keepalive's 2 s.
        Fault("latency_3s", lambda p: p.latency(3.0), fails="unary"),
        Fault("reset", lambda p: p.reset(), fails="always"),
        Fault("blackhole", lambda p: p.blackhole(), fails="always"),
        Fault("slow_reads_4KiB", lambda p: p.slow_reads(4096), fails="never"),
    )
}
"""What the campaign injects, by name."""


class CaseError(AssertionError):
    """A case broke one of the rules in the module docstring."""


#: How a fault surfaces to the client: its deadline fired, or the connection failed (reset, or dropped by
#: keepalive). CANCELLED is the client's own choice (the edge peer cancels a history stream it has read).
FAULT_CODES = ("DeadlineExceeded", "Unavailable")


@dataclass
class _Calls:
    started: float
    ended: Counter[str]

    @property
    def handled(self) -> float:
        return sum(self.ended.values())

    @property
    def faulted(self) -> int:
        return sum(self.ended[code] for code in FAULT_CODES)


def _calls(process: ServiceProcess, services: tuple[str, ...]) -> _Calls:
    started, ended = 0.0, Counter[str]()
    for (name, labels), value in process.metrics().items():
        found = dict(labels)
        if found.get("grpc_service") not in services:
            continue
        if name == "grpc_client_started_total":
            started += value
        elif name == "grpc_client_handled_total":
            ended[found["grpc_code"]] += int(value)
    return _Calls(started, ended)


async def _until(what: str, condition: Callable[[], bool], timeout: float = EVIDENCE_S) -> float:
    """Wait (polling state other processes change) until ``condition()``; the seconds it took."""
    began = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            while not await asyncio.to_thread(condition):
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise CaseError(f"not within {timeout:g} s: {what}") from None
    return time.monotonic() - began


def _ended_by(process: ServiceProcess, services: tuple[str, ...], mark: float) -> Callable[[], bool]:
    """Whether as many calls have ended as had started at ``mark``."""
    return lambda: _calls(process, services).handled >= mark


async def _shown(
    client: ServiceProcess, spec: HopSpec, traffic: Traffic, before: _Calls, must_fail: bool
) -> float:
    """2. The fault shows: a call failed (or, when tolerated, the load went on); the seconds it took."""
    ok_before = traffic.outcomes["OK"]

    def failed() -> bool:
        return _calls(client, spec.services).faulted > before.faulted

    def went_on() -> bool:
        return traffic.outcomes["OK"] >= ok_before + 3 or failed()

    if must_fail:
        return await _until("a call on the hop failed", failed)
    return await _until("the load went on or failed", went_on)


async def _nothing_hangs(client: ServiceProcess, spec: HopSpec, before: _Calls, must_fail: bool) -> None:
    """3. What had started when the fault began (and, for unary calls, when it showed) has ended."""
    if spec.stream and not must_fail:
        return  # a tolerated fault on a stream may leave it open: it still works
    marks = [before.started]
    if not spec.stream:
        marks.append((await asyncio.to_thread(_calls, client, spec.services)).started)
    for mark in marks:
        await _until("calls started during the fault ended", _ended_by(client, spec.services, mark))


async def run_case(mesh: FaultMesh, spec: HopSpec, fault: Fault) -> dict[str, Any]:
    """Run one case; returns its record (figures and ``failures``, empty when every rule held)."""
    proxy, client = mesh.proxies[spec.hop], mesh.get(spec.hop[0])
    must_fail = fault.must_fail(spec)
    record: dict[str, Any] = {
        "hop": spec.name,
        "fault": fault.name,
        "expect": "errors" if must_fail else "tolerated",
    }
    failures: list[str] = []
    traffic = spec.traffic(mesh)
    traffic.start()
    try:
        await traffic.until_more(1, EVIDENCE_S)  # 1. it works first
    except TimeoutError:
        await traffic.stop()
        return {**record, "failures": [f"the hop did not answer within {EVIDENCE_S:g} s before the fault"]}
    try:
        # The client's counters first, then the proxy's: an attempt the proxy counts was started before.
        before = await asyncio.to_thread(_calls, client, spec.services)
        proxy.reset_stats()
        fault.apply(proxy)
        on = time.monotonic()
        try:
            record["shown_s"] = round(await _shown(client, spec, traffic, before, must_fail), 2)
            await _nothing_hangs(client, spec, before, must_fail)
        except CaseError as err:
            failures.append(str(err))  # recorded; the fault still clears and what was lost is counted
        record["fault_s"] = round(time.monotonic() - on, 2)
        proxy.clear()
        cleared = time.monotonic()
        # 5. nothing lost: answers again, then every acknowledged item arrives
        try:
            await traffic.until_more(3, EVIDENCE_S)
            await traffic.stop()
            async with asyncio.timeout(EVIDENCE_S):
                while await traffic.missing():
                    await asyncio.sleep(0.2)  # polling the destinations while buffers drain
            record["recovered_s"] = round(time.monotonic() - cleared, 2)
        except TimeoutError:
            failures.append(f"not recovered within {EVIDENCE_S:g} s of the fault clearing")
        record["lost"] = len(await _missing_now(traffic))
    finally:
        proxy.clear()
        await traffic.stop()
    stats = proxy.stats  # the proxy's counts first, then the client's (see above)
    after = await asyncio.to_thread(_calls, client, spec.services)
    calls = after.started - before.started + (before.started - before.handled)  # started, or in flight
    # 4. retries are bounded
    if stats.requests > spec.max_attempts * calls:
        failures.append(
            f"{stats.requests} attempts on the wire for {calls:g} calls (max {spec.max_attempts} each)"
        )
    record.update(
        calls=int(after.started - before.started),
        in_flight_at_fault=int(before.started - before.handled),
        ended=dict(after.ended - before.ended),
        attempts_on_wire=stats.requests,
        max_attempts=spec.max_attempts,
        connections=stats.connections,
        resets=stats.resets,
        acknowledged=len(traffic.acked),
        load=dict(traffic.outcomes),
        failures=failures,
    )
    return record


async def _missing_now(traffic: Traffic) -> list[bytes | str]:
    try:
        return await traffic.missing()
    except Exception:  # the destination itself may be what failed; the case already records that
        return list(traffic.acked)
