"""Test doubles for the wakunode unit tests: an in-memory PeerAPI, a manual clock, envelope factories."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from devp2p.abc import PeerAPI, SubProtocol
from devp2p.errors import PeerDisconnected
from devp2p.hello import HelloPayload
from wakucodec import secp
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.keccak import keccak256
from wakucodec.pow import seal
from wakunode.node import WakuNode
from wakunode.protocol import WakuSubProtocol

NOW = 1_700_000_000


@dataclass
class ManualClock:
    """A clock that only moves when told to."""

    wall: float = float(NOW)
    mono: float = 1000.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


@dataclass(frozen=True)
class Sent:
    """One packet written to a FakePeer."""

    protocol: str
    code: int
    payload: bytes


@dataclass(eq=False)
class FakePeer(PeerAPI):
    """An in-memory PeerAPI that records what is sent to it."""

    key: bytes = field(default_factory=secp.generate_private_key)
    address: tuple[str, int] | None = ("10.0.0.1", 30303)
    sent: list[Sent] = field(default_factory=list)
    disconnected: list[int] = field(default_factory=list)
    fail_sends: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def remote_id(self) -> bytes:
        return secp.public_key(self.key)

    @property
    def remote_id_hash(self) -> bytes:
        return keccak256(self.remote_id)

    @property
    def hello(self) -> HelloPayload:
        return HelloPayload(5, "fake/v1", (), 0, self.remote_id)

    @property
    def client_id(self) -> str:
        return "fake/v1"

    @property
    def inbound(self) -> bool:
        return True

    @property
    def remote_address(self) -> tuple[str, int] | None:
        return self.address

    @property
    def snappy(self) -> bool:
        return True

    @property
    def is_closed(self) -> bool:
        return bool(self.disconnected)

    async def send(self, protocol: SubProtocol | str, code: int, payload: bytes) -> None:
        if self.fail_sends or self.disconnected:
            raise PeerDisconnected(0x01, remote=False)
        name = protocol if isinstance(protocol, str) else protocol.name
        self.sent.append(Sent(name, code, payload))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def disconnect(self, reason: int) -> None:
        self.disconnected.append(reason)

    def codes(self) -> list[int]:
        return [s.code for s in self.sent]

    def of(self, code: int) -> list[bytes]:
        return [s.payload for s in self.sent if s.code == code]

    async def wait_code(self, code: int, count: int = 1, timeout: float = 2.0) -> list[bytes]:
        async with asyncio.timeout(timeout):
            while len(self.of(code)) < count:
                await self._changed.wait()
        return self.of(code)


def protocol(node: WakuNode, capability: str = "waku/1") -> WakuSubProtocol:
    """The node's SubProtocol for a capability."""
    for proto in node.protocols:
        if f"{proto.name}/{proto.version}" == capability:
            assert isinstance(proto, WakuSubProtocol)
            return proto
    raise LookupError(capability)


def envelope(
    i: int = 0,
    *,
    topic: bytes = b"abcd",
    size: int = 64,
    ttl: int = 100,
    now: int = NOW,
    sent: int | None = None,
) -> Envelope:
    """An unsealed envelope; PoW ≥ 2^0/len/ttl, enough for the default 0.000002 requirement."""
    start = now if sent is None else sent
    return make_envelope(
        expiry=start + ttl, ttl=ttl, topic=topic, data=i.to_bytes(4, "big") * (size // 4), nonce=i
    )


def sealed(i: int, *, pow_target: float, topic: bytes = b"abcd", ttl: int = 100, now: int = NOW) -> Envelope:
    """An envelope mined to ``pow_target``."""
    return seal(now + ttl, ttl, topic, i.to_bytes(4, "big") * 8, target_pow=pow_target, work_time_s=10)


def raws(envelopes: Sequence[Envelope]) -> list[bytes]:
    return [e.raw for e in envelopes]
