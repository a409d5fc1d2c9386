"""Integration helpers: our nodes on loopback port 0, a raw waku peer that can misbehave, bounded waits."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

from devp2p.config import ServerConfig, SessionConfig
from devp2p.peer import Peer
from devp2p.server import Server
from tests.unit.devp2p.support import Recorder
from wakucodec import secp
from wakucodec.envelope import Envelope, make_envelope
from wakunode.client import CLIENT_CONFIG, WakuClient
from wakunode.config import NodeConfig
from wakunode.memory import MemorySink
from wakunode.node import WakuNode
from wakunode.peerstate import Flavor
from wakunode.ports import HistoryBackend
from wakunode.protocol import encode_status
from wakunode.status_options import StatusOptions

SESSION = SessionConfig(
    handshake_timeout=2.0,
    frame_read_timeout=10.0,
    frame_write_timeout=5.0,
    ping_interval=2.0,
    disconnect_write_timeout=0.5,
    dial_timeout=2.0,
)
SERVER = ServerConfig(host="127.0.0.1", port=0, max_peers=20, session=SESSION)
#: Forwarding every 50 ms instead of 300 ms keeps relay tests short (the rule is the same).
FAST = NodeConfig(transmission_cycle=0.05, pow_requirement=0.0)


@dataclass
class Running:
    """A started node with its devp2p server and a sink."""

    node: WakuNode
    server: Server
    sink: MemorySink

    @property
    def enode(self) -> str:
        return self.server.enode

    @property
    def pubkey(self) -> bytes:
        return self.server.pubkey


@asynccontextmanager
async def running_node(
    config: NodeConfig = FAST, history: HistoryBackend | None = None, **overrides: object
) -> AsyncIterator[Running]:
    """A WakuNode + devp2p Server on 127.0.0.1:0, stopped afterwards."""
    if overrides:
        config = dataclasses.replace(config, **overrides)  # type: ignore[arg-type]
    sink = MemorySink()
    node = WakuNode(config, sink, history)
    server = Server(secp.generate_private_key(), node.protocols, SERVER)
    node.attach(server)
    async with node, server:
        yield Running(node, server, sink)


@asynccontextmanager
async def running_client(config: NodeConfig = CLIENT_CONFIG) -> AsyncIterator[WakuClient]:
    """A dial-only WakuClient with the fast session settings."""
    client = WakuClient(config=config, server_config=dataclasses.replace(SERVER, listen=False))
    async with client:
        yield client


async def link(a: Running, b: Running, timeout: float = 5.0) -> None:
    """Dial b from a and wait for the subprotocol handshake on both sides."""
    await a.server.dial(b.enode)
    await a.node.wait_ready(b.pubkey, timeout)
    await b.node.wait_ready(a.pubkey, timeout)


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``condition`` every 10 ms; AssertionError after ``timeout`` seconds (a bounded wait, not sync)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def envelopes(
    count: int,
    *,
    topic: bytes = b"abcd",
    size: int = 64,
    ttl: int = 300,
    sent: int | None = None,
    first: int = 0,
) -> list[Envelope]:
    """Unsealed envelopes sent now (PoW far below 1, above 0)."""
    start = int(time.time()) if sent is None else sent
    return [
        make_envelope(
            expiry=start + ttl, ttl=ttl, topic=topic, data=i.to_bytes(4, "big") * (size // 4), nonce=i
        )
        for i in range(first, first + count)
    ]


@dataclass
class RawPeer:
    """A devp2p node with a recording 'waku' (or 'shh') protocol we drive by hand."""

    server: Server
    recorder: Recorder
    peer: Peer

    async def status(self, flavor_status: bytes) -> None:
        await self.peer.send(self.recorder, 0, flavor_status)

    async def send(self, code: int, payload: bytes) -> None:
        await self.peer.send(self.recorder, code, payload)

    async def expect(self, code: int, timeout: float = 5.0) -> bytes:
        """The next received packet with ``code`` (others are skipped)."""
        async with asyncio.timeout(timeout):
            while True:
                got, payload = await self.recorder.next(timeout)
                if got == code:
                    return payload


@asynccontextmanager
async def raw_peer(
    target: Running, capabilities: Sequence[tuple[str, int]] = (("waku", 1),)
) -> AsyncIterator[RawPeer]:
    """Connect a hand-driven peer to ``target``; it has sent nothing at the subprotocol level yet."""
    recorders = [Recorder(name=name, version=version, length=128) for name, version in capabilities]
    server = Server(secp.generate_private_key(), recorders, dataclasses.replace(SERVER, listen=False))
    async with server:
        peer = await server.dial(target.enode)
        yield RawPeer(server, recorders[0], peer)


def waku1_status(**options: object) -> bytes:
    """A waku/1 Status payload."""
    return encode_status(Flavor.WAKU1, StatusOptions(**options))  # type: ignore[arg-type]
