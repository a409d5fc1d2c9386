"""devp2p / RLPx throughput: handshakes per second and frame encode+decode MB/s for 1 MiB messages.

Both ends run in this one process, so every figure is the cost of *both* sides on one core (a real peer pays
about half of it). Rates are per second of this process's **CPU time** (best of several rounds), so other
jobs on a shared machine do not move them much; the wall-clock rates are kept in each result's ``detail``.
Payloads are 1 MiB (``DefaultMaxMessageSize``): random bytes (encrypted Waku payloads do not compress) and
repetitive text (the best case for snappy).

- **handshakes/s**: EIP-8 auth + ack, ECDH, secrets, over an in-memory transport (no sockets).
- **sessions/s**: TCP connect on loopback + handshake + Hello exchange, dialled one after another.
- **frame encode+decode**: ``encode_frame_data`` (snappy) + ``FrameCodec.encode`` (AES-CTR, Keccak MAC) then
  ``decode_header``/``decode_body`` + ``decode_frame_data``; MB/s of payload through both.
- **loopback session**: 1 MiB messages sent by one peer to another over a real RLPx session on loopback TCP
  (snappy on, as negotiated by p2p v5); MB/s of payload delivered to the receiving subprotocol.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench.harness import Result, config, rate
from devp2p import Server, ServerConfig, SessionConfig, handshake
from devp2p.abc import PeerAPI, SubProtocol
from devp2p.frame import FrameCodec
from devp2p.messages import decode_frame_data, encode_frame_data
from devp2p.transport import MemoryTransport
from wakucodec import secp
from wakucodec.keccak import keccak256, new_keccak256

MIB = 1 << 20
_CODE = 0x11  # a subprotocol message id (waku's first is 0x10)


def _codec_pair() -> tuple[FrameCodec, FrameCodec]:
    """Two codecs of one session: what ``a`` encodes, ``b`` decodes (egress/ingress MACs swapped)."""
    aes, mac = keccak256(b"bench-aes"), keccak256(b"bench-mac")
    a = FrameCodec(aes, mac, new_keccak256(b"x"), new_keccak256(b"y"))
    b = FrameCodec(aes, mac, new_keccak256(b"y"), new_keccak256(b"x"))
    return a, b


def _round_trip(payload: bytes, *, snappy: bool) -> Callable[[], object]:
    a, b = _codec_pair()

    def once() -> object:
        frame = a.encode(encode_frame_data(_CODE, payload, snappy=snappy))
        size = b.decode_header(frame[:32])
        code, out = decode_frame_data(b.decode_body(size, frame[32:]), snappy=snappy)
        if code != _CODE or len(out) != len(payload):
            raise AssertionError("frame round trip changed the message")
        return out

    return once


def _wire_size(payload: bytes, *, snappy: bool) -> int:
    a, _ = _codec_pair()
    return len(a.encode(encode_frame_data(_CODE, payload, snappy=snappy)))


@dataclass(frozen=True)
class Timed:
    """Work done over a measured interval: per CPU-second (the figure) and per wall-clock second."""

    work: float
    cpu_s: float
    wall_s: float

    @property
    def per_cpu_s(self) -> float:
        return self.work / max(self.cpu_s, 1e-9)

    @property
    def per_wall_s(self) -> float:
        return self.work / max(self.wall_s, 1e-9)


class _Clock:
    def __enter__(self) -> _Clock:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self._wall
        self.cpu_s = time.process_time() - self._cpu

    def timed(self, work: float) -> Timed:
        return Timed(work, self.cpu_s, self.wall_s)


def _best(runs: list[Timed], name: str, unit: str, **detail: object) -> Result:
    best = max(runs, key=lambda t: t.per_cpu_s)
    return Result(
        name,
        round(best.per_cpu_s, 1),
        unit,
        detail={
            "clock": "process CPU time",
            "wall_best": round(max(t.per_wall_s for t in runs), 1),
            "rounds": len(runs),
            "both_sides_one_core": True,
            **detail,
        },
    )


async def _handshakes(n: int) -> Timed:
    keys = [secp.generate_private_key() for _ in range(2)]
    pub = secp.public_key(keys[1])
    with _Clock() as clock:
        for _ in range(n):
            x, y = MemoryTransport.connected_pair()
            await asyncio.gather(handshake.initiate(x, keys[0], pub), handshake.respond(y, keys[1]))
    return clock.timed(n)


@dataclass(eq=False)
class _Sink(SubProtocol):
    """Counts the payload bytes it receives; ``done`` is set once ``want`` bytes arrived."""

    name: str = "bench"
    version: int = 1
    length: int = 32
    want: int = 0
    received: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        self.received += len(payload)
        if self.received >= self.want:
            self.done.set()


def _server_config(*, listen: bool) -> ServerConfig:
    session = SessionConfig(ping_interval=60, frame_read_timeout=60, frame_write_timeout=60)
    if not listen:
        return ServerConfig(listen=False, session=session)
    return ServerConfig(
        host="127.0.0.1", port=0, max_peers=100_000, max_pending_peers=100_000, session=session
    )


async def _sessions(n: int) -> Timed:
    """Dial ``n`` fresh nodes into one listener, one after another."""
    listener = Server(secp.generate_private_key(), [_Sink()], _server_config(listen=True))
    await listener.start()
    dialers = [Server(secp.generate_private_key(), [_Sink()], _server_config(listen=False)) for _ in range(n)]
    try:
        with _Clock() as clock:
            for dialer in dialers:
                await dialer.dial(listener.enode)
        return clock.timed(n)
    finally:
        for dialer in dialers:
            await dialer.stop()
        await listener.stop()


async def _session_throughput(payload: bytes, messages: int) -> Timed:
    """MB of 1 MiB messages delivered over one loopback RLPx session (both peers in this process)."""
    sink = _Sink(want=len(payload) * messages)
    listener = Server(secp.generate_private_key(), [sink], _server_config(listen=True))
    sender_proto = _Sink()
    sender = Server(secp.generate_private_key(), [sender_proto], _server_config(listen=False))
    await listener.start()
    try:
        peer = await sender.dial(listener.enode)
        await peer.send(sender_proto, 0, payload)  # warm-up message, not timed
        while sink.received < len(payload):
            await asyncio.sleep(0.001)
        sink.received = 0
        with _Clock() as clock:
            for _ in range(messages):
                await peer.send(sender_proto, 0, payload)
            await asyncio.wait_for(sink.done.wait(), 120)
        return clock.timed(len(payload) * messages / 1e6)
    finally:
        await sender.stop()
        await listener.stop()


def run() -> list[Result]:
    """Run the devp2p suite."""
    quick = config().quick
    random_mib = os.urandom(MIB)
    text_mib = (b"Waku envelope payload, lorem ipsum dolor sit amet. " * (MIB // 50 + 1))[:MIB]
    repeats, min_time = (2, 0.1) if quick else (5, 0.5)
    results: list[Result] = []
    for label, payload in (("random", random_mib), ("text", text_mib)):
        for snappy in (False, True):
            if label == "text" and not snappy:
                continue  # without snappy the content does not matter
            r = rate(
                f"frame encode+decode, 1 MiB {label}, snappy {'on' if snappy else 'off'}",
                _round_trip(payload, snappy=snappy),
                ops_per_call=1,
                unit="MB/s",
                repeats=repeats,
                min_time_s=min_time,
                cpu=True,
            )
            scale = len(payload) / 1e6  # messages/s → MB/s of payload
            results.append(
                Result(
                    r.name,
                    round(r.value * scale, 1),
                    "MB/s",
                    detail={
                        "clock": "process CPU time",
                        "median_MB_s": round(float(r.detail["median"]) * scale, 1),
                        "wall_best_MB_s": round(float(r.detail["wall_best"]) * scale, 1),
                        "messages_per_s": r.value,
                        "wire_bytes": _wire_size(payload, snappy=snappy),
                        "both_sides_one_core": True,
                    },
                )
            )
    n = 40 if quick else 300
    runs = [asyncio.run(_handshakes(n)) for _ in range(2 if quick else 3)]
    results.append(
        _best(runs, "handshakes (EIP-8 auth+ack, both sides, in-memory)", "handshakes/s", per_round=n)
    )
    n = 30 if quick else 200
    runs = [asyncio.run(_sessions(n)) for _ in range(1 if quick else 2)]
    results.append(
        _best(
            runs, "sessions over loopback TCP (connect + handshake + Hello)", "sessions/s", sequential_dials=n
        )
    )
    n = 16 if quick else 128
    runs = [asyncio.run(_session_throughput(random_mib, n)) for _ in range(1 if quick else 3)]
    results.append(
        _best(runs, "1 MiB messages over a loopback RLPx session (random, snappy on)", "MB/s", messages=n)
    )
    return results
