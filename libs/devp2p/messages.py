"""devp2p message encoding inside a frame: ``RLP(msg-id) ‖ msg-data``, snappy after Hello
(protocol-notes §5.5).

- The message id is an RLP *integer* (0 → ``0x80``, 16 → ``0x10``, 142 → ``0x81 0x8e``), canonical, ≤ uint64.
- When the remote's Hello version is ≥ 5, ``msg-data`` of every later message (ping/pong/disconnect too) is
  a raw snappy block (EIP-706); the Hello itself never is. The frame size counts the compressed bytes.
- The decoded length is read from the block's varint header and checked against the limit *before*
  decompressing (geth ``errPlainMessageTooLarge``), so a 5-byte block claiming 2 GiB allocates nothing.
"""

from __future__ import annotations

import cramjam

from devp2p import constants as c
from devp2p.errors import MalformedMessage, MessageTooLarge
from wakucodec import rlp

__all__ = [
    "decode_frame_data",
    "encode_frame_data",
    "frame_size_for",
    "snappy_compress",
    "snappy_decoded_length",
    "snappy_decompress",
    "snappy_max_encoded_length",
    "split_msg_id",
]

_UINT32_MAX = 2**32 - 1
_MAX_VARINT_BYTES = 5  # ceil(32 / 7): snappy's length header is a uint32 varint


def split_msg_id(frame_data: bytes) -> tuple[int, bytes]:
    """Split frame data into ``(message id, message data)``; MalformedMessage if the id is not canonical."""
    if not frame_data:
        raise MalformedMessage("empty frame")
    prefix = frame_data[0]
    if prefix < 0x80:
        if prefix == 0:  # 0 is 0x80; a 0x00 byte is the string "\x00" (geth SplitUint64: ErrCanonInt)
            raise MalformedMessage("message id 0 must be encoded as 0x80, not 0x00")
        return prefix, frame_data[1:]
    length = prefix - 0x80
    if length > 8:
        raise MalformedMessage("message id is not an RLP uint64")
    raw = frame_data[1 : 1 + length]
    if len(raw) != length:
        raise MalformedMessage("truncated message id")
    if length and raw[0] == 0:
        raise MalformedMessage("message id has leading zero bytes")
    if length == 1 and raw[0] < 0x80:
        raise MalformedMessage("single-byte message id must not have a string prefix")
    return int.from_bytes(raw, "big"), frame_data[1 + length :]


def snappy_decoded_length(block: bytes) -> int:
    """Return the decoded length declared by a raw snappy block's varint header (Go ``snappy.DecodedLen``)."""
    value = 0
    for i, byte in enumerate(block[:_MAX_VARINT_BYTES]):
        value |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if value > _UINT32_MAX:
                break
            return value
    raise MalformedMessage("corrupt snappy length header")


def snappy_max_encoded_length(size: int) -> int:
    """The largest raw snappy block ``size`` bytes can compress to (Go ``snappy.MaxEncodedLen``)."""
    return 32 + size + size // 6


def frame_size_for(max_message_size: int) -> int:
    """The frame size limit that lets every message of up to ``max_message_size`` bytes through, with or
    without snappy: the message id plus the message's worst-case compressed size (capped at the format's
    limit). A :class:`~devp2p.config.SessionConfig` that lowers ``max_message_size`` sets ``max_frame_size``
    to this, so larger messages are refused by their frame header, before the body is read."""
    return min(c.MAX_FRAME_SIZE, c.MAX_MSG_ID_LENGTH + snappy_max_encoded_length(max_message_size))


def snappy_compress(data: bytes) -> bytes:
    """Compress ``data`` into a raw snappy block (no framing), as Go ``snappy.Encode``."""
    return bytes(cramjam.snappy.compress_raw(data))


def snappy_decompress(block: bytes, *, max_size: int = c.SNAPPY_MAX_DECODED_SIZE) -> bytes:
    """Decompress a raw snappy block whose declared length is at most ``max_size`` (checked first)."""
    declared = snappy_decoded_length(block)
    if declared > max_size:
        raise MessageTooLarge("snappy-decoded message", declared, max_size)
    try:
        data = bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as err:
        raise MalformedMessage(f"corrupt snappy block: {err}") from err
    if len(data) != declared:  # pragma: no cover - the decoder enforces it; keep the invariant explicit
        raise MalformedMessage("snappy block decoded to a different length than declared")
    return data


def encode_frame_data(code: int, payload: bytes, *, snappy: bool) -> bytes:
    """Return ``RLP(code) ‖ payload`` with ``payload`` snappy-compressed when ``snappy`` is on."""
    if snappy:
        if len(payload) > c.SNAPPY_MAX_DECODED_SIZE:
            raise MessageTooLarge("message", len(payload), c.SNAPPY_MAX_DECODED_SIZE)
        payload = snappy_compress(payload)
    data = rlp.encode_uint(code) + payload
    if len(data) > c.MAX_FRAME_SIZE:
        raise MessageTooLarge("frame", len(data), c.MAX_FRAME_SIZE)
    return data


def decode_frame_data(
    frame_data: bytes, *, snappy: bool, max_size: int = c.SNAPPY_MAX_DECODED_SIZE
) -> tuple[int, bytes]:
    """Return ``(message id, data)``; data decompressed when ``snappy``, at most ``max_size`` bytes."""
    code, payload = split_msg_id(frame_data)
    if snappy:
        return code, snappy_decompress(payload, max_size=max_size)
    if len(payload) > max_size:
        raise MessageTooLarge("message", len(payload), max_size)
    return code, payload
