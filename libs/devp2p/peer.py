"""A running devp2p session: read loop, ping loop, subprotocol dispatch and teardown (geth ``p2p/peer.go``).

Tasks per peer (all owned by :meth:`Peer.run`):

- **read loop** — reads each message within the frame read timeout; answers Ping (via the ping loop, so a
  slow remote reader never blocks reading), resolves Pongs, ends the session on Disconnect, ignores other
  base-protocol ids, routes ids ≥ 0x10 through the :class:`~devp2p.capabilities.CapabilityTable` into the
  protocol's bounded queue (an id outside every range → Disconnect 0x02, geth "msg code out of range");
- **ping loop** — sends our Ping every ``ping_interval`` and the Pongs the read loop asks for;
- **one task per negotiated subprotocol** — ``on_start``, then ``handle`` for each queued message.

The first task to fail decides the reason (geth ``Peer.run``): remote Disconnect → its reason, nothing sent;
read timeout → 0x0b; bad frame / oversized / malformed / invalid id → 0x02; handler error → 0x10 (0x02 for a
ProtocolError or MalformedMessage); transport failure → 0x01, nothing sent. Then every task is cancelled,
the Disconnect (if any) is written within 1 s, the transport is closed and ``on_stop`` runs for each
protocol that was started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from devp2p import constants as c
from devp2p.abc import PeerAPI, SubProtocol
from devp2p.capabilities import CapabilityTable, NegotiatedProtocol
from devp2p.connection import Connection
from devp2p.errors import (
    ConnectionLost,
    DevP2PError,
    DisconnectReason,
    MalformedMessage,
    MessageTooLarge,
    PeerDisconnected,
    ProtocolError,
    WriteTimeout,
    reason_name,
)
from devp2p.hello import HelloPayload
from devp2p.p2p import Disconnect, Ping, Pong, loggable
from wakucodec.keccak import keccak256

__all__ = ["Peer", "SessionEnd"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SessionEnd:
    """How a session ended."""

    reason: int
    """Disconnect reason sent or received (DisconnectReason when known)."""
    remote: bool
    """True when the remote sent the Disconnect (or closed the connection)."""
    error: BaseException | None
    """The error that ended the session locally; None for a requested disconnect or a remote Disconnect."""


def _end_for(error: BaseException, *, from_handler: bool) -> SessionEnd:
    """Map the error that ended a task to the session end (geth ``discReasonForError``)."""
    if isinstance(error, PeerDisconnected):
        return SessionEnd(error.reason, remote=error.remote, error=None if error.remote else error)
    if isinstance(error, (ConnectionLost, WriteTimeout)):
        return SessionEnd(DisconnectReason.NETWORK_ERROR, remote=True, error=error)
    if isinstance(error, (ProtocolError, MalformedMessage, MessageTooLarge)):
        return SessionEnd(
            error.disconnect_reason or DisconnectReason.PROTOCOL_ERROR, remote=False, error=error
        )
    if isinstance(error, DevP2PError) and not from_handler:
        reason = error.disconnect_reason
        return SessionEnd(
            reason if reason is not None else DisconnectReason.NETWORK_ERROR, reason is None, error
        )
    return SessionEnd(DisconnectReason.SUBPROTOCOL_ERROR, remote=False, error=error)


def _drop_frames(error: BaseException) -> None:
    """Clear the tracebacks of ``error`` and of the exceptions it was raised from or during.

    The error is kept in :attr:`Peer.session_end`, and its traceback's frames reference this peer (``self``)
    and whatever they were handling — for a packet refused as oversized, the whole packet. That is a
    reference cycle (peer → session end → error → traceback → frame → peer) which only the cyclic garbage
    collector can free, and in a long-running process full collections are rare: every session ended by an
    error would keep its peer, connection, buffers and the offending message alive until one runs. The
    error's type, message and reason stay; only the frames go (a handler bug's are in the debug log).
    """
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.__traceback__ = None
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)


class Peer(PeerAPI):
    """A connected peer; create it with an established :class:`Connection` and call :meth:`run`."""

    def __init__(
        self, conn: Connection, hello: HelloPayload, table: CapabilityTable, *, inbound: bool
    ) -> None:
        self._conn = conn
        self._hello = hello
        self._table = table
        self._inbound = inbound
        self._remote_id_hash = keccak256(conn.remote_pubkey)
        self._queues = {
            n.protocol.name: asyncio.Queue[tuple[int, bytes]](conn.config.protocol_queue_size) for n in table
        }
        self._pongs_owed = 0
        self._wake_pinger = asyncio.Event()
        self._ping_waiters: deque[asyncio.Future[None]] = deque()
        self._stop: asyncio.Future[SessionEnd] | None = None
        self._end: SessionEnd | None = None
        self._done = asyncio.Event()
        #: Monotonic time the session started (after Hello).
        self.connected_at = time.monotonic()
        #: Messages / payload bytes received and sent on this session (after Hello).
        self.messages_in = self.messages_out = self.bytes_in = self.bytes_out = 0

    # --- PeerAPI -----------------------------------------------------------------------------------------

    @property
    def remote_id(self) -> bytes:
        """The remote's 64-byte public key."""
        return self._conn.remote_pubkey

    @property
    def remote_id_hash(self) -> bytes:
        """keccak256 of the public key (geth ``enode.ID``)."""
        return self._remote_id_hash

    @property
    def hello(self) -> HelloPayload:
        """The remote's Hello."""
        return self._hello

    @property
    def client_id(self) -> str:
        """The remote's client id, trimmed for logs."""
        return loggable(self._hello.client_id)

    @property
    def inbound(self) -> bool:
        """True when the remote dialled us."""
        return self._inbound

    @property
    def remote_address(self) -> tuple[str, int] | None:
        """The remote socket address."""
        return self._conn.transport.remote_address

    @property
    def snappy(self) -> bool:
        """Whether snappy is on for this session."""
        return self._conn.snappy

    @property
    def capabilities(self) -> CapabilityTable:
        """The negotiated protocols and their id offsets."""
        return self._table

    @property
    def is_closed(self) -> bool:
        """Whether the session has ended or is ending."""
        return self._end is not None or (self._stop is not None and self._stop.done())

    @property
    def session_end(self) -> SessionEnd | None:
        """How the session ended, once it has."""
        return self._end

    async def send(self, protocol: SubProtocol | str, code: int, payload: bytes) -> None:
        """Send a subprotocol message; see :meth:`devp2p.abc.PeerAPI.send`."""
        wire_id = self._table.wire_id(protocol, code)
        await self._write(wire_id, payload)

    async def disconnect(self, reason: int = DisconnectReason.REQUESTED) -> None:
        """Disconnect with ``reason`` and wait for the teardown; a no-op if the session is already ending."""
        if self._end is not None:  # tearing down (perhaps we are inside on_stop) or done
            return
        end = SessionEnd(reason, remote=False, error=None)
        if self._stop is None:  # run() not started: tear down here
            await self._teardown(end, [])
            return
        if not self._stop.done():
            self._stop.set_result(end)
        await self._done.wait()

    # --- extras ------------------------------------------------------------------------------------------

    async def ping(self, timeout: float | None = None) -> float:
        """Send a Ping and wait for a Pong; return the round-trip time in seconds."""
        waiter = asyncio.get_running_loop().create_future()
        self._ping_waiters.append(waiter)
        start = time.monotonic()
        await self._write(c.PING_CODE, Ping.encode(None))
        async with asyncio.timeout(timeout):
            await waiter
        return time.monotonic() - start

    async def wait_closed(self) -> SessionEnd:
        """Wait for the session to end; return how it ended."""
        await self._done.wait()
        assert self._end is not None
        return self._end

    def __repr__(self) -> str:
        direction = "in" if self._inbound else "out"
        return f"<Peer {self.remote_id.hex()[:16]} {direction} {self.client_id!r}>"

    # --- internals ---------------------------------------------------------------------------------------

    def _request_end(self, end: SessionEnd) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(end)

    async def _write(self, wire_id: int, payload: bytes) -> None:
        if self.is_closed:
            end = self._end or (self._stop.result() if self._stop is not None else None)
            raise PeerDisconnected(
                end.reason if end else DisconnectReason.REQUESTED, remote=False, detail="closed"
            )
        try:
            await self._conn.write_message(wire_id, payload)
        except (ConnectionLost, WriteTimeout) as err:
            self._request_end(_end_for(err, from_handler=False))
            raise PeerDisconnected(DisconnectReason.NETWORK_ERROR, remote=False, detail=str(err)) from err
        self.messages_out += 1
        self.bytes_out += len(payload)

    async def _read_loop(self) -> None:
        timeout = self._conn.config.frame_read_timeout
        while True:
            code, data = await self._conn.read_message(timeout=timeout)
            self.messages_in += 1
            self.bytes_in += len(data)
            if code >= c.BASE_PROTOCOL_LENGTH:
                entry, local_code = self._table.resolve(code)
                await self._queues[entry.protocol.name].put((local_code, data))
                continue
            if len(data) > c.BASE_PROTOCOL_MAX_MSG_SIZE:
                raise MessageTooLarge("base protocol message", len(data), c.BASE_PROTOCOL_MAX_MSG_SIZE)
            if code == c.PING_CODE:
                self._pongs_owed += 1
                self._wake_pinger.set()
            elif code == c.PONG_CODE:
                while self._ping_waiters:  # skip waiters whose ping() timed out
                    waiter = self._ping_waiters.popleft()
                    if not waiter.done():
                        waiter.set_result(None)
                        break
            elif code == c.DISCONNECT_CODE:
                raise PeerDisconnected(Disconnect.decode(data), remote=True)
            # Anything else below 0x10 (a second Hello, unassigned ids) is ignored, as geth does.

    async def _ping_loop(self) -> None:
        interval = self._conn.config.ping_interval
        deadline = time.monotonic() + interval
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await self._wake_pinger.wait()
            self._wake_pinger.clear()
            while self._pongs_owed:
                self._pongs_owed -= 1
                await self._write(c.PONG_CODE, Pong.encode(None))
            if time.monotonic() >= deadline:
                await self._write(c.PING_CODE, Ping.encode(None))
                deadline = time.monotonic() + interval

    async def _run_protocol(self, entry: NegotiatedProtocol, started: list[SubProtocol]) -> None:
        proto = entry.protocol
        started.append(proto)
        await proto.on_start(self)
        queue = self._queues[proto.name]
        while True:
            code, payload = await queue.get()
            await proto.handle(self, code, payload)

    async def run(self) -> SessionEnd:
        """Serve the session until it ends; return how it ended. Never raises for session errors."""
        if self._end is not None:  # disconnect() before run()
            await self._done.wait()
            return self._end
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        started: list[SubProtocol] = []
        tasks: dict[asyncio.Task[None], bool] = {  # task → runs subprotocol code
            loop.create_task(self._read_loop(), name="devp2p-read"): False,
            loop.create_task(self._ping_loop(), name="devp2p-ping"): False,
        }
        for entry in self._table:
            tasks[loop.create_task(self._run_protocol(entry, started), name=f"devp2p-{entry.capability}")] = (
                True
            )
        watched: set[asyncio.Future[Any]] = {*tasks, self._stop}
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not self._stop.done():
                self._stop.set_result(self._first_failure(tasks))
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._teardown(self._stop.result(), started)
        assert self._end is not None
        return self._end

    def _first_failure(self, tasks: dict[asyncio.Task[None], bool]) -> SessionEnd:
        for task, is_handler in tasks.items():
            if task.done() and not task.cancelled() and task.exception() is not None:
                error = task.exception()
                assert error is not None
                return _end_for(error, from_handler=is_handler)
        return SessionEnd(DisconnectReason.QUITTING, remote=False, error=None)  # cancelled from outside

    async def _teardown(self, end: SessionEnd, started: list[SubProtocol]) -> None:
        self._end = end
        if not end.remote:
            await self._conn.send_disconnect(end.reason)
        await self._conn.close()
        for waiter in self._ping_waiters:
            if not waiter.done():
                waiter.set_exception(PeerDisconnected(end.reason, remote=end.remote, detail="before Pong"))
                waiter.exception()  # mark retrieved: nobody may be waiting any more
        if end.error is not None:
            # A handler bug (not a devp2p error) gets its traceback in the debug log: it is dropped next.
            unexpected = not isinstance(end.error, DevP2PError)
            log.debug(
                "peer %r ended (%s): %r",
                self,
                reason_name(end.reason),
                end.error,
                exc_info=end.error if unexpected else None,
            )
            _drop_frames(end.error)
        for proto in started:
            try:
                await proto.on_stop(self, end.reason)
            except Exception:
                log.exception("%r.on_stop failed for %r", proto, self)
        self._done.set()
