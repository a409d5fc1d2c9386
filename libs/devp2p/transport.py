"""Byte transports under RLPx: asyncio streams, and a connected in-memory pair for tests.

:class:`StreamTransport` adapts an ``asyncio.StreamReader``/``StreamWriter`` pair (a TCP socket) and turns
``IncompleteReadError`` / ``OSError`` into :class:`~devp2p.errors.ConnectionLost` at this boundary.
:class:`MemoryTransport` (trinity ``p2p/tools/memory_transport.py``) connects two endpoints without sockets:
what one writes, the other reads.
"""

from __future__ import annotations

import asyncio

from devp2p.abc import TransportAPI
from devp2p.errors import ConnectionLost

__all__ = ["MemoryTransport", "StreamTransport", "open_connection"]

#: How long a graceful close may take to flush queued data before the transport is aborted.
CLOSE_FLUSH_TIMEOUT = 1.0


class StreamTransport(TransportAPI):
    """A :class:`~devp2p.abc.TransportAPI` over an asyncio TCP stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        peer = writer.get_extra_info("peername")
        self._remote: tuple[str, int] | None = (str(peer[0]), int(peer[1])) if peer else None

    async def read_exactly(self, n: int) -> bytes:
        """Return exactly ``n`` bytes; ConnectionLost on EOF or a socket error."""
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError as err:
            raise ConnectionLost(f"EOF after {len(err.partial)} of {n} bytes") from err
        except OSError as err:
            raise ConnectionLost(f"read failed: {err}") from err

    def write(self, data: bytes) -> None:
        """Queue ``data``; ConnectionLost if the stream is closing."""
        if self._writer.is_closing():
            raise ConnectionLost("transport is closed")
        self._writer.write(data)

    async def drain(self) -> None:
        """Wait for the send buffer to drain below the high-water mark."""
        try:
            await self._writer.drain()
        except OSError as err:
            raise ConnectionLost(f"write failed: {err}") from err

    def close(self) -> None:
        """Close after flushing queued data."""
        self._writer.close()

    async def wait_closed(self) -> None:
        """Wait for the close to finish; abort if flushing takes longer than :data:`CLOSE_FLUSH_TIMEOUT`."""
        try:
            async with asyncio.timeout(CLOSE_FLUSH_TIMEOUT):
                await self._writer.wait_closed()
        except (TimeoutError, OSError):
            self.abort()

    def abort(self) -> None:
        """Drop the connection immediately."""
        self._writer.transport.abort()

    @property
    def remote_address(self) -> tuple[str, int] | None:
        """The socket's peer address."""
        return self._remote

    @property
    def is_closing(self) -> bool:
        """Whether the stream is closing or closed."""
        return self._writer.is_closing()


async def open_connection(host: str, port: int, *, timeout: float) -> StreamTransport:
    """Open a TCP connection within ``timeout`` seconds; ConnectionLost if it cannot be made."""
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError) as err:
        raise ConnectionLost(f"cannot connect to {host}:{port}: {err or 'timeout'}") from err
    return StreamTransport(reader, writer)


class MemoryTransport(TransportAPI):
    """One end of an in-memory connected pair; see :meth:`connected_pair`.

    Writes are delivered to the other end's buffer immediately, so :meth:`drain` never waits. Closing one
    end gives the other EOF after the data already written, like a TCP FIN.
    """

    def __init__(self, remote_address: tuple[str, int] | None = None) -> None:
        self._inbox = asyncio.StreamReader()
        self._peer: MemoryTransport | None = None
        self._closing = False
        self._closed = asyncio.Event()
        self._remote = remote_address
        #: Every byte this end has written, for tests that replay or tamper with captured traffic.
        self.sent = bytearray()

    @classmethod
    def connected_pair(
        cls,
        address_a: tuple[str, int] = ("127.0.0.1", 1),
        address_b: tuple[str, int] = ("127.0.0.1", 2),
    ) -> tuple[MemoryTransport, MemoryTransport]:
        """Return two connected ends; ``a`` sees ``address_b`` as its remote and vice versa."""
        a, b = cls(address_b), cls(address_a)
        a._peer, b._peer = b, a
        return a, b

    def feed(self, data: bytes) -> None:
        """Inject bytes as if the remote had written them (tests)."""
        self._inbox.feed_data(data)

    async def read_exactly(self, n: int) -> bytes:
        """Return exactly ``n`` bytes; ConnectionLost on EOF."""
        try:
            return await self._inbox.readexactly(n)
        except asyncio.IncompleteReadError as err:
            raise ConnectionLost(f"EOF after {len(err.partial)} of {n} bytes") from err

    def write(self, data: bytes) -> None:
        """Deliver ``data`` to the other end."""
        if self._closing or self._peer is None:
            raise ConnectionLost("transport is closed")
        self.sent += data
        if not self._peer._closing:
            self._peer._inbox.feed_data(bytes(data))

    async def drain(self) -> None:
        """Never waits: memory delivery is immediate."""
        if self._closing:
            raise ConnectionLost("transport is closed")

    def close(self) -> None:
        """Close this end; the other end reads EOF."""
        if self._closing:
            return
        self._closing = True
        self._inbox.feed_eof()
        if self._peer is not None and not self._peer._closing:
            self._peer._inbox.feed_eof()
        self._closed.set()

    async def wait_closed(self) -> None:
        """Return once :meth:`close` has run."""
        await self._closed.wait()

    def abort(self) -> None:
        """Same as :meth:`close` (nothing is buffered)."""
        self.close()

    @property
    def remote_address(self) -> tuple[str, int] | None:
        """The address given to :meth:`connected_pair` for the other end."""
        return self._remote

    @property
    def is_closing(self) -> bool:
        """Whether this end was closed."""
        return self._closing
