"""Sustained traffic through a running mesh while the campaign breaks the Cassandra cluster under it.

Four kinds of actors share the test's event loop and write down everything they see, stamped with seconds
since the load began:

- **publishers** — real RLPx peers (:class:`wakunode.WakuClient`, waku/1) posting freshly sealed envelopes
  to the edge peer in Messages packets, paced to a total rate. A post that the edge peer holds back (its
  ingest buffer full: it stops reading that peer's socket) simply takes longer; every post's duration is kept.
- **prober** — one ``IngestBatch`` call to ingest per second, a small batch of new envelopes each: which
  envelopes were acknowledged exactly, and how long a refusal (UNAVAILABLE) takes to arrive.
- **pager** — a requester peer asking the edge peer for a page of recent history (0x7e → 0x7f → 0x7d) once
  a second: whether history answers, and how long an ERROR answer takes.
- **sampler** — the edge peer's forwarder metrics once a second (acknowledged envelopes, buffer level,
  back-pressure waits, drops, stream failures).

Pacing sleeps are the load's rate, not synchronisation: nothing here waits for another actor.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import grpc
import grpc.aio
from google.protobuf import timestamp_pb2

from devp2p.config import ServerConfig, SessionConfig
from mailmesh.ingest.v1 import ingest_pb2, ingest_pb2_grpc
from meshharness import ServiceProcess
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.pow import seal
from wakunode.client import CLIENT_CONFIG, WakuClient

__all__ = ["Load", "LoadPlan", "Sample", "Sealer", "Timed"]

TOPICS = tuple(bytes.fromhex(h) for h in ("c1a57e01", "c1a57e02", "c1a57e03", "c1a57e04"))
#: The mailserver password the edge peer accepts by default (status-go's "status-offline-inbox").
PASSWORD = "status-offline-inbox"
#: status-go's node minimum PoW (the edge peer's and ingest's default); envelopes are sealed to it.
MIN_POW = 0.000002
TTL_S = 6 * 3600
WAKU1 = replace(CLIENT_CONFIG, capabilities=("waku/1",))
CLIENT_SERVER = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=10.0))
EDGE_COUNTERS = (
    "edge_ingest_envelopes_acked_total",
    "edge_ingest_buffered_envelopes",
    "edge_ingest_backpressure_waits_total",
    "edge_ingest_dropped_envelopes_total",
    "edge_ingest_stream_failures_total",
    "edge_ingest_batches_resent_total",
    "waku_envelopes_received_total",
)


class Sealer:
    """Distinct envelopes sealed to :data:`MIN_POW`, sent now, on :data:`TOPICS` in turn."""

    def __init__(self, tag: int) -> None:
        self._counter = itertools.count()
        self._tag = tag

    def make(self, n: int) -> list[Envelope]:
        """``n`` new envelopes (the data carries a tag and a counter: no two are equal)."""
        now = int(time.time())
        out = []
        for _ in range(n):
            i = next(self._counter)
            data = self._tag.to_bytes(8, "big") + i.to_bytes(8, "big") + os.urandom(240)
            out.append(
                seal(now + TTL_S, TTL_S, TOPICS[i % len(TOPICS)], data, target_pow=MIN_POW, work_time_s=5)
            )
        return out


@dataclass(frozen=True)
class Timed:
    """One call: when it began (seconds since the load began), how long it took, its outcome."""

    at: float
    seconds: float
    outcome: str
    """``ok``, or the gRPC status code name / exception type of a failure."""
    count: int = 0
    """Envelopes acknowledged (prober) or received (pager)."""


@dataclass(frozen=True)
class Sample:
    """The edge peer's forwarder metrics at ``at``."""

    at: float
    values: dict[str, float]


@dataclass(frozen=True)
class LoadPlan:
    """How much load: total posting rate, peers, envelopes per Messages packet, prober batch size."""

    rate: float = 150.0
    publishers: int = 3
    packet: int = 15
    probe_batch: int = 5


