"""14/WAKU2-MESSAGE: the message record, its deterministic hash, REST hex, and the v1 bridge mapping.

Sources: docs/protocol-notes.md §11.1 (fields), §11.2 (hash bytes and vectors), §11.5 (v1 ↔ v2);
docs/design.md "Messaging API decisions".

Hash: ``sha256(pubsub_topic_utf8 ‖ payload ‖ content_topic_utf8 ‖ meta ‖ timestamp_8_bytes_BE)``. Like
nwaku (``toBytesBE(uint64(msg.timestamp))``) and go-waku, an absent timestamp is 0 and still contributes 8
bytes (js-waku omits it when 0: the interop trap in protocol-notes §11.2); a negative ``sint64`` timestamp is
hashed as its two's-complement ``uint64``. An absent ``meta`` contributes nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from wakucodec.contenttopic import v1_topic_to_content_topic
from wakucodec.errors import InvalidPayload, SizeLimitExceeded

__all__ = [
    "DEFAULT_PUBSUB_TOPIC",
    "MAX_META_SIZE",
    "V1_BRIDGE_VERSION",
    "WakuMessage",
    "from_hex",
    "message_from_v1",
    "message_hash",
    "to_hex",
]

#: The legacy default pubsub topic (still in old data; nwaku's bridge published on it).
DEFAULT_PUBSUB_TOPIC = "/waku/2/default-waku/proto"
#: 14/WAKU2-MESSAGE: ``meta`` is at most 64 bytes.
MAX_META_SIZE = 64
#: Payload ``version`` of a message wrapped by the v1 bridge (26/WAKU-PAYLOAD).
V1_BRIDGE_VERSION = 1

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_UINT32_MAX = 2**32 - 1
_NS_PER_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class WakuMessage:
    """A 14/WAKU2-MESSAGE; field numbers in the comments are the protobuf tags."""

    #: (1) Application payload.
    payload: bytes
    #: (2) Content topic string (not validated here; see :meth:`ContentTopic.parse`).
    content_topic: str
    #: (3) Payload encoding version, uint32; absent = 0 (1 = 26/WAKU-PAYLOAD, 2 = Noise).
    version: int = 0
    #: (10) Sender timestamp in Unix nanoseconds, sint64; absent = 0.
    timestamp: int = 0
    #: (11) Application metadata, at most 64 bytes; absent = ``b""``.
    meta: bytes = b""
    #: (31) Ephemeral messages are relayed but never archived.
    ephemeral: bool = False
    #: (21) RLN proof, opaque here.
    rate_limit_proof: bytes = b""

    def __post_init__(self) -> None:
        for name in ("payload", "meta", "rate_limit_proof"):
            if not isinstance(getattr(self, name), (bytes, bytearray)):
                raise InvalidPayload(f"{name} must be bytes")
        if not isinstance(self.content_topic, str):
            raise InvalidPayload("content_topic must be a string")
        if len(self.meta) > MAX_META_SIZE:
            raise SizeLimitExceeded("meta", len(self.meta), MAX_META_SIZE)
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise InvalidPayload("version must be an int")
        if not 0 <= self.version <= _UINT32_MAX:
            raise InvalidPayload(f"version {self.version} is not a uint32")
        if isinstance(self.timestamp, bool) or not isinstance(self.timestamp, int):
            raise InvalidPayload("timestamp must be an int")
        if not _INT64_MIN <= self.timestamp <= _INT64_MAX:
            raise InvalidPayload(f"timestamp {self.timestamp} is not a sint64")
        object.__setattr__(self, "payload", bytes(self.payload))
        object.__setattr__(self, "meta", bytes(self.meta))
        object.__setattr__(self, "rate_limit_proof", bytes(self.rate_limit_proof))

    def hash(self, pubsub_topic: str = DEFAULT_PUBSUB_TOPIC) -> bytes:
        """This message's deterministic hash on ``pubsub_topic`` (see :func:`message_hash`)."""
        return message_hash(pubsub_topic, self)


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates cannot be sent as protobuf strings
        raise InvalidPayload(f"{what} is not valid unicode") from err


def message_hash(pubsub_topic: str, msg: WakuMessage) -> bytes:
    """Return the 32-byte 14/WAKU2-MESSAGE deterministic hash of ``msg`` published on ``pubsub_topic``."""
    h = hashlib.sha256(_utf8(pubsub_topic, "pubsub topic"))
    h.update(msg.payload)
    h.update(_utf8(msg.content_topic, "content topic"))
    h.update(msg.meta)
    h.update((msg.timestamp & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "big"))
    return h.digest()


def message_from_v1(topic: bytes, data: bytes, sent: int) -> WakuMessage:
    """The WakuMessage nwaku's bridge made from a v1 envelope: Data → payload, sent time → timestamp (ns).

    ``sent`` is the envelope's ``Expiry - TTL`` in seconds; version 1 because ``Data`` is already a
    26/WAKU-PAYLOAD (Whisper v6 payload) (protocol-notes §11.5).
    """
    return WakuMessage(
        payload=data,
        content_topic=v1_topic_to_content_topic(topic),
        version=V1_BRIDGE_VERSION,
        timestamp=sent * _NS_PER_SECOND,
    )


def to_hex(data: bytes) -> str:
    """Render bytes the way the REST API does: ``0x``-prefixed lowercase hex (``0x`` for empty)."""
    return "0x" + bytes(data).hex()


def from_hex(text: str, *, length: int | None = None) -> bytes:
    """Parse REST hex: ``0x``/``0X`` prefix required, digits of either case, optional exact byte ``length``.

    Raises :class:`InvalidPayload` on anything else.
    """
    if not isinstance(text, str) or text[:2] not in ("0x", "0X"):
        raise InvalidPayload("hex value must start with 0x")
    digits = text[2:]
    if len(digits) % 2 or not all(c in "0123456789abcdefABCDEF" for c in digits):
        raise InvalidPayload(f"invalid hex value {text!r:.80}")
    value = bytes.fromhex(digits)
    if length is not None and len(value) != length:
        raise InvalidPayload(f"expected {length} bytes of hex, got {len(value)}")
    return value
