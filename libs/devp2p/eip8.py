"""EIP-8 handshake packets: the auth/ack bodies and their size-prefixed ECIES envelope
(protocol-notes §5.1, §5.2).

::

    auth = size(2) ‖ ECIES(recipient-pub, RLP([sig, initiator-pub, nonce, version, …]) ‖ pad, mac-data=size)
    ack  = size(2) ‖ ECIES(initiator-pub, RLP([ephemeral-pub, nonce, version, …]) ‖ pad, mac-data=size)

Decoding follows geth (``readHandshakeMsg``, ``authMsgV4``/``authRespV4`` with ``rlp:"tail"``): the first RLP
item is decoded and trailing padding ignored, extra list elements and any version number are accepted.
Pre-EIP-8 ("plain") packets are detected the way geth ≤ v1.10.3 did (the first 307/210 bytes open as a plain
ECIES message) and refused with :class:`~devp2p.errors.PlainHandshakeRefused`: status-go's fork (geth
v1.10.25) accepts only EIP-8, so no peer we care about sends them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from devp2p import constants as c
from devp2p.abc import TransportAPI
from devp2p.errors import HandshakeError, PlainHandshakeRefused
from wakucodec import ecies, rlp
from wakucodec.errors import CodecError

__all__ = ["AckMessage", "AuthMessage", "open_eip8", "read_packet", "seal_eip8"]

_padding_rng = random.SystemRandom()


def _fixed(item: rlp.Item, length: int, what: str) -> bytes:
    # geth decodes these fields into [N]byte arrays: exactly N bytes.
    if not isinstance(item, bytes) or len(item) != length:
        raise HandshakeError(f"{what} must be a {length}-byte string")
    return item


def _encode_list(raw_items: list[bytes]) -> bytes:
    """RLP list header + already-encoded items (keeps unknown extra elements byte-exact)."""
    payload = b"".join(raw_items)
    if len(payload) <= 55:
        return bytes((0xC0 + len(payload),)) + payload
    size = len(payload).to_bytes((len(payload).bit_length() + 7) // 8, "big")
    return bytes((0xF7 + len(size),)) + size + payload


def _first_item(plaintext: bytes, min_fields: int, what: str) -> tuple[list[rlp.Item], tuple[bytes, ...]]:
    """Decode the leading RLP list of ``plaintext``, ignoring whatever follows it (EIP-8 padding).

    Returns the decoded items and the raw encodings of the elements after the first ``min_fields``.
    """
    if not plaintext or plaintext[0] < 0xC0:
        raise HandshakeError(f"{what} is not an RLP list")
    prefix = plaintext[0]
    if prefix <= 0xF7:
        end = 1 + prefix - 0xC0
    else:
        len_of_len = prefix - 0xF7
        end = 1 + len_of_len + int.from_bytes(plaintext[1 : 1 + len_of_len], "big")
    try:
        item = rlp.decode(plaintext[:end])
        raw = rlp.split_list(plaintext[:end])
    except CodecError as err:
        raise HandshakeError(f"{what} is not valid RLP: {err}") from err
    if not isinstance(item, list) or len(item) < min_fields:
        raise HandshakeError(f"{what} has fewer than {min_fields} elements")
    return item, tuple(raw[min_fields:])


@dataclass(frozen=True, slots=True)
class AuthMessage:
    """The initiator's auth body (geth ``authMsgV4``)."""

    signature: bytes
    """65-byte recoverable signature over ``static-shared-secret XOR nonce`` by the ephemeral key."""
    initiator_pubkey: bytes
    """The initiator's 64-byte static public key."""
    nonce: bytes
    """32-byte initiator nonce."""
    version: int = c.HANDSHAKE_VERSION
    """Handshake version; ignored on receipt."""
    extra: tuple[bytes, ...] = ()
    """Raw encodings of further list elements (geth ``Rest rlp:"tail"``); ignored on receipt."""

    def encode(self) -> bytes:
        """RLP ``[sig, pub, nonce, version, *extra]``."""
        fields = [rlp.encode(x) for x in (self.signature, self.initiator_pubkey, self.nonce, self.version)]
        return _encode_list([*fields, *self.extra])

    @classmethod
    def decode(cls, plaintext: bytes) -> AuthMessage:
        """Decode an EIP-8 auth plaintext; extra elements and trailing padding are ignored."""
        item, extra = _first_item(plaintext, 4, "auth")
        try:
            version = rlp.to_uint(item[3], 64, "auth version")
        except CodecError as err:
            raise HandshakeError(str(err)) from err
        return cls(
            signature=_fixed(item[0], c.SIGNATURE_LENGTH, "auth signature"),
            initiator_pubkey=_fixed(item[1], c.PUBKEY_LENGTH, "auth public key"),
            nonce=_fixed(item[2], c.NONCE_LENGTH, "auth nonce"),
            version=version,
            extra=extra,
        )


