"""Test helpers: a recording subprotocol, connected in-memory peer pairs, and condition waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from devp2p import constants as c
from devp2p.abc import PeerAPI, SubProtocol
from devp2p.capabilities import CapabilityTable
from devp2p.config import SessionConfig
from devp2p.connection import establish
from devp2p.hello import HelloPayload
from devp2p.peer import Peer, SessionEnd
from devp2p.transport import MemoryTransport
from wakucodec import secp

FAST = SessionConfig(
    handshake_timeout=2.0,
    frame_read_timeout=5.0,
    frame_write_timeout=2.0,
    ping_interval=1.0,
    disconnect_write_timeout=0.5,
    dial_timeout=2.0,
)


@dataclass
class Recorder(SubProtocol):
    """A subprotocol that records everything; ``fail_on`` codes make ``handle`` raise ``error``."""

    name: str = "test"
    version: int = 1
    length: int = 8
    send_on_start: bytes | None = None
    fail_on: set[int] = field(default_factory=set)
    error: Exception = field(default_factory=lambda: RuntimeError("handler failed"))
    received: asyncio.Queue[tuple[PeerAPI, int, bytes]] = field(default_factory=asyncio.Queue)
    started: list[PeerAPI] = field(default_factory=list)
    stopped: list[tuple[PeerAPI, int]] = field(default_factory=list)
    on_message: Callable[[PeerAPI, int, bytes], Awaitable[None]] | None = None

    def __hash__(self) -> int:
        return id(self)

    async def on_start(self, peer: PeerAPI) -> None:
        self.started.append(peer)
        if self.send_on_start is not None:
            await peer.send(self, 0, self.send_on_start)

    async def handle(self, peer: PeerAPI, code: int, payload: bytes) -> None:
        if code in self.fail_on:
            raise self.error
        if self.on_message is not None:
            await self.on_message(peer, code, payload)
        await self.received.put((peer, code, payload))

    async def on_stop(self, peer: PeerAPI, reason: int) -> None:
        self.stopped.append((peer, reason))

    async def next(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next received ``(code, payload)``."""
        _, code, payload = await asyncio.wait_for(self.received.get(), timeout)
        return code, payload


def hello_for(key: bytes, protocols: Sequence[SubProtocol], *, version: int = c.P2P_VERSION) -> HelloPayload:
    """The Hello a node with ``key`` and ``protocols`` sends."""
    caps = tuple(p.capability for p in protocols)
    return HelloPayload(version, "test/v1", caps, 0, secp.public_key(key))


async def peer_pair(
    protocols_a: Sequence[SubProtocol],
    protocols_b: Sequence[SubProtocol],
    config_a: SessionConfig = FAST,
    config_b: SessionConfig = FAST,
) -> tuple[Peer, Peer, list[asyncio.Task[SessionEnd]]]:
    """Establish A → B over memory and start both peers; returns the peers and their run tasks."""
    key_a, key_b = secp.generate_private_key(), secp.generate_private_key()
    end_a, end_b = MemoryTransport.connected_pair()
    (conn_a, hello_b), (conn_b, hello_a) = await asyncio.gather(
        establish(
            end_a, key_a, hello_for(key_a, protocols_a), config_a, remote_pubkey=secp.public_key(key_b)
        ),
        establish(end_b, key_b, hello_for(key_b, protocols_b), config_b),
    )
    peer_a = Peer(
        conn_a, hello_b, CapabilityTable.negotiate(protocols_a, hello_b.capabilities), inbound=False
    )
    peer_b = Peer(conn_b, hello_a, CapabilityTable.negotiate(protocols_b, hello_a.capabilities), inbound=True)
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(peer_a.run()), loop.create_task(peer_b.run())]
    return peer_a, peer_b, tasks


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Poll ``condition`` every 5 ms until true; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)
