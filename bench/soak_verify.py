"""After the soak's load: the ledger against the archive, by hash, and exact history walks.

1. **Drain**: the archive is asked (``ContainsEnvelopes``, 1,000 hashes a call) for every acknowledged
   envelope not seen yet, once a second, until it holds all of them, or the edge peer's ingest buffer is
   empty (nothing more is on its way), or :attr:`~bench.soak_settings.SoakSettings.drain_timeout_s`
   passes. ``lost`` = acknowledged − present: the soak's zero-loss criterion. How many posted but
   unacknowledged envelopes were archived anyway is reported.
2. **Nothing foreign**: the archive's exact count must equal the posted envelopes it holds (the hostile
   peers' envelopes are all invalid and must never be archived).
3. **Exact walks**: once the archive is complete, a client walks random 30 s windows of two topics over
   RLPx (0x7e, cursors, pages of ``history_limit``); each walk must return every acknowledged envelope of
   that filter, nothing that was not posted, each once, in ``(sent, hash)`` order.
"""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc.aio

from bench.soak_history import DIALECTS, PASSWORD, check_envelope
from bench.soak_settings import CLIENT_SERVER, LEDGER, WAKU1_CLIENT, SoakSettings, tag_of
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from wakucodec.historyrequest import HistoryRequest
from wakunode.client import WakuClient

__all__ = ["Ledger", "drain", "exact_walks", "present"]

FINAL_WINDOW_S = 30
POLL_S = 1.0


@dataclass
class Ledger:
    """Every posted envelope, from the publishers' ledger file."""

    acked: set[bytes] = field(default_factory=set)
    unacked: set[bytes] = field(default_factory=set)
    #: topic → sorted ``(sent, hash, acked)``.
    by_topic: dict[bytes, list[tuple[int, bytes, bool]]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Ledger:
        """Parse ``path`` (:data:`~bench.soak_settings.LEDGER` records)."""
        ledger = cls()
        by_topic: defaultdict[bytes, list[tuple[int, bytes, bool]]] = defaultdict(list)
        for digest, sent, topic, acked in LEDGER.iter_unpack(path.read_bytes()):
            (ledger.acked if acked else ledger.unacked).add(digest)
            by_topic[topic].append((sent, digest, bool(acked)))
        ledger.by_topic = {topic: sorted(rows) for topic, rows in by_topic.items()}
        return ledger

    @property
    def posted(self) -> int:
        """Envelopes posted (acknowledged or not)."""
        return len(self.acked) + len(self.unacked)

    def window(self, topics: Sequence[bytes], lower: int, upper: int) -> list[tuple[int, bytes, bool]]:
        """Posted envelopes on ``topics`` sent in ``[lower, upper]``, in ``(sent, hash)`` order."""
        rows: list[tuple[int, bytes, bool]] = []
        for topic in topics:
            entries = self.by_topic.get(topic, [])
            rows += entries[bisect.bisect_left(entries, (lower,)) : bisect.bisect_left(entries, (upper + 1,))]
        return sorted(rows)

    def sent_range(self) -> tuple[int, int]:
        """Oldest and newest sent time posted."""
        sents = [rows[0][0] for rows in self.by_topic.values()] + [r[-1][0] for r in self.by_topic.values()]
        return min(sents), max(sents)


async def present(stub: archive_pb2_grpc.ArchiveServiceAsyncStub, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of ``hashes`` the archive holds."""
    found: set[bytes] = set()
    for i in range(0, len(hashes), 1000):
        reply = await stub.ContainsEnvelopes(
            archive_pb2.ContainsEnvelopesRequest(envelope_hashes=hashes[i : i + 1000]), timeout=120
        )
        found.update(reply.present_envelope_hashes)
    return found


async def drain(
    address: str, ledger: Ledger, timeout_s: float, settled: Callable[[], Awaitable[bool]]
) -> dict[str, Any]:
    """Wait (bounded) until the archive holds every acknowledged envelope, or until nothing more can come
    (``settled()``: the edge peer's ingest buffer is empty, so ingest has acknowledged — made durable —
    everything it was given); then count what is there."""
    began = time.monotonic()
    async with grpc.aio.insecure_channel(address) as channel:
        stub: archive_pb2_grpc.ArchiveServiceAsyncStub = archive_pb2_grpc.ArchiveServiceStub(channel)
        missing = set(ledger.acked)
        while missing:
            done = await settled()  # asked before the look-up, so a True covers what the look-up sees
            missing -= await present(stub, sorted(missing))
            if not missing or done or time.monotonic() - began > timeout_s:
                break
            await asyncio.sleep(POLL_S)  # polling interval of a bounded wait, not synchronisation
        drained_s = time.monotonic() - began
        # Once drained, everything is looked up again from scratch: the figure does not rest on the loop.
        acked_present = len(await present(stub, sorted(ledger.acked)))
        unacked_present = len(await present(stub, sorted(ledger.unacked)))
        stats = await stub.Stats(archive_pb2.StatsRequest(exact=True), timeout=600)
    return {
        "drain_s": round(drained_s, 1),
        "posted": ledger.posted,
        "acked": len(ledger.acked),
        "acked_present": acked_present,
        "lost": len(ledger.acked) - acked_present,
        "unacked": len(ledger.unacked),
        "unacked_present": unacked_present,
        "archive_count_exact": int(stats.envelope_count),
        "foreign_in_archive": int(stats.envelope_count) - acked_present - unacked_present,
    }


async def exact_walks(settings: SoakSettings, enode: str, ledger: Ledger, walks: int) -> dict[str, Any]:
    """``walks`` complete cursor walks over random windows, each checked exactly against the ledger."""
    rng = random.Random(settings.run_id)
    topics = sorted(ledger.by_topic)
    oldest, newest = ledger.sent_range()
    tag = tag_of(settings.run_id)
    failures: list[str] = []
    checked = pages = 0
    async with WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER) as client:
        pubkey = (await client.connect(enode, timeout=60)).pubkey
        for i in range(walks):
            lower = rng.randint(oldest, max(oldest, newest - FINAL_WINDOW_S))
            request = HistoryRequest(
                lower,
                lower + FINAL_WINDOW_S - 1,
                None,
                tuple(rng.sample(topics, min(settings.history_topics, len(topics)))),
                settings.history_limit,
            )
            walk = client.follow_cursor(
                pubkey, request, DIALECTS[i % len(DIALECTS)], password=PASSWORD, timeout=120
            )
            got: list[bytes] = []
            previous: tuple[int, bytes] | None = None
            async for env in walk:
                fault = check_envelope(env, tag, request, previous)
                if fault is not None:
                    failures.append(f"walk {i}: {fault}")
                previous = (env.sent, env.hash)
                got.append(env.hash)
            expected = ledger.window(request.topics, request.lower, request.upper)
            must = {h for _, h, acked in expected if acked}
            may = {h for _, h, _ in expected}
            if not must <= set(got):
                failures.append(f"walk {i}: {len(must - set(got))} acknowledged envelopes missing")
            if not set(got) <= may:
                failures.append(f"walk {i}: {len(set(got) - may)} envelopes nobody posted")
            checked += len(got)
            pages += len(walk.pages)
    return {"walks": walks, "pages": pages, "envelopes": checked, "failures": failures}
