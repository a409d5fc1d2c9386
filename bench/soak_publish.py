"""Soak role ``publish``: good peers posting envelopes to the edge peer on a fixed schedule, with a ledger.

Each publisher is a :class:`~wakunode.client.WakuClient` with its own RLPx session (waku/1). A packet of
:attr:`~bench.soak_settings.SoakSettings.packet` freshly sealed envelopes is due every
:attr:`~bench.soak_settings.SoakSettings.packet_interval_s`; a publisher that falls behind sends the late
packets at once (so the achieved rate says what the mesh sustained). The edge peer runs with
``EDGE_CONFIRMATIONS=true`` and answers every Messages packet with a Message Response and a Batch Ack
(WAKU-1 "Batch Ack" / "Message Response"; status-go ``waku/v1/peer.go`` ``sendConfirmation``).

**Acknowledged** (the soak's loss criterion, docs/soak.md): an envelope is acknowledged when the
confirmation naming its packet's batch hash (keccak256 of the Messages payload) arrived *before the envelope
expired* and the Message Response lists no error for that envelope's hash. That is when status-go's sender
reports a message sent (its ``EnvelopesMonitor`` marks the batch's envelopes ``EnvelopeSent`` on the batch
acknowledgement, and reports an envelope that reached its expiry unconfirmed as expired): a node silently
drops an envelope that is already expired when it arrives (status-go ``Waku.add``), and its confirmation
then covers nothing. The ledger (``ledger.bin``, :data:`~bench.soak_settings.
LEDGER` records) holds every posted envelope — hash, sent time, topic, acknowledged or not — written when its
packet is resolved, so this process's memory does not grow with the run. Errors of a good client: a
confirmation that never came (:attr:`~bench.soak_settings.SoakSettings.ack_timeout_s`) or came after the
envelope expired, an error listed for one of our envelopes, a failed write or a lost session.
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.soak_settings import CLIENT_SERVER, LEDGER, WAKU1_CLIENT, SoakSettings, soak_topics, tag_of
from bench.support import summarize_ms
from wakucodec.constants import STATUS_MIN_POW
from wakucodec.envelope import Envelope, encode_envelopes
from wakucodec.pow import seal
from wakunode.client import WakuClient
from wakunode.confirmations import MessageResponse, batch_hash

__all__ = ["PublishTally", "run_publishers"]


@dataclass
class PublishTally:
    """What the publishers did; per-second lists are indexed by whole seconds since the start."""

    posted: int = 0
    acked: int = 0
    unacked: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    posted_per_s: list[int] = field(default_factory=list)
    acked_per_s: list[int] = field(default_factory=list)
    #: Seconds from writing a packet to its confirmation (8 bytes each: 0.2 MiB for a full run).
    ack_latency_s: array[float] = field(default_factory=lambda: array("d"))
    late_packets: int = 0
    window_waits: int = 0

    def count(self, series: list[int], at: float, n: int) -> None:
        """Add ``n`` to ``series`` at second ``int(at)``."""
        second = max(0, int(at))
        if len(series) <= second:
            series.extend([0] * (second + 1 - len(series)))
        series[second] += n

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "posted": self.posted,
            "acked": self.acked,
            "unacked": self.unacked,
            "errors": dict(self.errors),
            "late_packets": self.late_packets,
            "window_waits": self.window_waits,
            "ack_latency": summarize_ms(self.ack_latency_s),
            "posted_per_s": self.posted_per_s,
            "acked_per_s": self.acked_per_s,
        }


@dataclass
class _Packet:
    envelopes: list[Envelope]
    confirmation: asyncio.Future[MessageResponse]
    written_at: float


class _Ledger:
    """Append-only ledger file (one :data:`LEDGER` record per posted envelope)."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = path.open("wb")

    def write(self, envelopes: list[Envelope], acked: set[bytes]) -> None:
        self._file.write(b"".join(LEDGER.pack(e.hash, e.sent, e.topic, e.hash in acked) for e in envelopes))

    def close(self) -> None:
        self._file.close()


