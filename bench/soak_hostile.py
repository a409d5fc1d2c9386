"""Soak role ``hostile``: peers that connect and misbehave in a loop for the whole run.

Each of :attr:`~bench.soak_settings.SoakSettings.hostile` peers runs every misbehaviour of :data:`MOVES` in
turn (each peer starting at a different one), a fresh identity for every session, until the load ends:

- on the raw TCP port (no RLPx): random bytes instead of an EIP-8 auth; a size prefix then silence
  (truncated handshake); a size prefix claiming 64 KiB (over the 4 KiB handshake packet limit); a slowloris
  handshake (one byte every half second); idle connections that never send a byte;
- in an RLPx session (waku/1, untrusted, so the answers it provokes are dropped unread): malformed packets
  (undecodable Messages payloads, an envelope with a 3-byte topic, truncated RLP, an unknown code,
  undecodable and invalid 0x7e), then a Ping that must be answered; a Messages flood of envelopes the edge
  peer must refuse (PoW far too low, expired); a 0x7e flood of valid, invalid and undecodable requests after
  which the peer leaves without waiting; a packet just over the 1 MiB max message size (status-go answers
  Disconnect 0x10); a 4 MiB packet (devp2p refuses its frame from the header, Disconnect 0x02); a
  slowloris *reader*: it takes the whole live relay and sends heavy requests, then stops reading its socket
  (the edge peer's writes must time out and drop it).

Each move ends in an outcome; the expected ones are in :data:`EXPECTED`. An outcome starting with
``DEFECT`` means the edge peer did not defend itself (a bad handshake left open, an oversized packet not
disconnected, a non-reader never dropped, within generous hang bounds) and fails the soak; anything else
unexpected (a refused connection under load, say) is reported. A move still running when the load ends is
cancelled and counted as ``cut short``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.soak_settings import CLIENT_SERVER, WAKU1_CLIENT, SoakSettings, soak_topics
from devp2p.enode import parse_enode
from devp2p.errors import PeerDisconnected
from wakucodec import rlp
from wakucodec.constants import STATUS_MIN_POW
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.pow import calculate_pow
from wakucodec.requests import encode_p2p_request
from wakunode.client import WakuClient
from wakunode.config import NodeConfig
from wakunode.constants import MESSAGES_CODE, P2P_REQUEST_CODE

__all__ = ["EXPECTED", "MOVES", "HostileTally", "run_hostile"]

#: Hang bounds (seconds): a defence slower than this is reported as a defect, never waited for longer.
CLOSE_BOUND_S = 60.0
NON_READER_BOUND_S = 180.0
#: A hostile session may idle in its (raw) reads for this long: long enough for the edge peer to act first.
HOSTILE_SERVER = replace(
    CLIENT_SERVER, session=replace(CLIENT_SERVER.session, frame_read_timeout=600.0, handshake_timeout=30.0)
)
JUNK_TOPIC = bytes.fromhex("0badf00d")
#: A peer that wants every relayed envelope (full bloom, any PoW): the slowloris reader.
RELAY_TAKER = replace(WAKU1_CLIENT, topic_interest=None, pow_requirement=0.0)
CUT_SHORT = "cut short by the end of the load"


@dataclass
class HostileTally:
    """Outcomes per move, and how long the edge peer took to close bad handshakes."""

    outcomes: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    close_s: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    sessions: int = 0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "sessions": self.sessions,
            "outcomes": {move: dict(c) for move, c in sorted(self.outcomes.items())},
            "close_s_max": {move: round(max(v), 2) for move, v in sorted(self.close_s.items()) if v},
            "defects": sum(n for c in self.outcomes.values() for o, n in c.items() if o.startswith("DEFECT")),
        }


def _refused(now: int, j: int) -> Envelope:
    """An envelope the edge peer must refuse: expired a minute ago, or PoW below the node minimum."""
    if j % 2 == 0:
        return make_envelope(expiry=now - 60, ttl=10, topic=JUNK_TOPIC, data=os.urandom(512))
    env = make_envelope(expiry=now + 100_000, ttl=100_000, topic=JUNK_TOPIC, data=os.urandom(512))
    while calculate_pow(env) >= STATUS_MIN_POW:  # a nonce with few leading zero bits (most of them)
        env = env.with_nonce(env.nonce + 1)
    return env


class _Hostile:
    def __init__(self, settings: SoakSettings, enode: str, tally: HostileTally, seed: int) -> None:
        self.settings, self.enode, self.tally = settings, enode, tally
        self.rng = random.Random(seed)
        node = parse_enode(enode)
        self.host, self.port = node.host, node.port
        self.topics = soak_topics(settings.topics)

    # --- raw TCP -------------------------------------------------------------------------------------------

    async def _closed(self, reader: asyncio.StreamReader, began: float, move: str) -> str:
        """Read (and drop) whatever comes until the edge peer closes; DEFECT after the bound."""
        try:
            async with asyncio.timeout(CLOSE_BOUND_S):
                while await reader.read(4096):
                    pass
        except TimeoutError:
            return "DEFECT: left open"
        except OSError:
            pass  # a reset is a close
        self.tally.close_s[move].append(time.monotonic() - began)
        return "closed by the edge"

    async def _raw(self, move: str, first: bytes, drip: bool = False) -> str:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        began = time.monotonic()
        try:
            writer.write(first)
            if not drip:
                return await self._closed(reader, began, move)
            closing = asyncio.ensure_future(self._closed(reader, began, move))
            while not closing.done():  # one byte every half second until the edge gives up on us
                try:
                    writer.write(os.urandom(1))
                    await writer.drain()
                except OSError:
                    break
                await asyncio.wait({closing}, timeout=0.5)  # the slowloris pace
            return await closing
        finally:
            writer.close()

    async def random_bytes(self) -> str:
        return await self._raw("random_bytes", os.urandom(600))

    async def truncated_handshake(self) -> str:
        return await self._raw("truncated_handshake", b"\x01\x2c" + os.urandom(50))

    async def oversized_auth(self) -> str:
        # geth reads the 307 bytes of a pre-EIP-8 auth first, then checks the EIP-8 size prefix (EIP-8).
        return await self._raw("oversized_auth", b"\xff\xff" + os.urandom(400))

    async def slowloris_handshake(self) -> str:
        return await self._raw("slowloris_handshake", b"\x01\x2c", drip=True)

    async def idle_connections(self) -> str:
        outcomes = await asyncio.gather(*(self._raw("idle_connections", b"") for _ in range(2)))
        return next((o for o in outcomes if o.startswith("DEFECT")), outcomes[0])

    # --- RLPx sessions -------------------------------------------------------------------------------------

    async def _session(
        self, body: Callable[[WakuClient, bytes], Awaitable[str]], config: NodeConfig = WAKU1_CLIENT
    ) -> str:
        async with WakuClient(config=config, server_config=HOSTILE_SERVER) as client:
            info = await client.connect(self.enode, timeout=60, trust=False)
            self.tally.sessions += 1
            return await body(client, info.pubkey)

    async def _ping(self, client: WakuClient, pubkey: bytes) -> str:
        peer = client.server.get_peer(pubkey)
        if peer is None:
            return "dropped"
        try:
            await peer.ping(timeout=CLOSE_BOUND_S)
        except Exception as err:
            return f"no pong: {type(err).__name__}"
        return "kept, answered a ping"

    def _request(self, limit: int, seconds: int, topics: int = 4) -> bytes:
        now = int(time.time())
        request = HistoryRequest(now - seconds, now, None, self.topics[:topics], limit)
        return encode_p2p_request(request, Dialect.STATUS_PLAIN).payload

    async def malformed_packets(self) -> str:
        async def body(client: WakuClient, pk: bytes) -> str:
            invalid = encode_p2p_request(HistoryRequest(200, 100, None, (JUNK_TOPIC,)), Dialect.STATUS_PLAIN)
            junk = [
                (MESSAGES_CODE, os.urandom(200)),
                (MESSAGES_CODE, rlp.encode([[1, 2, b"abc", b"data", 0]])),  # a 3-byte topic
                (MESSAGES_CODE, rlp.encode([b"not a list"])),
                (MESSAGES_CODE, b"\xf8\xff"),  # truncated RLP
                (50, b"\xc0"),  # unknown code
                (P2P_REQUEST_CODE, os.urandom(120)),  # undecodable 0x7e
                (P2P_REQUEST_CODE, invalid.payload),  # lower > upper: ERROR=
            ]
            for code, payload in junk:
                await client.node.send_packet(pk, code, payload)
            return await self._ping(client, pk)

        return await self._session(body)

    async def messages_flood(self) -> str:
        async def body(client: WakuClient, pk: bytes) -> str:
            for i in range(20):
                await client.node.send_messages(pk, [_refused(int(time.time()), j) for j in range(50)])
                if i % 5 == 4:
                    await asyncio.sleep(0)
            return await self._ping(client, pk)

        return await self._session(body)

    async def request_flood(self) -> str:
        async def body(client: WakuClient, pk: bytes) -> str:
            invalid = encode_p2p_request(HistoryRequest(200, 100), Dialect.STATUS_PLAIN).payload
            for i in range(60):
                payload = (self._request(100, 10), invalid, os.urandom(120))[i % 3]
                await client.node.send_packet(pk, P2P_REQUEST_CODE, payload)
            return "left mid-flood"  # the session ends here, answers still owed

        return await self._session(body)

    async def _disconnected(self, client: WakuClient, pk: bytes, packet: bytes) -> str:
        peer = client.server.get_peer(pk)
        if peer is None:
            return "dropped before sending"
        with contextlib.suppress(PeerDisconnected):  # the edge may hang up before the whole packet is written
            await client.node.send_packet(pk, MESSAGES_CODE, packet)
        try:
            end = await asyncio.wait_for(peer.wait_closed(), CLOSE_BOUND_S)
        except TimeoutError:
            return "DEFECT: not disconnected"
        return f"disconnected 0x{end.reason:02x}"

    async def oversized_packet(self) -> str:
        packet = rlp.encode([os.urandom(1 << 20)])  # just over EDGE_MAX_MESSAGE_SIZE (1 MiB): 0x10
        return await self._session(lambda client, pk: self._disconnected(client, pk, packet))

    async def oversized_frame(self) -> str:
        packet = rlp.encode([os.urandom(4 << 20)])  # far over: refused by devp2p from the frame header
        return await self._session(lambda client, pk: self._disconnected(client, pk, packet))

    async def slowloris_reader(self) -> str:
        async def body(client: WakuClient, pk: bytes) -> str:
            peer = client.server.get_peer(pk)
            if peer is None:
                return "dropped before sending"
            stream = peer._conn.transport._writer.transport  # type: ignore[attr-defined]
            stream.pause_reading()  # from now on the edge peer's writes to us fill the socket buffers
            began = time.monotonic()
            # It takes the whole live relay (a full bloom: ~1 MB/s of the soak's traffic) and asks for every
            # topic over the last day (status-go's longest request, ~20 MB of answers once the archive holds
            # a few seconds of the load): far more than loopback's socket buffers hold, so the edge peer's
            # writes to it must block and time out, whether or not its history queries are answered.
            heavy = self._request(1000, 86_000, topics=len(self.topics))
            for _ in range(20):
                await client.node.send_packet(pk, P2P_REQUEST_CODE, heavy)
            try:
                await asyncio.wait_for(peer.wait_closed(), NON_READER_BOUND_S)
            except TimeoutError:
                return "DEFECT: non-reader never dropped"
            finally:
                stream.resume_reading()
            self.tally.close_s["slowloris_reader"].append(time.monotonic() - began)
            return "dropped by the edge"

        return await self._session(body, RELAY_TAKER)

    async def run(self, start: int, end: float) -> None:
        k = start
        while time.monotonic() < end:
            name = MOVES[k % len(MOVES)]
            k += 1
            move: Callable[[], Awaitable[str]] = getattr(self, name)
            try:
                outcome = await asyncio.wait_for(move(), max(end - time.monotonic(), 0.001))
            except TimeoutError:
                outcome = CUT_SHORT
            except Exception as err:  # a refused connection, a failed dial: reported, not a defect
                outcome = f"error: {type(err).__name__}"
            self.tally.outcomes[name][outcome] += 1
            # A random pause (mean hostile_pause_s) keeps the peers out of step: in lockstep their slowloris
            # readers and floods all land at once and the edge peer's memory swings by ~70 MiB every cycle.
            pause = min(self.rng.uniform(0, 2 * self.settings.hostile_pause_s), end - time.monotonic())
            if pause > 0:
                await asyncio.sleep(pause)  # the hostile peers' pace, not synchronisation


MOVES = (
    "random_bytes",
    "malformed_packets",
    "truncated_handshake",
    "messages_flood",
    "oversized_auth",
    "request_flood",
    "slowloris_handshake",
    "oversized_packet",
    "idle_connections",
    "oversized_frame",
    "slowloris_reader",
)
"""Every misbehaviour, in the order a peer cycles through them."""

EXPECTED: dict[str, tuple[str, ...]] = {
    "random_bytes": ("closed by the edge",),
    "truncated_handshake": ("closed by the edge",),
    "oversized_auth": ("closed by the edge",),
    "slowloris_handshake": ("closed by the edge",),
    "idle_connections": ("closed by the edge",),
    "malformed_packets": ("kept, answered a ping",),
    "messages_flood": ("kept, answered a ping",),
    "request_flood": ("left mid-flood",),
    "oversized_packet": ("disconnected 0x10",),
    # The edge refuses the frame from its header and hangs up (0x02) while we are still writing the 4 MiB:
    # our side may see only the broken write (0x01); devp2p_errors_total{class="MessageTooLarge"} says why.
    "oversized_frame": ("disconnected 0x02", "disconnected 0x01"),
    "slowloris_reader": ("dropped by the edge",),
}
"""The outcomes each move should have."""


async def run_hostile(
    settings: SoakSettings, enode: str, ready: asyncio.Event, go: asyncio.Future[float]
) -> dict[str, Any]:
    """Set ``ready`` at once, wait for ``go`` (the load's length), misbehave until it ends."""
    tally = HostileTally()
    ready.set()
    duration = await go
    began = time.monotonic()
    peers = [_Hostile(settings, enode, tally, settings.run_id + k) for k in range(settings.hostile)]
    spread = max(1, len(MOVES) // max(settings.hostile, 1))
    await asyncio.gather(*(p.run(i * spread, began + duration) for i, p in enumerate(peers)))
    unexpected = {
        move: {o: n for o, n in outcomes.items() if o not in (*EXPECTED[move], CUT_SHORT)}
        for move, outcomes in tally.outcomes.items()
    }
    return {
        **tally.to_json(),
        "unexpected": {move: found for move, found in unexpected.items() if found},
        "moves": list(MOVES),
        "expected": EXPECTED,
    }
