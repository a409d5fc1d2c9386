"""The edge peer over RLPx (issue 4): relay → archive rate, 1,000-envelope pages, a requester following
cursors, and the edge peer's memory under a request flood.

Setup, as deployed: ``python -m services.archive`` (SQLite in a fresh file under ``.cache/bench/work``),
``python -m services.ingest``, ``python -m services.history`` and ``python -m services.edge_peer``, each its
own process on loopback ports with its default settings (only addresses, ports and the node key file are
set; the soak's edge peer also gets a per-peer request rate limit). This process plays the Waku peers with
``wakunode.WakuClient`` — real RLPx sessions (EIP-8 handshake, encrypted frames, snappy) negotiating
``waku/1`` only, as a current status-go node does.

1. **relay + archive** — one publisher peer sends ``BENCH_EDGE_RELAY`` (30,000) sealed 1 KiB envelopes
   (status-go's minimum PoW 0.000002, mined before timing) in Messages packets of 200, each written as soon as
   the previous one drained (TCP back-pressure from the edge peer is the only pacing). Rate = envelopes ÷
   wall time from the first send until the archive holds every one of them: a polling loop asks the archive
   (``ContainsEnvelopes``) for the oldest hashes not yet seen, with a deadline. Afterwards every hash is
   looked up again and ``lost`` = sent − found; the exact archive count must agree.
2. **1,000-envelope page** — the archive is pre-filled through ``PutEnvelopes`` with ``BENCH_EDGE_ROWS``
   (20,000) 1 KiB envelopes on 8 topics over 6 hours; one requester peer sends ``BENCH_EDGE_PAGES`` (50)
   status-plain 0x7e requests back to back (4 of the 8 topics, a time window holding at least 1,000 matches,
   limit 1000) and times each from sending the 0x7e to the 0x7d that follows the last 0x7f batch. p50/p99;
   target < 1 s. Every page must deliver exactly 1,000 envelopes.
3. **cursor walk** — the same requester follows the cursors of one query over every pre-filled envelope
   (20 pages of 1,000) to the end; envelopes ÷ wall time of the walk (median of 3 walks); target ≥ 5,000/s.
   The walk must return each pre-filled envelope exactly once.
4. **memory under a request flood** — a fresh edge peer with ``EDGE_REQUEST_RATE_LIMIT_SECONDS=1``
   (``BENCH_EDGE_SOAK_RATE_LIMIT_S``); ``BENCH_EDGE_HOSTILE`` (8) hostile peers (untrusting, so they discard
   what they are sent) each send a valid 1,000-envelope request once per rate-limit period, plus invalid and
   undecodable 0x7e, junk Messages payloads and an unknown message code every period, and every 10th period
   an oversized packet (disconnected with 0x10) after which they come back with a new identity — for
   ``BENCH_EDGE_SOAK_S`` (60) seconds. Meanwhile a well-behaved requester asks for a 1,000-envelope page once
   per period (as the rate limit allows) and its latencies are recorded, and the edge peer's VmRSS is sampled
   every second. No target: RSS at start, max, end and after the flood, and the requester's p50 are reported.

CPU per envelope / page per process comes from ``/proc`` (:class:`bench.support.CpuMeter`); ``other`` is the
rest of the machine. The requester's side of a page (frame decryption, an envelope hash per envelope, as a
real client does) runs in this process and is on the critical path of figures 2 and 3.
``BENCH_PROFILE=edge,history`` runs those services under cProfile (``archive``, ``ingest`` too).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import statistics
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import grpc.aio

from bench.harness import Result, config
from bench.support import (
    WORK,
    CpuMeter,
    EdgeService,
    Sample,
    Service,
    archive_env,
    env_int,
    ingest_samples,
    make_sample,
    profile_path,
    profile_summary,
    rss_kib,
    running,
    start_archive,
    start_edge,
    start_history,
    start_ingest,
    summarize_ms,
)
from devp2p.config import ServerConfig, SessionConfig
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from wakucodec import rlp
from wakucodec.constants import STATUS_MIN_POW
from wakucodec.envelope import Envelope, decode_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requests import encode_p2p_request
from wakunode.client import CLIENT_CONFIG, WakuClient
from wakunode.constants import MESSAGES_CODE, P2P_REQUEST_CODE
from wakunode.errors import RequestFailed, RequestTimeout

#: Full-run sizes; ``BENCH_EDGE_<NAME>`` overrides each (``--quick`` uses QUICK and ignores overrides).
FULL = {"relay": 30_000, "rows": 20_000, "pages": 50, "walks": 3, "soak_s": 60, "hostile": 8}
QUICK = {"relay": 2_000, "rows": 4_000, "pages": 10, "walks": 1, "soak_s": 8, "hostile": 3}
PAGE_TARGET_MS = 1000.0
WALK_TARGET = 5000.0
LIMIT = 1000
#: Envelopes per Messages packet from the publisher (the mailmesh CLI's batch; ~220 KB of 1 KiB envelopes).
PACKET = 200
DATA_SIZE = 1024
#: The pre-filled history: 8 topics (several chats), uniform over 6 hours ending 10 minutes ago.
PAGE_TOPICS = tuple(bytes.fromhex(f"ed9e00{k:02x}") for k in range(8))
TOPICS_PER_REQUEST = 4
HISTORY_SPAN_S = 6 * 3600
HISTORY_TTL = 7 * 86_400
PUT_BATCH = 500
WARMUP_PAGES = 5
PAGE_TIMEOUT_S = 30.0
DIALECT = Dialect.STATUS_PLAIN
#: Archive polling while waiting for the relayed envelopes: ask for the oldest not-yet-seen hashes.
POLL_S = 0.05
PROBE_SMALL = 64
PROBE_LARGE = 1000
#: Soak: one oversized packet per hostile peer every this many periods (staggered), then a new identity.
OVERSIZE_EVERY = 10
#: The well-behaved requester waits this much beyond the rate-limit period between its requests.
PACE_MARGIN_S = 0.1
GRPC_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]
#: Peers offer waku/1 only (a current status-go node), so every session is waku/1.
WAKU1_CLIENT = replace(CLIENT_CONFIG, capabilities=("waku/1",))
CLIENT_SERVER = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=5.0))


def _sizes() -> dict[str, int]:
    if config().quick:
        return dict(QUICK)
    return {name: env_int(f"BENCH_EDGE_{name.upper()}", default) for name, default in FULL.items()}


def _soak_period() -> float:
    raw = os.environ.get("BENCH_EDGE_SOAK_RATE_LIMIT_S", "").strip()
    return float(raw) if raw else 1.0


def _mib(kib: float) -> float:
    return round(kib / 1024, 1)


# ------------------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class PageData:
    """The pre-filled history: ``rows`` 1 KiB envelopes on :data:`PAGE_TOPICS`, sent over 6 hours."""

    samples: list[Sample]
    start: int
    end: int

    @classmethod
    def generate(cls, rows: int, now: int, seed: int = 4) -> PageData:
        rng = random.Random(seed)
        blob = rng.randbytes(1 << 20)
        start = now - 600 - HISTORY_SPAN_S
        samples = []
        for i in range(rows):
            offset = rng.randrange(len(blob) - DATA_SIZE)
            data = (seed << 40 | i).to_bytes(8, "big") + blob[offset : offset + DATA_SIZE - 8]
            sent = start + i * HISTORY_SPAN_S // rows
            samples.append(make_sample(sent, HISTORY_TTL, PAGE_TOPICS[i % len(PAGE_TOPICS)], data, i))
        return cls(samples, start, start + HISTORY_SPAN_S)

    def page_request(self, rng: random.Random, upper: int) -> HistoryRequest:
        """4 of the 8 topics, ``lower`` placed so that at least 1.5 pages match (a full page every time)."""
        topics = tuple(rng.sample(PAGE_TOPICS, TOPICS_PER_REQUEST))
        matching = len(self.samples) * TOPICS_PER_REQUEST // len(PAGE_TOPICS)
        room = max(0.0, 1 - 1.5 * LIMIT / max(matching, 1))
        lower = self.start + int(rng.random() * room * HISTORY_SPAN_S)
        return HistoryRequest(lower, upper, None, topics, LIMIT)


def _put_item(s: Sample) -> archive_pb2.PutItem:
    return archive_pb2.PutItem(rlp=s.raw, hash=s.hash, message_hash=s.message_hash)


async def _prefill(stub: Any, data: PageData) -> float:
    """Put the history into the archive directly (PutEnvelopes, 500 per call); returns the seconds taken."""
    began = time.perf_counter()
    for i in range(0, len(data.samples), PUT_BATCH):
        chunk = data.samples[i : i + PUT_BATCH]
        reply = await stub.PutEnvelopes(
            archive_pb2.PutEnvelopesRequest(items=[_put_item(s) for s in chunk]), timeout=120
        )
        if reply.inserted != len(chunk):
            raise RuntimeError(
                f"pre-fill: {len(chunk) - reply.inserted} of {len(chunk)} envelopes not inserted"
            )
    return time.perf_counter() - began


async def _present(stub: Any, hashes: Sequence[bytes]) -> int:
    """How many of ``hashes`` the archive holds (ContainsEnvelopes, 1000 per call)."""
    found = 0
    for i in range(0, len(hashes), 1000):
        reply = await stub.ContainsEnvelopes(
            archive_pb2.ContainsEnvelopesRequest(envelope_hashes=hashes[i : i + 1000]), timeout=120
        )
        found += len(reply.present_envelope_hashes)
    return found


async def _exact_count(stub: Any) -> int:
    reply = await stub.Stats(archive_pb2.StatsRequest(exact=True), timeout=300)
    return int(reply.envelope_count)


def _edge_counters(edge: EdgeService, prefixes: Sequence[str]) -> dict[str, float]:
    """The edge peer's counters whose names start with one of ``prefixes`` (histograms left out)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for (name, labels), value in edge.metrics().items():
            if not name.startswith(tuple(prefixes)) or name.endswith(("_bucket", "_created", "_sum")):
                continue
            key = name + ("{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else "")
            out[key] = value
    return out


async def _connect(client: WakuClient, enode: str, *, trust: bool = True) -> bytes:
    """Dial ``enode`` and check the session is waku/1; returns the remote's public key."""
    info = await client.connect(enode, timeout=15, trust=trust)
    if info.capability != "waku/1":
        raise RuntimeError(f"negotiated {info.capability}, expected waku/1")
    return info.pubkey


# ------------------------------------------------------------------------------------------------ 1. relay


async def _await_archived(
    stub: Any, hashes: Sequence[bytes], began: float, progress: list[tuple[float, int]], deadline: list[float]
) -> float:
    """Poll the archive until it holds every hash (or ``deadline[0]`` passes); return when that was seen.

    Probes the oldest hashes not yet seen: a few while it is behind, 1000 at a time while it is catching up,
    so the polling itself costs the archive little. ``deadline`` is a one-element list the sender moves once
    the last packet is written.
    """
    remaining = deque(hashes)
    found = 0
    probe = PROBE_SMALL
    while remaining:
        chunk = [remaining.popleft() for _ in range(min(probe, len(remaining)))]
        reply = await stub.ContainsEnvelopes(
            archive_pb2.ContainsEnvelopesRequest(envelope_hashes=chunk), timeout=60
        )
        present = set(reply.present_envelope_hashes)
        missing = [h for h in chunk if h not in present]
        remaining.extendleft(reversed(missing))
        found += len(chunk) - len(missing)
        now = time.perf_counter()
        if len(chunk) > len(missing):
            progress.append((now - began, found))
        if missing:
            if now > deadline[0]:
                break
            probe = PROBE_SMALL
            await asyncio.sleep(POLL_S)  # polling interval of a bounded wait, not synchronisation
        else:
            probe = PROBE_LARGE
    return (progress[-1][0] if progress else time.perf_counter() - began) + began


def _per_second(progress: list[tuple[float, int]]) -> list[int]:
    """Envelopes newly archived in each whole second since the first send."""
    if not progress:
        return []
    counts = [0] * (int(progress[-1][0]) + 1)
    last = 0
    for at, found in progress:
        counts[int(at)] += found - last
        last = found
    return counts


async def _relay(
    edge: EdgeService, archive_stub: Any, samples: Sequence[Sample], pids: dict[str, int]
) -> list[Result]:
    envelopes: list[Envelope] = [decode_envelope(s.raw) for s in samples]
    hashes = [s.hash for s in samples]
    progress: list[tuple[float, int]] = []
    deadline = [float("inf")]
    async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
        pubkey = await _connect(client, edge.enode)
        with CpuMeter(pids) as meter:
            began = time.perf_counter()
            poller = asyncio.create_task(_await_archived(archive_stub, hashes, began, progress, deadline))
            try:
                for i in range(0, len(envelopes), PACKET):
                    await client.post(pubkey, envelopes[i : i + PACKET])
                posted_s = time.perf_counter() - began
                deadline[0] = time.perf_counter() + max(120.0, len(samples) / 100)
                done_at = await poller
            finally:
                poller.cancel()
    elapsed = done_at - began
    present = await _present(archive_stub, hashes)
    count = await _exact_count(archive_stub)
    lost = len(samples) - present
    counters = _edge_counters(
        edge,
        (
            "waku_envelopes_received",
            "waku_envelopes_validated",
            "waku_envelopes_rejected",
            "edge_ingest_dropped",
            "edge_ingest_backpressure",
            "edge_ingest_envelopes_acked",
            "edge_ingest_batches",
            "edge_ingest_stream_failures",
            "waku_sink_failures",
        ),
    )
    detail = {
        "envelopes": len(samples),
        "data_bytes": DATA_SIZE,
        "envelopes_per_packet": PACKET,
        "pow": STATUS_MIN_POW,
        "present_after": present,
        "archive_count_exact": count,
        "last_packet_written_s": round(posted_s, 2),
        "write_rate": round(len(samples) / max(posted_s, 1e-9), 1),
        "archived_s": round(elapsed, 2),
        "archived_per_second": _per_second(progress),
        "edge_counters": counters,
        "cpu": meter.report(len(samples), "envelope"),
    }
    return [
        Result(
            "relay + archive through one edge peer: RLPx waku/1 → ingest → archive (SQLite), 1 KiB",
            round((present if lost else len(samples)) / max(elapsed, 1e-9), 1),
            "envelopes/s",
            detail=detail,
        ),
        Result(
            "envelopes lost in that run (sent over RLPx − found in archive)",
            float(lost),
            "envelopes",
            detail={"envelopes": len(samples), "present_after": present, "archive_count_exact": count},
            target=0.0,
            lower_is_better=True,
        ),
    ]


# ------------------------------------------------------------------------------------------------ 2./3. pages


@dataclass
class PageTiming:
    total_s: float
    first_s: float
    delivered: int
    cursor: bytes


async def _timed_page(client: WakuClient, pubkey: bytes, request: HistoryRequest) -> PageTiming:
    """One 0x7e → every 0x7f → 0x7d, timed from sending the request to the completion."""
    page = client.request_history(pubkey, request, DIALECT, timeout=PAGE_TIMEOUT_S)
    delivered = 0
    first = 0.0
    began = time.perf_counter()
    async for _ in page:
        if not delivered:
            first = time.perf_counter() - began
        delivered += 1
    total = time.perf_counter() - began
    assert page.completion is not None
    return PageTiming(total, first, delivered, page.completion.cursor)


async def _pages(
    edge: EdgeService, data: PageData, pages: int, walks: int, pids: dict[str, int]
) -> list[Result]:
    upper = int(time.time())
    rng = random.Random(7)
    expected = {s.hash for s in data.samples}
    async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
        pubkey = await _connect(client, edge.enode)
        for _ in range(WARMUP_PAGES):
            await _timed_page(client, pubkey, data.page_request(rng, upper))
        timings: list[PageTiming] = []
        with CpuMeter(pids) as page_meter:
            for _ in range(pages):
                timings.append(await _timed_page(client, pubkey, data.page_request(rng, upper)))
        short = [t.delivered for t in timings if t.delivered != LIMIT]
        if short:
            raise RuntimeError(f"{len(short)} pages were not full: {short[:5]}")

        walk_request = HistoryRequest(data.start, upper, None, PAGE_TOPICS, LIMIT)
        walk_rates: list[float] = []
        walk_detail: list[dict[str, Any]] = []
        with CpuMeter(pids) as walk_meter:
            for _ in range(walks):
                walk = client.follow_cursor(pubkey, walk_request, DIALECT, timeout=PAGE_TIMEOUT_S)
                got: list[bytes] = []
                began = time.perf_counter()
                async for env in walk:
                    got.append(env.hash)
                walk_s = time.perf_counter() - began
                if len(got) != len(expected) or set(got) != expected:
                    raise RuntimeError(
                        f"cursor walk returned {len(got)} envelopes ({len(set(got) & expected)} of the "
                        f"{len(expected)} expected)"
                    )
                walk_rates.append(len(got) / walk_s)
                walk_detail.append(
                    {"pages": len(walk.pages), "envelopes": len(got), "seconds": round(walk_s, 3)}
                )
    total = [t.total_s for t in timings]
    page_detail: dict[str, Any] = {
        "requests": pages,
        "warm_up": WARMUP_PAGES,
        "dialect": DIALECT.value,
        "limit": LIMIT,
        "topics_per_request": f"{TOPICS_PER_REQUEST} of {len(PAGE_TOPICS)}",
        "archive_rows": len(data.samples),
        "page_bytes_approx": LIMIT * (DATA_SIZE + 30),
        "complete": summarize_ms(total),
        "first_batch": summarize_ms([t.first_s for t in timings]),
        "cpu": page_meter.report(pages, "page"),
    }
    walked = sum(w["envelopes"] for w in walk_detail)
    walk_summary = {
        "walks": walk_detail,
        "rates": [round(r, 1) for r in walk_rates],
        "dialect": DIALECT.value,
        "limit": LIMIT,
        "cpu": walk_meter.report(walked, "envelope"),
    }
    return [
        Result(
            "1,000-envelope page over RLPx p50 (0x7e sent → 0x7d after every 0x7f, 1 KiB)",
            page_detail["complete"]["p50_ms"],
            "ms",
            detail=page_detail,
            target=PAGE_TARGET_MS,
            lower_is_better=True,
        ),
        Result(
            "1,000-envelope page over RLPx p99",
            page_detail["complete"]["p99_ms"],
            "ms",
            detail={"complete": page_detail["complete"]},
            target=PAGE_TARGET_MS,
            lower_is_better=True,
        ),
        Result(
            f"envelopes/s to one requester following cursors ({len(expected):,} envelopes, pages of 1,000)",
            round(statistics.median(walk_rates), 1),
            "envelopes/s",
            detail=walk_summary,
            target=WALK_TARGET,
        ),
    ]


# ------------------------------------------------------------------------------------------------ 4. flood


@dataclass
class FloodTally:
    cycles: int = 0
    valid_requests: int = 0
    junk_packets: int = 0
    oversized: int = 0
    sessions: int = 0
    session_ends: Counter[str] = field(default_factory=Counter)
    cancelled: int = 0


async def _hostile(k: int, enode: str, data: PageData, period: float, end: float, tally: FloodTally) -> None:
    """One hostile peer: a heavy request per period plus junk; now and then oversized, then a new key."""
    rng = random.Random(100 + k)
    oversized = rlp.encode([os.urandom(1 << 20)])  # over EDGE_MAX_MESSAGE_SIZE (1 MiB): disconnect 0x10
    cycle = k  # staggers the oversized packets
    while time.monotonic() < end:
        try:
            async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
                # Untrusting: the 0x7f/0x7d it provokes are dropped unread (a flooder does not care).
                pubkey = await _connect(client, enode, trust=False)
                tally.sessions += 1
                cycle = await _hostile_session(
                    client, pubkey, data, period, end, tally, rng, cycle, oversized
                )
        except Exception as err:  # a dropped session or a write that timed out: come back
            tally.session_ends[type(err).__name__] += 1
            await asyncio.sleep(0.1)  # reconnect pacing, not synchronisation


async def _hostile_session(
    client: WakuClient,
    pubkey: bytes,
    data: PageData,
    period: float,
    end: float,
    tally: FloodTally,
    rng: random.Random,
    cycle: int,
    oversized: bytes,
) -> int:
    """Flood one session until ``end`` or until its oversized packet got it disconnected."""
    upper = int(time.time())
    bad_envelope = rlp.encode([[1, 2, b"abc", b"data", 0]])  # a 3-byte topic
    while time.monotonic() < end:
        started = time.monotonic()
        cycle += 1
        tally.cycles += 1
        heavy = encode_p2p_request(data.page_request(rng, upper), DIALECT).payload
        await client.node.send_packet(pubkey, P2P_REQUEST_CODE, heavy)
        tally.valid_requests += 1
        junk = [
            (P2P_REQUEST_CODE, encode_p2p_request(HistoryRequest(200, 100), DIALECT).payload),  # ERROR=
            (P2P_REQUEST_CODE, os.urandom(120)),  # undecodable: no answer
            (MESSAGES_CODE, os.urandom(200)),
            (MESSAGES_CODE, bad_envelope),
            (50, b"\xc0"),  # unknown code
        ]
        for code, payload in junk:
            await client.node.send_packet(pubkey, code, payload)
            tally.junk_packets += 1
        if cycle % OVERSIZE_EVERY == 0:
            peer = client.server.get_peer(pubkey)
            await client.node.send_packet(pubkey, MESSAGES_CODE, oversized)
            tally.oversized += 1
            if peer is not None:
                closed = await asyncio.wait_for(peer.wait_closed(), 30)
                tally.session_ends[f"disconnected 0x{closed.reason:02x}"] += 1
            return cycle  # come back as a new peer
        delay = started + period - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing at the rate limit, not synchronisation
    return cycle


async def _good_requester(
    enode: str, data: PageData, period: float, end: float, rng: random.Random
) -> dict[str, Any]:
    """A well-behaved requester during the flood: one 1,000-envelope page per rate-limit period.

    Failures are recorded, not raised (a dropped session is re-established): the point is to see them.
    """
    upper = int(time.time())
    began = time.monotonic()
    latencies: list[float] = []
    served_at: list[float] = [began]
    failures: Counter[str] = Counter()
    while time.monotonic() < end:
        try:
            async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
                pubkey = await _connect(client, enode)
                while time.monotonic() < end:
                    started = time.monotonic()
                    try:
                        timing = await _timed_page(client, pubkey, data.page_request(rng, upper))
                        if timing.delivered != LIMIT:
                            failures[f"short page ({timing.delivered})"] += 1
                        latencies.append(timing.total_s)
                        served_at.append(time.monotonic())
                    except RequestFailed as err:
                        failures[f"ERROR={err.text}"] += 1
                    except RequestTimeout:
                        failures["timeout"] += 1
                    delay = started + period + PACE_MARGIN_S - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)  # the server's rate limit, not synchronisation
        except Exception as err:
            failures[f"session: {type(err).__name__}"] += 1
            await asyncio.sleep(0.1)  # reconnect pacing
    served_at.append(max(end, served_at[-1]))
    gaps = [b - a for a, b in itertools.pairwise(served_at)]
    return {"latencies": latencies, "failures": dict(failures), "longest_gap_s": round(max(gaps), 2)}


