"""One RLPx session: framed, timed message I/O and session set-up (handshake + Hello; protocol-notes
§5.2–§5.7).

:func:`establish` runs the whole set-up within ``handshake_timeout`` (geth applies ``handshakeTimeout`` to the
encryption handshake and to the protocol handshake): encryption handshake → an optional check on the proven
remote key (server limits: too many peers, already connected, self) → Hello exchange → identity checks.
On failure it sends a Disconnect when there is a session and a reason to give, closes the transport and
raises; the caller counts the error by type.

:class:`Connection` is what :class:`~devp2p.peer.Peer` reads and writes through: reads are bounded by the
frame read timeout and the size limits, writes are serialised by a per-connection lock and bounded by the
write timeout. Before Hello completes, frames over :data:`~devp2p.constants.MAX_PRE_HELLO_FRAME_SIZE` are
refused unread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from devp2p import constants as c
from devp2p import handshake
from devp2p.abc import TransportAPI
from devp2p.config import SessionConfig
from devp2p.errors import (
    ConnectionLost,
    DevP2PError,
    DisconnectReason,
    HandshakeTimeout,
    InvalidIdentity,
    MessageTooLarge,
    PeerDisconnected,
    ProtocolError,
    ReadTimeout,
    UnexpectedIdentity,
    WriteTimeout,
)
from devp2p.frame import FrameCodec
from devp2p.hello import HelloPayload
from devp2p.messages import decode_frame_data, encode_frame_data
from devp2p.p2p import Disconnect, Hello

__all__ = ["Connection", "PostHandshakeCheck", "establish", "exchange_hello"]

log = logging.getLogger(__name__)

#: Called with the remote's proven public key after the encryption handshake; returns a reason to refuse.
PostHandshakeCheck = Callable[[bytes], DisconnectReason | None]


class Connection:
    """Framed message I/O over an established RLPx session."""

    def __init__(self, transport: TransportAPI, secrets: handshake.Secrets, config: SessionConfig) -> None:
        self.transport = transport
        self.config = config
        #: The remote's static public key, proven by the encryption handshake.
        self.remote_pubkey = secrets.remote_pubkey
        #: Snappy on both directions; switched on after Hello when the remote version is ≥ 5 (§5.5).
        self.snappy = False
        self._codec = FrameCodec.from_secrets(secrets)
        self._write_lock = asyncio.Lock()
        self._max_frame = min(c.MAX_PRE_HELLO_FRAME_SIZE, config.max_frame_size)

    def hello_completed(self, remote_version: int) -> None:
        """Switch to post-Hello rules: snappy per the remote's version, full frame size limit."""
        self.snappy = remote_version >= c.SNAPPY_PROTOCOL_VERSION
        self._max_frame = self.config.max_frame_size

    async def read_message(self, *, timeout: float | None = None) -> tuple[int, bytes]:
        """Read one message: ``(wire id, data)``, data decompressed; ReadTimeout after ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                frame = await self._codec.read_frame(self.transport, max_size=self._max_frame)
        except TimeoutError as err:
            raise ReadTimeout(f"no complete frame within {timeout} s") from err
        return decode_frame_data(frame, snappy=self.snappy, max_size=self.config.max_message_size)

    async def write_message(self, code: int, payload: bytes, *, timeout: float | None = None) -> None:
        """Frame and send one message; WriteTimeout if not drained within ``timeout`` (default: config)."""
        data = encode_frame_data(code, payload, snappy=self.snappy)
        limit = self.config.frame_write_timeout if timeout is None else timeout
        async with self._write_lock:
            # Encode + write run without an await in between: the egress MAC/CTR order is the wire order.
            self.transport.write(self._codec.encode(data))
            try:
                async with asyncio.timeout(limit):
                    await self.transport.drain()
            except TimeoutError as err:
                self.transport.abort()
                raise WriteTimeout(f"write did not drain within {limit} s") from err

    async def send_disconnect(self, reason: int) -> None:
        """Best effort: send Disconnect ``[reason]`` within the disconnect write timeout; never raises."""
        try:
            await self.write_message(
                c.DISCONNECT_CODE, Disconnect.encode(reason), timeout=self.config.disconnect_write_timeout
            )
        except (DevP2PError, OSError) as err:
            log.debug("could not send Disconnect(%#x): %s", reason, err)

    async def close(self) -> None:
        """Close the transport after flushing (bounded), aborting if the flush stalls."""
        self.transport.close()
        await self.transport.wait_closed()


async def exchange_hello(conn: Connection, ours: HelloPayload) -> HelloPayload:
    """Send our Hello, read the remote's, check its identity, switch snappy on (geth ``doProtoHandshake``).

    Raises PeerDisconnected if the remote sends Disconnect instead, ProtocolError for any other message,
    InvalidIdentity / UnexpectedIdentity for a bad node id. No timeout of its own.
    """
    await conn.write_message(c.HELLO_CODE, Hello.encode(ours))
    code, data = await conn.read_message()
    if code == c.DISCONNECT_CODE:
        raise PeerDisconnected(Disconnect.decode(data), remote=True, detail="instead of Hello")
    if code != c.HELLO_CODE:
        raise ProtocolError(f"expected Hello, got message 0x{code:x}")
    if len(data) > c.BASE_PROTOCOL_MAX_MSG_SIZE:
        raise MessageTooLarge("Hello", len(data), c.BASE_PROTOCOL_MAX_MSG_SIZE)
    hello = Hello.decode(data)
    if len(hello.node_id) != c.NODE_ID_LENGTH or not any(hello.node_id):
        raise InvalidIdentity("Hello node id must be 64 non-zero bytes")
    if hello.node_id != conn.remote_pubkey:
        raise UnexpectedIdentity("Hello node id differs from the handshake public key")
    conn.hello_completed(hello.version)
    return hello


async def establish(
    transport: TransportAPI,
    node_key: bytes,
    hello: HelloPayload,
    config: SessionConfig,
    *,
    remote_pubkey: bytes | None = None,
    check: PostHandshakeCheck | None = None,
) -> tuple[Connection, HelloPayload]:
    """Set up a session: we dial when ``remote_pubkey`` is given, else we answer. All within the timeout.

    Returns the connection (snappy set) and the remote Hello. On any failure the transport is closed, a
    Disconnect is sent first where a session exists and the error carries a reason, and the error is
    re-raised: HandshakeError / HandshakeTimeout / PeerDisconnected (ours from ``check``, or the remote's) /
    ProtocolError / MalformedMessage / MessageTooLarge / BadMAC / ConnectionLost.
    """
    conn: Connection | None = None
    try:
        try:
            async with asyncio.timeout(config.handshake_timeout):
                if remote_pubkey is None:
                    secrets = await handshake.respond(
                        transport, node_key, max_packet_size=config.max_handshake_packet_size
                    )
                else:
                    secrets = await handshake.initiate(
                        transport, node_key, remote_pubkey, max_packet_size=config.max_handshake_packet_size
                    )
                conn = Connection(transport, secrets, config)
                refusal = check(secrets.remote_pubkey) if check is not None else None
                if refusal is not None:
                    raise PeerDisconnected(
                        refusal, remote=False, detail="refused after the encryption handshake"
                    )
                remote_hello = await exchange_hello(conn, hello)
        except TimeoutError as err:
            raise HandshakeTimeout(f"handshake not completed within {config.handshake_timeout} s") from err
    except PeerDisconnected as err:
        if conn is not None and not err.remote:
            await conn.send_disconnect(err.reason)
        await _close(transport)
        raise
    except (DevP2PError, OSError) as err:
        reason = err.disconnect_reason if isinstance(err, DevP2PError) else None
        if conn is not None and reason is not None:
            await conn.send_disconnect(reason)
        await _close(transport)
        if isinstance(err, OSError):
            raise ConnectionLost(str(err)) from err
        raise
    except BaseException:
        transport.abort()
        raise
    return conn, remote_hello


async def _close(transport: TransportAPI) -> None:
    transport.close()
    await transport.wait_closed()
