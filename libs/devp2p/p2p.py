"""The devp2p base protocol ("p2p", ids 0x00–0x0f): Hello, Disconnect, Ping, Pong (protocol-notes §5.6, §5.7).

One class per command with its id, payload type and codec (trinity ``p2p/p2p_proto.py``). Payloads are
plain RLP; snappy is applied by the connection, never to Hello. Decoders are as lenient as geth's:

- Hello ``[protocolVersion, clientId, [[capName, capVersion], …], listenPort, nodeId, …]`` — extra elements
  (also inside a capability) are ignored (geth ``rlp:"tail"``). The node id is decoded as any byte string and
  checked by the connection, so a wrong length gets ``DiscInvalidIdentity`` rather than "malformed".
- Disconnect ``[reason]``; a bare ``reason`` is accepted too, and anything undecodable means "requested"
  (geth ignores the decode error and reads the zero value).
- Ping / Pong ``[]``; the payload is not inspected (geth discards it).
"""

from __future__ import annotations

from devp2p import constants as c
from devp2p.abc import Command
from devp2p.errors import DisconnectReason, MalformedMessage, as_reason
from devp2p.hello import Capability, HelloPayload
from wakucodec import rlp
from wakucodec.errors import CodecError
from wakucodec.rlp import Encodable

__all__ = ["Disconnect", "Hello", "Ping", "Pong", "loggable"]

_EMPTY_LIST = rlp.encode([])


def loggable(value: str, limit: int = c.MAX_LOGGED_STRING) -> str:
    """Trim a peer-supplied string for logs: printable only, at most ``limit`` (trinity ``loggable``)."""
    cleaned = "".join(ch if ch.isprintable() else "?" for ch in value[: limit + 1])
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"


def _uint(item: rlp.Item, what: str) -> int:
    try:
        return rlp.to_uint(item, 64, what)
    except CodecError as err:
        raise MalformedMessage(str(err)) from err


def _decode_capability(item: rlp.Item) -> Capability:
    if not isinstance(item, list) or len(item) < 2 or not isinstance(item[0], bytes):
        raise MalformedMessage("Hello capability must be [name, version, …]")
    return Capability(item[0].decode("latin-1"), _uint(item[1], "capability version"))


class Hello(Command[HelloPayload]):
    """Message 0x00: the protocol handshake, sent by both sides right after the encryption handshake."""

    code = c.HELLO_CODE

    @classmethod
    def encode(cls, payload: HelloPayload) -> bytes:
        """RLP of the five Hello fields."""
        caps: list[Encodable] = [[cap.name.encode("latin-1"), cap.version] for cap in payload.capabilities]
        return rlp.encode(
            [payload.version, payload.client_id.encode(), caps, payload.listen_port, payload.node_id]
        )

    @classmethod
    def decode(cls, data: bytes) -> HelloPayload:
        """Decode a Hello; MessageTooLarge is the connection's job (2 KiB, checked before reading)."""
        try:
            item = rlp.decode(data)
        except CodecError as err:
            raise MalformedMessage(f"Hello is not valid RLP: {err}") from err
        if not isinstance(item, list) or len(item) < 5:
            raise MalformedMessage("Hello must be a list of at least 5 elements")
        version, name, caps, port, node_id = item[:5]
        if not isinstance(name, bytes) or not isinstance(caps, list) or not isinstance(node_id, bytes):
            raise MalformedMessage("Hello has a list where a string is expected, or vice versa")
        return HelloPayload(
            version=_uint(version, "Hello version"),
            client_id=name.decode("utf-8", errors="replace"),
            capabilities=tuple(_decode_capability(cap) for cap in caps),
            listen_port=_uint(port, "Hello listen port"),
            node_id=node_id,
        )


class Disconnect(Command[int]):
    """Message 0x01: ``[reason]``; the payload type is the reason code (a DisconnectReason when known)."""

    code = c.DISCONNECT_CODE

    @classmethod
    def encode(cls, payload: int) -> bytes:
        """``[reason]`` — what geth sends (reason 0 encodes as ``c1 80``)."""
        return rlp.encode([int(payload)])

    @classmethod
    def decode(cls, data: bytes) -> int:
        """Return the reason of ``[reason]`` or a bare ``reason``; ``REQUESTED`` when it does not decode."""
        try:
            item = rlp.decode(data)
            if isinstance(item, list):
                item = item[0] if item else b""
            return as_reason(rlp.to_uint(item, 8, "disconnect reason"))
        except CodecError:
            return DisconnectReason.REQUESTED


class Ping(Command[None]):
    """Message 0x02: ``[]``; answered with Pong."""

    code = c.PING_CODE

    @classmethod
    def encode(cls, payload: None) -> bytes:
        """The empty list ``c0``."""
        return _EMPTY_LIST

    @classmethod
    def decode(cls, data: bytes) -> None:
        """Accept any payload (geth discards it)."""


class Pong(Command[None]):
    """Message 0x03: ``[]``; the answer to Ping."""

    code = c.PONG_CODE

    @classmethod
    def encode(cls, payload: None) -> bytes:
        """The empty list ``c0``."""
        return _EMPTY_LIST

    @classmethod
    def decode(cls, data: bytes) -> None:
        """Accept any payload (geth discards it)."""
