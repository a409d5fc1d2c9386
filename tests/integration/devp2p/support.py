"""Integration helpers: servers on loopback port 0 and a raw RLPx client that can misbehave on purpose."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, ClassVar

from devp2p import constants as c
from devp2p import handshake
from devp2p.abc import SubProtocol
from devp2p.config import ServerConfig, SessionConfig
from devp2p.connection import Connection
from devp2p.hello import HelloPayload
from devp2p.p2p import Disconnect, Hello
from devp2p.server import Server
from devp2p.transport import StreamTransport
from tests.unit.devp2p.support import Recorder, hello_for
from wakucodec import secp

SESSION = SessionConfig(
    handshake_timeout=1.0,
    frame_read_timeout=5.0,
    frame_write_timeout=2.0,
    ping_interval=1.0,
    disconnect_write_timeout=0.5,
    dial_timeout=2.0,
)
CONFIG = ServerConfig(
    host="127.0.0.1",
    port=0,
    max_peers=10,
    static_redial_min=0.05,
    static_redial_max=0.2,
    session=SESSION,
)

__all__ = ["CONFIG", "SESSION", "RawClient", "Recorder", "hello_for", "running_server"]


@asynccontextmanager
async def running_server(
    protocols: Sequence[SubProtocol] | None = None,
    config: ServerConfig = CONFIG,
    node_key: bytes | None = None,
    **overrides: Any,
) -> AsyncIterator[Server]:
    """A started server on 127.0.0.1:0, stopped afterwards."""
    if overrides:
        config = dataclasses.replace(config, **overrides)
    server = Server(node_key or secp.generate_private_key(), protocols or [Recorder()], config)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


class RecordingTransport(StreamTransport):
    """A StreamTransport that keeps a copy of every byte it writes (for replay attacks)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__(reader, writer)
        self.sent = bytearray()

    def write(self, data: bytes) -> None:
        self.sent += data
        super().write(data)


class RawClient:
    """A hand-driven RLPx client for hostile-input tests; every instance is closed by the conftest fixture."""

    #: Every client opened in the current test.
    opened: ClassVar[list[RawClient]] = []

    def __init__(self, transport: RecordingTransport, key: bytes) -> None:
        self.transport = transport
        self.key = key
        self.pubkey = secp.public_key(key)
        self.conn: Connection | None = None

    @classmethod
    async def connect(cls, server: Server, key: bytes | None = None) -> RawClient:
        """Open a TCP connection to ``server``."""
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        client = cls(RecordingTransport(reader, writer), key or secp.generate_private_key())
        cls.opened.append(client)
        return client

    async def handshake(self, server: Server) -> Connection:
        """Run the encryption handshake as initiator."""
        secrets = await handshake.initiate(self.transport, self.key, server.pubkey)
        self.conn = Connection(self.transport, secrets, SESSION)
        return self.conn

    async def send_hello(self, hello: HelloPayload | None = None) -> None:
        """Send a Hello (ours by default) without waiting for the remote's."""
        assert self.conn is not None
        await self.conn.write_message(c.HELLO_CODE, Hello.encode(hello or hello_for(self.key, [Recorder()])))

    async def full_session(self, server: Server) -> HelloPayload:
        """Handshake + Hello exchange, as a well-behaved peer would."""
        conn = await self.handshake(server)
        await self.send_hello()
        code, data = await conn.read_message(timeout=2)
        assert code == c.HELLO_CODE, code
        hello = Hello.decode(data)
        conn.hello_completed(hello.version)
        return hello

    async def expect_disconnect(self, timeout: float = 3.0) -> int:
        """Read until a Disconnect arrives (skipping Hello/Ping/…); return its reason."""
        assert self.conn is not None
        while True:
            code, data = await self.conn.read_message(timeout=timeout)
            if code == c.DISCONNECT_CODE:
                return Disconnect.decode(data)

    async def expect_closed(self, timeout: float = 3.0) -> bytes:
        """Wait until the server closes the TCP connection; return whatever it sent before."""
        reader = self.transport._reader
        return await asyncio.wait_for(reader.read(), timeout)

    def write(self, data: bytes) -> None:
        """Write raw bytes."""
        self.transport.write(data)

    def close(self) -> None:
        """Drop the connection."""
        self.transport.abort()