@dataclass
class Load:
    """The running load; see the module docstring. ``start``, let it run, ``stop``; then read the records."""

    enode: str
    ingest_addr: str
    edge: ServiceProcess
    plan: LoadPlan = field(default_factory=LoadPlan)
    posted: list[bytes] = field(default_factory=list)
    """Hashes of every envelope a publisher handed to the edge peer (its post returned)."""
    posts: list[Timed] = field(default_factory=list)
    probes: list[Timed] = field(default_factory=list)
    acked: list[bytes] = field(default_factory=list)
    """Hashes of every envelope ingest acknowledged to the prober."""
    pages: list[Timed] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    began: float = 0.0
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _release: asyncio.Event = field(default_factory=asyncio.Event)
    _posting_done: set[int] = field(default_factory=set)
    _received_before: float = 0.0

    def now(self) -> float:
        """Seconds since the load began."""
        return time.monotonic() - self.began

    async def start(self) -> None:
        """Start every actor (each peer connects first)."""
        self._received_before = await asyncio.to_thread(self._received)
        self.began = time.monotonic()
        actors = [self._publisher(k) for k in range(self.plan.publishers)]
        actors += [self._prober(), self._pager(), self._sampler()]
        self._tasks = [asyncio.create_task(a) for a in actors]

    async def stop(self, drain_s: float) -> None:
        """Stop posting and probing, wait until the edge peer has read every posted envelope, then end.

        A post returns once its packet is in the socket; while the edge peer pushes back it leaves packets
        unread, and closing the session then would discard them (nothing was acknowledged to the peer, but
        the count would be wrong). So the sessions stay open until ``waku_envelopes_received_total`` has
        grown by every posted envelope since :meth:`start` (the counter spans the mesh's life, and the tests
        share one mesh), polled for at most ``drain_s`` seconds. An actor's failure is raised here.
        """
        self._stop.set()
        await asyncio.gather(*self._tasks[self.plan.publishers :])
        while len(self._posting_done) < self.plan.publishers:
            await self.run_for(0.2)
        deadline = time.monotonic() + drain_s
        while await asyncio.to_thread(self._received) - self._received_before < len(self.posted):
            assert time.monotonic() < deadline, (
                f"edge peer did not read {len(self.posted)} envelopes in {drain_s} s"
            )
            await asyncio.sleep(0.5)  # polling another process's counter, bounded above
        self._release.set()
        await asyncio.gather(*self._tasks)

    def _received(self) -> float:
        """The edge peer's count of envelopes read from its peers (the mesh's whole life)."""
        return self.edge.metric("waku_envelopes_received_total")

    async def run_for(self, seconds: float) -> None:
        """Let the load run ``seconds`` longer (failing early if an actor died)."""
        done, _ = await asyncio.wait(self._tasks, timeout=seconds, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()

    def _ticks(self, period: float) -> Iterator[float]:
        """Deadlines every ``period`` seconds from now (a slow call skips the ticks it overran)."""
        t = time.monotonic()
        while True:
            t = max(t + period, time.monotonic())
            yield t

    async def _pace(self, deadline: float) -> bool:
        """Wait until ``deadline`` unless the load is stopped first; True to go on."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), max(0.0, deadline - time.monotonic()))
        return not self._stop.is_set()

    async def _publisher(self, k: int) -> None:
        sealer = Sealer(1_000 + k)
        period = self.plan.packet * self.plan.publishers / self.plan.rate
        async with WakuClient(config=WAKU1, server_config=CLIENT_SERVER) as client:
            pubkey = (await client.connect(self.enode, timeout=30)).pubkey
            for deadline in self._ticks(period):
                if not await self._pace(deadline):
                    break
                envelopes = sealer.make(self.plan.packet)
                at = self.now()
                await client.post(pubkey, envelopes)
                self.posts.append(Timed(at, self.now() - at, "ok", len(envelopes)))
                self.posted.extend(e.hash for e in envelopes)
            self._posting_done.add(k)
            await self._release.wait()  # keep the session open until the edge peer read everything

    async def _prober(self) -> None:
        sealer = Sealer(2_000)
        async with grpc.aio.insecure_channel(self.ingest_addr) as channel:
            stub = ingest_pb2_grpc.IngestServiceStub(channel)
            for n, deadline in enumerate(self._ticks(1.0)):
                if not await self._pace(deadline):
                    return
                envelopes = sealer.make(self.plan.probe_batch)
                stamp = timestamp_pb2.Timestamp()
                stamp.GetCurrentTime()
                batch = ingest_pb2.IngestBatch(
                    batch_id=n, envelopes=[e.raw for e in envelopes], received_at=stamp
                )
                at = self.now()
                try:
                    reply = await stub.IngestBatch(ingest_pb2.IngestBatchRequest(batch=batch), timeout=120)
                except grpc.aio.AioRpcError as err:
                    self.probes.append(Timed(at, self.now() - at, err.code().name))
                    continue
                ack = reply.ack
                ok = not ack.rejections and ack.accepted + ack.duplicates == len(envelopes)
                self.probes.append(Timed(at, self.now() - at, "ok" if ok else "rejected", len(envelopes)))
                if ok:
                    self.acked.extend(e.hash for e in envelopes)

    async def _pager(self) -> None:
        async with WakuClient(config=WAKU1, server_config=CLIENT_SERVER) as client:
            pubkey = (await client.connect(self.enode, timeout=30)).pubkey
            for deadline in self._ticks(1.0):
                if not await self._pace(deadline):
                    return
                upper = int(time.time())
                request = HistoryRequest(upper - 120, upper, None, TOPICS[:2], 50)
                page = client.request_history(
                    pubkey, request, Dialect.STATUS_PLAIN, password=PASSWORD, timeout=120
                )
                at = self.now()
                try:
                    got = [e async for e in page]
                except Exception as err:  # RequestFailed (an ERROR= 0x7d) or RequestTimeout: recorded
                    self.pages.append(Timed(at, self.now() - at, type(err).__name__))
                    continue
                self.pages.append(Timed(at, self.now() - at, "ok", len(got)))

    async def _sampler(self) -> None:
        for deadline in self._ticks(1.0):
            if not await self._pace(deadline):
                return
            scraped = await asyncio.to_thread(self.edge.metrics)
            values = {name: sum(v for (n, _), v in scraped.items() if n == name) for name in EDGE_COUNTERS}
            self.samples.append(Sample(self.now(), values))


# ---------------------------------------------------------------------------------------------- reading
def between(records: Sequence[Timed], lo: float, hi: float) -> list[Timed]:
    """Records that began in ``[lo, hi)``."""
    return [r for r in records if lo <= r.at < hi]


def longest_gap(samples: Sequence[Sample], name: str, lo: float, hi: float) -> float:
    """Longest stretch within ``[lo, hi)`` during which counter ``name`` did not move (seconds)."""
    inside = [s for s in samples if lo <= s.at < hi]
    gap, since, last = 0.0, lo, None
    for s in inside:
        value = s.values[name]
        if last is not None and value > last:
            since = s.at
        gap = max(gap, s.at - since)
        last = value
    return gap


def first(records: Sequence[Timed], after: float, test: Callable[[Timed], bool]) -> Timed | None:
    """The first record beginning at or after ``after`` that passes ``test``."""
    return next((r for r in records if r.at >= after and test(r)), None)


def summary(records: Sequence[Timed]) -> dict[str, Any]:
    """Counts by outcome, and the slowest call, of ``records``."""
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
    return {
        "calls": len(records),
        "outcomes": outcomes,
        "max_s": round(max((r.seconds for r in records), default=0), 2),
    }


def answer_gap(records: Sequence[Timed], lo: float, hi: float) -> float:
    """Longest stretch within ``[lo, hi)`` with no successful call ending in it (seconds)."""
    ends = sorted(r.at + r.seconds for r in records if r.outcome == "ok" and lo <= r.at + r.seconds < hi)
    marks = [lo, *ends, hi]
    return max(b - a for a, b in itertools.pairwise(marks))