@dataclass(frozen=True, slots=True)
class AckMessage:
    """The recipient's ack body (geth ``authRespV4``)."""

    ephemeral_pubkey: bytes
    """The recipient's 64-byte ephemeral public key."""
    nonce: bytes
    """32-byte recipient nonce."""
    version: int = c.HANDSHAKE_VERSION
    """Handshake version; ignored on receipt."""
    extra: tuple[bytes, ...] = ()
    """Raw encodings of further list elements (geth ``Rest rlp:"tail"``); ignored on receipt."""

    def encode(self) -> bytes:
        """RLP ``[ephemeral-pub, nonce, version, *extra]``."""
        fields = [rlp.encode(x) for x in (self.ephemeral_pubkey, self.nonce, self.version)]
        return _encode_list([*fields, *self.extra])

    @classmethod
    def decode(cls, plaintext: bytes) -> AckMessage:
        """Decode an EIP-8 ack plaintext; extra elements and trailing padding are ignored."""
        item, extra = _first_item(plaintext, 3, "ack")
        try:
            version = rlp.to_uint(item[2], 64, "ack version")
        except CodecError as err:
            raise HandshakeError(str(err)) from err
        return cls(
            ephemeral_pubkey=_fixed(item[0], c.PUBKEY_LENGTH, "ack public key"),
            nonce=_fixed(item[1], c.NONCE_LENGTH, "ack nonce"),
            version=version,
            extra=extra,
        )


def seal_eip8(body: bytes, remote_pubkey: bytes, *, padding: int | None = None) -> bytes:
    """Return ``size(2) ‖ ECIES(remote, body ‖ zero padding, shared_mac_data=size)`` (geth ``sealEIP8``).

    ``padding`` defaults to a random 100–199 bytes.
    """
    if padding is None:
        padding = _padding_rng.randint(c.EIP8_MIN_PADDING, c.EIP8_MAX_PADDING)
    plaintext = body + bytes(padding)
    prefix = (len(plaintext) + c.ECIES_OVERHEAD).to_bytes(c.EIP8_PREFIX_LENGTH, "big")
    return prefix + ecies.encrypt(remote_pubkey, plaintext, shared_mac_data=prefix)


def open_eip8(packet: bytes, node_key: bytes) -> bytes:
    """Decrypt a complete EIP-8 packet (prefix included) with our static key; return the plaintext."""
    prefix, ciphertext = packet[: c.EIP8_PREFIX_LENGTH], packet[c.EIP8_PREFIX_LENGTH :]
    if int.from_bytes(prefix, "big") != len(ciphertext):
        raise HandshakeError("EIP-8 size prefix does not match the packet length")
    try:
        return ecies.decrypt(node_key, ciphertext, shared_mac_data=prefix)
    except CodecError as err:
        raise HandshakeError(f"cannot decrypt handshake packet: {err}") from err


def _is_plain(head: bytes, node_key: bytes) -> bool:
    try:
        ecies.decrypt(node_key, head)
    except CodecError:
        return False
    return True


async def read_packet(
    transport: TransportAPI, node_key: bytes, *, plain_size: int, max_size: int = c.MAX_HANDSHAKE_PACKET_SIZE
) -> tuple[bytes, bytes]:
    """Read one EIP-8 handshake packet; return ``(wire bytes, plaintext)`` (geth ``readHandshakeMsg``).

    ``plain_size`` is the pre-EIP-8 size (307 for auth, 210 for ack): that many bytes are read first, a
    plain packet is refused, then the size prefix is checked against ``max_size`` *before* the rest of the
    body is read.
    """
    head = await transport.read_exactly(plain_size)
    if _is_plain(head, node_key):
        raise PlainHandshakeRefused("pre-EIP-8 (plain) handshake packets are not supported; use EIP-8")
    size = int.from_bytes(head[: c.EIP8_PREFIX_LENGTH], "big")
    total = c.EIP8_PREFIX_LENGTH + size
    if total < plain_size:
        raise HandshakeError(f"EIP-8 size underflow: {size} bytes, need at least {plain_size - 2}")
    if size > max_size:
        raise HandshakeError(f"EIP-8 handshake packet of {size} bytes exceeds the {max_size}-byte limit")
    packet = head + await transport.read_exactly(total - plain_size)
    return packet, open_eip8(packet, node_key)
