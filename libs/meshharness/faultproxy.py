"""A TCP proxy with injectable network faults, put between two services in tests.

A test points a client at :attr:`FaultProxy.address` instead of its dependency (``INGEST_ARCHIVE_ADDR``) and
switches the fault while traffic flows. Each mode applies at once to the connections already open and to new
ones, until :meth:`FaultProxy.clear`:

- :meth:`~FaultProxy.latency` — every byte is delivered ``delay_s`` later, in order, both ways (throughput
  is unchanged: reading continues while earlier bytes wait);
- :meth:`~FaultProxy.reset` — every open connection is aborted with a TCP RST, and so is each new one right
  after it is accepted (a crashed process behind a live address);
- :meth:`~FaultProxy.blackhole` — connections are accepted and nothing more: the proxy stops reading either
  side and new connections are never forwarded (a partition; the peer sees silence, not an error). Bytes
  the kernel buffered meanwhile are delivered once the fault clears, as TCP would after the partition heals;
- :meth:`~FaultProxy.slow_reads` — the proxy reads each side at most ``bytes_per_s`` (a slow or overloaded
  receiver: the sender's writes back up through TCP flow control).

Nothing is injected by guessing at time: the fault is on from the call that sets it to :meth:`clear`, so a
test orders "fault on → call ends → fault off" and learns whether the call ended by its own deadline.

:class:`ProxyStats` counts connections and, for HTTP/2 (gRPC) traffic, the request streams clients opened —
one HEADERS frame per RPC attempt, so gRPC's own retries are counted too (RFC 9113 §4.1, §6.2, §8.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass
from enum import Enum

__all__ = ["Fault", "FaultProxy", "ProxyStats"]

_CHUNK = 65536
_SLOW_CHUNK = 512
# RFC 9113 §3.4: the client connection preface, then frames with a 9-byte header (§4.1).
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER = 9
_HEADERS = 0x1
_PING = 0x6
_ACK = 0x1


class Fault(Enum):
    """The proxy's current mode."""

    NONE = "none"
    LATENCY = "latency"
    RESET = "reset"
    BLACKHOLE = "blackhole"
    SLOW_READS = "slow_reads"


@dataclass
class ProxyStats:
    """What went through the proxy since it started (or since :meth:`FaultProxy.reset_stats`)."""

    connections: int = 0
    """Connections accepted."""
    resets: int = 0
    """Connections the proxy aborted with an RST."""
    requests: int = 0
    """HTTP/2 request streams opened by clients (HEADERS frames client → server): gRPC call attempts."""
    pings: int = 0
    """HTTP/2 PINGs clients sent (not their acks): keepalive."""
    bytes_up: int = 0
    """Bytes forwarded client → upstream."""
    bytes_down: int = 0
    """Bytes forwarded upstream → client."""


class _Http2Counter:
    """Counts HEADERS frames in a client's byte stream (a frame header may straddle two reads)."""

    def __init__(self) -> None:
        self._buffer = b""
        self._preface_left = len(_PREFACE)
        self._skip = 0  # payload bytes of the current frame still to pass
        self.active = True

    def feed(self, data: bytes) -> tuple[int, int]:
        """Consume ``data``; return the HEADERS frames and the PINGs (not acks) that started in it."""
        if not self.active:
            return 0, 0
        if self._preface_left:
            offset = len(_PREFACE) - self._preface_left
            head = data[: self._preface_left]
            if head != _PREFACE[offset : offset + len(head)]:
                self.active = False  # not HTTP/2 (an RLPx stream): nothing to count
                return 0, 0
            self._preface_left -= len(head)
            data = data[len(head) :]
        headers = pings = 0
        while data:
            if self._skip:
                step = min(self._skip, len(data))
                self._skip -= step
                data = data[step:]
                continue
            need = _FRAME_HEADER - len(self._buffer)
            self._buffer += data[:need]
            data = data[need:]
            if len(self._buffer) < _FRAME_HEADER:
                break
            length = struct.unpack(">I", b"\0" + self._buffer[:3])[0]
            kind, flags = self._buffer[3], self._buffer[4]
            headers += kind == _HEADERS
            pings += kind == _PING and not flags & _ACK
            self._buffer = b""
            self._skip = length
        return headers, pings