class _Publisher:
    def __init__(
        self, index: int, settings: SoakSettings, enode: str, ledger: _Ledger, tally: PublishTally
    ) -> None:
        self.index, self.settings, self.enode = index, settings, enode
        self.ledger, self.tally = ledger, tally
        self.client = WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER)
        self.pubkey = b""
        self.topics = soak_topics(settings.topics)
        self.prefix = tag_of(settings.run_id) + bytes([index])
        self.seq = 0
        self.window = asyncio.Semaphore(settings.ack_window)
        self.pending: asyncio.Queue[_Packet | None] = asyncio.Queue()
        self.began = 0.0

    async def connect(self) -> None:
        await self.client.start()
        info = await self.client.connect(self.enode, timeout=60)
        if info.capability != "waku/1":
            raise RuntimeError(f"negotiated {info.capability}, expected waku/1")
        self.pubkey = info.pubkey

    def _envelopes(self) -> list[Envelope]:
        s = self.settings
        now = int(time.time())
        out = []
        for _ in range(s.packet):
            self.seq += 1
            data = self.prefix + self.seq.to_bytes(7, "big") + os.urandom(s.data_size - 16)
            topic = self.topics[(self.seq + self.index) % len(self.topics)]
            out.append(seal(now + s.ttl, s.ttl, topic, data, target_pow=STATUS_MIN_POW, work_time_s=5))
        return out

    async def run(self, began: float, end: float) -> None:
        self.began = began
        collector = asyncio.create_task(self._collect())
        interval = self.settings.packet_interval_s
        due = began + interval * self.index / self.settings.publishers  # staggered publishers
        try:
            while due < end:
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # the publishing schedule, not synchronisation
                elif delay < -interval:
                    self.tally.late_packets += 1
                if self.window.locked():
                    self.tally.window_waits += 1
                await self.window.acquire()
                await self._post(self._envelopes())
                due += interval
        finally:
            await self.pending.put(None)
            await collector

    async def _post(self, envelopes: list[Envelope]) -> None:
        digest = batch_hash(encode_envelopes(envelopes))
        confirmation = self.client.node.expect_confirmation(digest)
        try:
            sent = await self.client.node.send_messages(self.pubkey, envelopes)
        except Exception as err:  # a good client's write failed: count it, reconnect, carry on
            confirmation.cancel()
            self.tally.errors[f"write: {type(err).__name__}"] += 1
            self.ledger.write(envelopes, set())
            self.tally.unacked += len(envelopes)
            self.window.release()
            await self._reconnect()
            return
        assert sent == digest
        now = time.monotonic()
        self.tally.posted += len(envelopes)
        self.tally.count(self.tally.posted_per_s, now - self.began, len(envelopes))
        await self.pending.put(_Packet(envelopes, confirmation, now))

    async def _reconnect(self) -> None:
        try:
            self.pubkey = (await self.client.connect(self.enode, timeout=60)).pubkey
        except Exception as err:
            self.tally.errors[f"reconnect: {type(err).__name__}"] += 1

    async def _collect(self) -> None:
        """Resolve packets in order: acknowledged envelopes, refused ones, missing confirmations."""
        while (packet := await self.pending.get()) is not None:
            remaining = packet.written_at + self.settings.ack_timeout_s - time.monotonic()
            acked: set[bytes] = set()
            try:
                async with asyncio.timeout(max(remaining, 0.0)):
                    response = await packet.confirmation
                now, wall = time.monotonic(), time.time()
                refused = {e.envelope_hash for e in response.errors}
                late = {e.hash for e in packet.envelopes if e.expiry <= wall} - refused
                acked = {e.hash for e in packet.envelopes} - refused - late
                if refused:
                    self.tally.errors["envelope refused in Message Response"] += len(refused)
                if late:
                    self.tally.errors["confirmed only after the envelope expired"] += len(late)
                self.tally.ack_latency_s.append(now - packet.written_at)
                self.tally.count(self.tally.acked_per_s, now - self.began, len(acked))
            except TimeoutError:
                self.tally.errors["no confirmation"] += 1
            self.tally.acked += len(acked)
            self.tally.unacked += len(packet.envelopes) - len(acked)
            self.ledger.write(packet.envelopes, acked)
            self.window.release()


async def run_publishers(
    settings: SoakSettings, enode: str, ledger_path: Path, ready: asyncio.Event, go: asyncio.Future[float]
) -> dict[str, Any]:
    """Connect every publisher, set ``ready``, wait for ``go`` (the load's length), post until it ends."""
    ledger = _Ledger(ledger_path)
    tally = PublishTally()
    publishers = [_Publisher(i, settings, enode, ledger, tally) for i in range(settings.publishers)]
    try:
        for p in publishers:
            await p.connect()
        ready.set()
        duration = await go
        began = time.monotonic()
        await asyncio.gather(*(p.run(began, began + duration) for p in publishers))
        elapsed = time.monotonic() - began
    finally:
        for p in publishers:
            await p.client.stop()
        ledger.close()
    return {**tally.to_json(), "load_s": round(elapsed, 2)}