async def _one_page(enode: str, data: PageData, rng: random.Random) -> None:
    async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
        pubkey = await _connect(client, enode)
        timing = await _timed_page(client, pubkey, data.page_request(rng, int(time.time())))
    if timing.delivered != LIMIT:
        raise RuntimeError(f"warm-up page delivered {timing.delivered}")


async def _sample_rss(pid: int, stop: asyncio.Event, samples: list[tuple[float, int]], began: float) -> None:
    while not stop.is_set():
        samples.append((round(time.perf_counter() - began, 1), rss_kib(pid)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)  # one sample a second until told to stop


async def _flood(
    ingest: Service, history: Service, data: PageData, soak_s: int, hostile: int, pids: dict[str, int]
) -> list[Result]:
    period = _soak_period()
    env = {"EDGE_REQUEST_RATE_LIMIT_SECONDS": f"{period:g}"}
    edge = await start_edge(
        ingest, history, env, name="edge-soak", profile=profile_path("edge", "soak", "edge")
    )
    rss: list[tuple[float, int]] = []
    stop = asyncio.Event()
    tally = FloodTally()
    tasks: list[asyncio.Task[None]] = []
    try:
        fresh_kib = rss_kib(edge.pid)
        rng = random.Random(11)
        await _one_page(edge.enode, data, rng)  # warm-up: its channels to history and archive are up
        began = time.perf_counter()
        start_kib = rss_kib(edge.pid)
        tasks.append(asyncio.create_task(_sample_rss(edge.pid, stop, rss, began)))
        with CpuMeter({**pids, "edge-peer": edge.pid}) as meter:
            end = time.monotonic() + soak_s
            flooders = [
                asyncio.create_task(_hostile(k, edge.enode, data, period, end, tally)) for k in range(hostile)
            ]
            tasks += flooders
            good = await _good_requester(edge.enode, data, period, end, rng)
            end_kib = rss_kib(edge.pid)
            flood_s = time.perf_counter() - began
            # A flooder blocked in a write (back-pressure) gives up within devp2p's write timeout (20 s).
            _, late = await asyncio.wait(flooders, timeout=30)
            tally.cancelled = len(late)
        await asyncio.sleep(3)  # measurement interval: does the RSS fall back once the flooders are gone?
        after_kib = rss_kib(edge.pid)
        counters = _edge_counters(
            edge,
            (
                "mailserver_delivery",
                "mailserver_envelopes_total",
                "waku_peer_disconnects",
                "waku_envelopes_rejected",
                "waku_ignored_packets",
                "edge_history_requests",
                "devp2p_disconnects_sent",
                "devp2p_sessions_total",
            ),
        )
        alive = edge.service.returncode is None
    finally:
        stop.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await edge.stop()
    during = [kib for at, kib in rss if at <= flood_s]
    max_kib = max([start_kib, end_kib, *during])
    latencies = good["latencies"]
    good_detail: dict[str, Any] = {
        "pages": len(latencies),
        "failures": good["failures"],
        "longest_gap_without_a_page_s": good["longest_gap_s"],
        "complete": summarize_ms(latencies),
        "pace_s": period + PACE_MARGIN_S,
    }
    detail: dict[str, Any] = {
        "soak_s": soak_s,
        "hostile_peers": hostile,
        "request_rate_limit_s": period,
        "rss_mib": {
            "fresh_process": _mib(fresh_kib),
            "start": _mib(start_kib),
            "max": _mib(max_kib),
            "end": _mib(end_kib),
            "after_flood_3s": _mib(after_kib),
            "growth_start_to_end": _mib(end_kib - start_kib),
        },
        "rss_samples_mib": [(at, _mib(kib)) for at, kib in rss],
        "flood": {
            "cycles": tally.cycles,
            "valid_heavy_requests_sent": tally.valid_requests,
            "junk_packets_sent": tally.junk_packets,
            "oversized_packets_sent": tally.oversized,
            "sessions": tally.sessions,
            "session_ends": dict(tally.session_ends),
            "flooders_cancelled_at_end": tally.cancelled,
        },
        "edge_alive_after": alive,
        "edge_counters": counters,
        "good_requester": good_detail,
        "cpu": meter.report(),
    }
    label = f"request flood ({hostile} hostile peers + junk, {soak_s} s, rate limit {period:g} s)"
    return [
        Result(f"edge peer RSS max during a {label}", _mib(max_kib), "MiB", detail=detail),
        Result(
            "edge peer RSS growth over that flood (end − start)",
            _mib(end_kib - start_kib),
            "MiB",
            detail={"rss_mib": detail["rss_mib"]},
        ),
        Result(
            "well-behaved requester during that flood: 1,000-envelope page p50",
            good_detail["complete"].get("p50_ms", 0.0) if latencies else PAGE_TIMEOUT_S * 1000,
            "ms",
            detail=good_detail,
            lower_is_better=True,
        ),
    ]


# ------------------------------------------------------------------------------------------------ suite


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


async def _suite(sizes: dict[str, int], relay: Sequence[Sample], data: PageData) -> list[Result]:
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / "edge.sqlite3"
    _remove_sqlite(path)
    results: list[Result] = []
    profiles: list[Path | None] = []
    try:
        archive = await start_archive(
            archive_env("sqlite", sqlite_path=path), profile=profile_path("edge", "sqlite", "archive")
        )
        async with running(archive):
            ingest = await start_ingest(archive, profile=profile_path("edge", "sqlite", "ingest"))
            history = await start_history(archive, profile=profile_path("edge", "sqlite", "history"))
            profiles += [archive.profile, ingest.profile, history.profile]
            async with running(ingest, history):
                pids = {"bench client": os.getpid(), **{s.name: s.pid for s in (archive, ingest, history)}}
                async with grpc.aio.insecure_channel(archive.address, options=GRPC_OPTIONS) as channel:
                    stub = archive_pb2_grpc.ArchiveServiceStub(channel)
                    edge = await start_edge(ingest, history, profile=profile_path("edge", "sqlite", "edge"))
                    profiles.append(edge.service.profile)
                    try:
                        with_edge = {**pids, "edge-peer": edge.pid}
                        print(f"  relay: {len(relay)} envelopes over RLPx", flush=True)
                        results += await _relay(edge, stub, relay, with_edge)
                        prefill_s = await _prefill(stub, data)
                        print(
                            f"  pre-filled {len(data.samples)} envelopes in {prefill_s:.1f} s; "
                            f"{sizes['pages']} pages, {sizes['walks']} cursor walks",
                            flush=True,
                        )
                        results += await _pages(edge, data, sizes["pages"], sizes["walks"], with_edge)
                    finally:
                        await edge.stop()
                    print(f"  flood: {sizes['hostile']} hostile peers for {sizes['soak_s']} s", flush=True)
                    results += await _flood(ingest, history, data, sizes["soak_s"], sizes["hostile"], pids)
    finally:
        _remove_sqlite(path)
    profiles.append(profile_path("edge", "soak", "edge"))
    for profile in profiles:
        if profile is not None and profile.exists():
            print(profile_summary(profile, 25)[:8000], flush=True)
    return results


def run() -> list[Result]:
    """Run the edge suite (SQLite archive)."""
    sizes = _sizes()
    began = time.perf_counter()
    now = int(time.time())
    relay = ingest_samples(sizes["relay"], now=now, data_size=DATA_SIZE, seed=5)
    data = PageData.generate(sizes["rows"], now)
    print(
        f"  generated {len(relay)} sealed + {len(data.samples)} history envelopes in "
        f"{time.perf_counter() - began:.0f} s",
        flush=True,
    )
    return asyncio.run(_suite(sizes, relay, data))