class _Link:
    """One proxied connection: the client side, the upstream side and the two pumps between them."""

    def __init__(self, proxy: FaultProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = (reader, writer)
        self.upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.counter = _Http2Counter()

    def writers(self) -> list[asyncio.StreamWriter]:
        return [self.client[1], *([self.upstream[1]] if self.upstream is not None else [])]

    def abort(self) -> None:
        """End both sides with an RST (SO_LINGER 0), not a FIN: what a crashed or reset peer looks like."""
        for writer in self.writers():
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.tasks:
            task.cancel()

    async def run(self) -> None:
        await self.proxy._flowing.wait()  # a black hole accepts and then never answers
        if self.proxy.mode is Fault.RESET:
            self.proxy.stats.resets += 1
            self.abort()
            return
        try:
            self.upstream = await asyncio.open_connection(*self.proxy.upstream)
        except OSError:
            self.abort()  # nothing listens upstream: the client sees its connection reset
            return
        up_reader, up_writer = self.upstream
        self.tasks = [
            asyncio.create_task(self._pump(self.client[0], up_writer, upward=True)),
            asyncio.create_task(self._pump(up_reader, self.client[1], upward=False)),
        ]
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for writer in self.writers():
            writer.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, upward: bool
    ) -> None:
        proxy = self.proxy
        delayed: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.create_task(self._send_later(delayed, writer))
        try:
            while True:
                await proxy._flowing.wait()
                slow = proxy.mode is Fault.SLOW_READS
                data = await reader.read(_SLOW_CHUNK if slow else _CHUNK)
                if not data:
                    break
                if upward:
                    requests, pings = self.counter.feed(data)
                    proxy.stats.requests += requests
                    proxy.stats.pings += pings
                    proxy.stats.bytes_up += len(data)
                else:
                    proxy.stats.bytes_down += len(data)
                loop = asyncio.get_running_loop()
                delay = proxy.delay_s if proxy.mode is Fault.LATENCY else 0.0
                delayed.put_nowait((loop.time() + delay, data))
                if slow:
                    await asyncio.sleep(len(data) / proxy.bytes_per_s)  # the rate limit itself, not a sync
            await delayed.join()
            with contextlib.suppress(OSError):
                writer.write_eof()
        except (ConnectionError, OSError):
            self.abort()
        finally:
            sender.cancel()

    async def _send_later(
        self, delayed: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter
    ) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due, data = await delayed.get()
            if due > loop.time():
                await asyncio.sleep(due - loop.time())  # injected latency: the point of this mode
            await self.proxy._flowing.wait()
            try:
                writer.write(data)
                await writer.drain()
            except (ConnectionError, OSError):
                self.abort()
                return
            finally:
                delayed.task_done()


class FaultProxy:
    """A loopback TCP proxy to ``upstream`` (``host:port``) whose faults a test switches (module doc)."""

    def __init__(self, upstream: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        up_host, _, up_port = upstream.rpartition(":")
        self.upstream = (up_host.strip("[]"), int(up_port))
        self._bind = (host, port)
        self.mode = Fault.NONE
        self.delay_s = 0.0
        self.bytes_per_s = 1.0
        self.stats = ProxyStats()
        self._links: set[_Link] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None

    async def start(self) -> FaultProxy:
        """Listen (call once, from the event loop that will run the proxy); returns self."""
        self._server = await asyncio.start_server(self._accept, *self._bind)
        return self

    @property
    def port(self) -> int:
        """The port the proxy listens on."""
        assert self._server is not None, "start() first"
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        """``host:port`` to give the client instead of the upstream's address."""
        return f"{self._bind[0]}:{self.port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats.connections += 1
        link = _Link(self, reader, writer)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)

    def _set(self, mode: Fault) -> None:
        self.mode = mode
        if mode is Fault.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()

    def clear(self) -> None:
        """No fault: forward everything at once (black-holed bytes and connections go through now)."""
        self._set(Fault.NONE)

    def latency(self, delay_s: float) -> None:
        """Deliver every byte ``delay_s`` seconds after it arrived, both ways."""
        self.delay_s = delay_s
        self._set(Fault.LATENCY)

    def reset(self) -> None:
        """Abort every open connection with an RST, and each new one as soon as it is accepted."""
        self._set(Fault.RESET)
        for link in list(self._links):
            self.stats.resets += 1
            link.abort()

    def blackhole(self) -> None:
        """Stop reading both sides of every connection, and forward no new one (accepted, never answered)."""
        self._set(Fault.BLACKHOLE)

    def slow_reads(self, bytes_per_s: float) -> None:
        """Read each side at most ``bytes_per_s`` (in 512-byte reads)."""
        self.bytes_per_s = bytes_per_s
        self._set(Fault.SLOW_READS)

    def reset_stats(self) -> ProxyStats:
        """Return the counts so far and start new ones."""
        stats, self.stats = self.stats, ProxyStats()
        return stats

    async def close(self) -> None:
        """Stop listening and abort every connection."""
        if self._server is not None:
            self._server.close()
        self._flowing.set()
        for link in list(self._links):
            link.abort()
        if self._server is not None:
            await self._server.wait_closed()
