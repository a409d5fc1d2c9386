"""EIP-8 handshake: the published vectors (protocol-notes §7.4), our own round trip, and hostile packets."""

from __future__ import annotations

import pytest

from devp2p import constants as c
from devp2p.errors import ConnectionLost, HandshakeError, PlainHandshakeRefused
from devp2p.handshake import (
    AckMessage,
    AuthMessage,
    Initiator,
    Recipient,
    initiate,
    open_eip8,
    read_packet,
    respond,
    seal_eip8,
)
from devp2p.transport import MemoryTransport
from tests.unit.devp2p.vectors import (
    ACK_1,
    ACK_2,
    ACK_3,
    AES_SECRET,
    AUTH_1,
    AUTH_2,
    AUTH_3,
    AUTH_SIGNATURE,
    EPHEMERAL_KEY_A,
    EPHEMERAL_KEY_B,
    INGRESS_MAC_FOO,
    MAC_SECRET,
    NONCE_A,
    NONCE_B,
    STATIC_KEY_A,
    STATIC_KEY_B,
)
from wakucodec import secp

PUB_A = secp.public_key(STATIC_KEY_A)
PUB_B = secp.public_key(STATIC_KEY_B)


def _feed(data: bytes, *, eof: bool = True) -> MemoryTransport:
    _, reader = MemoryTransport.connected_pair()
    reader.feed(data)
    if eof:
        reader._inbox.feed_eof()
    return reader


# --- vectors ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("packet", "version", "extra"),
    [(AUTH_2, 4, ()), (AUTH_3, 56, (b"\x01", b"\x02", bytes.fromhex("c20405")))],
)
async def test_auth_vectors_decode_as_recipient_b(
    packet: bytes, version: int, extra: tuple[bytes, ...]
) -> None:
    wire, plaintext = await read_packet(_feed(packet), STATIC_KEY_B, plain_size=c.ENC_AUTH_PLAIN_LENGTH)
    assert wire == packet
    auth = AuthMessage.decode(plaintext)
    assert auth.initiator_pubkey == PUB_A
    assert auth.nonce == NONCE_A
    assert auth.version == version
    assert auth.extra == extra
    assert auth.signature == AUTH_SIGNATURE
    recipient = Recipient(STATIC_KEY_B, ephemeral_key=EPHEMERAL_KEY_B, nonce=NONCE_B)
    recipient.handle_auth(auth)
    assert recipient.remote_pubkey == PUB_A
    assert recipient.remote_ephemeral_pubkey == secp.public_key(EPHEMERAL_KEY_A)


@pytest.mark.parametrize(
    ("packet", "version", "extra"),
    [(ACK_2, 4, ()), (ACK_3, 57, (b"\x06", bytes.fromhex("c20708"), bytes.fromhex("81fa")))],
)
async def test_ack_vectors_decode_as_initiator_a(
    packet: bytes, version: int, extra: tuple[bytes, ...]
) -> None:
    wire, plaintext = await read_packet(_feed(packet), STATIC_KEY_A, plain_size=c.ENC_ACK_PLAIN_LENGTH)
    assert wire == packet
    ack = AckMessage.decode(plaintext)
    assert ack.ephemeral_pubkey == secp.public_key(EPHEMERAL_KEY_B)
    assert ack.nonce == NONCE_B
    assert (ack.version, ack.extra) == (version, extra)


def test_secrets_for_auth2_ack2_as_recipient_b() -> None:
    recipient = Recipient(STATIC_KEY_B, ephemeral_key=EPHEMERAL_KEY_B, nonce=NONCE_B)
    recipient.handle_auth(AuthMessage.decode(open_eip8(AUTH_2, STATIC_KEY_B)))
    secrets = recipient.secrets(AUTH_2, ACK_2)
    assert secrets.aes_secret == AES_SECRET
    assert secrets.mac_secret == MAC_SECRET
    assert secrets.remote_pubkey == PUB_A
    secrets.ingress_mac.update(b"foo")
    assert secrets.ingress_mac.digest() == INGRESS_MAC_FOO


def test_initiator_a_derives_the_mirror_secrets() -> None:
    initiator = Initiator(STATIC_KEY_A, PUB_B, ephemeral_key=EPHEMERAL_KEY_A, nonce=NONCE_A)
    # The published signature was not made with RFC 6979 nonces, so ours differs; both recover ephemeral A.
    token = bytes(x ^ y for x, y in zip(secp.ecdh_x(STATIC_KEY_A, PUB_B), NONCE_A, strict=True))
    for signature in (initiator.auth_message().signature, AUTH_SIGNATURE):
        assert secp.recover_public_key(token, signature) == secp.public_key(EPHEMERAL_KEY_A)
    initiator.handle_ack(AckMessage.decode(open_eip8(ACK_2, STATIC_KEY_A)))
    a = initiator.secrets(AUTH_2, ACK_2)
    assert (a.aes_secret, a.mac_secret) == (AES_SECRET, MAC_SECRET)
    a.egress_mac.update(b"foo")  # A's egress is B's ingress
    assert a.egress_mac.digest() == INGRESS_MAC_FOO


@pytest.mark.parametrize(("packet", "key", "size"), [(AUTH_1, STATIC_KEY_B, 307), (ACK_1, STATIC_KEY_A, 210)])
async def test_pre_eip8_packets_are_refused_clearly(packet: bytes, key: bytes, size: int) -> None:
    # Decision (§5.2): status-go's geth fork accepts only EIP-8, so plain packets are detected and refused.
    assert len(packet) == size
    with pytest.raises(PlainHandshakeRefused, match="EIP-8"):
        await read_packet(_feed(packet), key, plain_size=size)


# --- our own packets --------------------------------------------------------------------------------------


def test_auth_and_ack_encode_decode_with_extra_elements() -> None:
    auth = AuthMessage(AUTH_SIGNATURE, PUB_A, NONCE_A, version=56, extra=(b"\x01", bytes.fromhex("c20405")))
    assert AuthMessage.decode(auth.encode() + bytes(150)) == auth
    ack = AckMessage(PUB_B, NONCE_B, version=57, extra=(bytes.fromhex("81fa"),))
    assert AckMessage.decode(ack.encode() + bytes(100)) == ack


@pytest.mark.parametrize("padding", [100, 150, 199])
def test_seal_eip8_layout(padding: int) -> None:
    body = AckMessage(PUB_B, NONCE_B).encode()
    packet = seal_eip8(body, PUB_A, padding=padding)
    assert int.from_bytes(packet[:2], "big") == len(packet) - 2 == len(body) + padding + c.ECIES_OVERHEAD
    assert open_eip8(packet, STATIC_KEY_A) == body + bytes(padding)


def test_random_padding_is_100_to_199() -> None:
    body = AckMessage(PUB_B, NONCE_B).encode()
    sizes = {len(seal_eip8(body, PUB_A)) - 2 - c.ECIES_OVERHEAD - len(body) for _ in range(200)}
    assert min(sizes) >= c.EIP8_MIN_PADDING and max(sizes) <= c.EIP8_MAX_PADDING and len(sizes) > 20


async def test_round_trip_over_memory_transport_with_injected_keys() -> None:
    a_end, b_end = MemoryTransport.connected_pair()
    initiator = Initiator(STATIC_KEY_A, PUB_B, ephemeral_key=EPHEMERAL_KEY_A, nonce=NONCE_A)
    recipient = Recipient(STATIC_KEY_B, ephemeral_key=EPHEMERAL_KEY_B, nonce=NONCE_B)
    auth = initiator.create_auth(padding=123)
    a_end.write(auth)
    auth_wire, plaintext = await read_packet(b_end, STATIC_KEY_B, plain_size=c.ENC_AUTH_PLAIN_LENGTH)
    recipient.handle_auth(AuthMessage.decode(plaintext))
    ack = recipient.create_ack(padding=111)
    b_end.write(ack)
    ack_wire, plaintext = await read_packet(a_end, STATIC_KEY_A, plain_size=c.ENC_ACK_PLAIN_LENGTH)
    initiator.handle_ack(AckMessage.decode(plaintext))
    sa, sb = initiator.secrets(auth, ack_wire), recipient.secrets(auth_wire, ack)
    assert (sa.aes_secret, sa.mac_secret) == (sb.aes_secret, sb.mac_secret)
    assert sa.remote_pubkey == PUB_B and sb.remote_pubkey == PUB_A
    assert sa.egress_mac.digest() == sb.ingress_mac.digest()
    assert sa.ingress_mac.digest() == sb.egress_mac.digest()


async def test_initiate_and_respond_agree() -> None:
    a_end, b_end = MemoryTransport.connected_pair()
    key_a, key_b = secp.generate_private_key(), secp.generate_private_key()
    import asyncio

    sa, sb = await asyncio.gather(initiate(a_end, key_a, secp.public_key(key_b)), respond(b_end, key_b))
    assert sa.aes_secret == sb.aes_secret
    assert sb.remote_pubkey == secp.public_key(key_a)


# --- hostile packets --------------------------------------------------------------------------------------


async def test_oversized_size_prefix_rejected_before_reading_the_body() -> None:
    # 307 bytes with a prefix claiming 65535 and no EOF: a reader that waited for the body would hang.
    transport = _feed(b"\xff\xff" + bytes(305), eof=False)
    with pytest.raises(HandshakeError, match="exceeds"):
        await read_packet(transport, STATIC_KEY_B, plain_size=c.ENC_AUTH_PLAIN_LENGTH)


async def test_size_underflow() -> None:
    with pytest.raises(HandshakeError, match="underflow"):
        await read_packet(_feed(b"\x00\x10" + bytes(400)), STATIC_KEY_B, plain_size=c.ENC_AUTH_PLAIN_LENGTH)


async def test_truncated_packet_is_connection_lost() -> None:
    with pytest.raises(ConnectionLost):
        await read_packet(_feed(AUTH_2[:350]), STATIC_KEY_B, plain_size=c.ENC_AUTH_PLAIN_LENGTH)


async def test_wrong_recipient_cannot_open() -> None:
    with pytest.raises(HandshakeError, match="decrypt"):
        await read_packet(_feed(AUTH_2), STATIC_KEY_A, plain_size=c.ENC_AUTH_PLAIN_LENGTH)


@pytest.mark.parametrize("index", [0, 1, 2, 70, 100, 300, len(AUTH_2) - 1])
def test_tampered_packet(index: int) -> None:
    tampered = bytearray(AUTH_2)
    tampered[index] ^= 0x01
    with pytest.raises(HandshakeError):
        open_eip8(bytes(tampered), STATIC_KEY_B)


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\x80",  # a string, not a list
        bytes.fromhex("c3010203"),  # too few elements
        bytes.fromhex("c4") + b"\x83abc",  # wrong field sizes
        bytes.fromhex("f9ffff"),  # list header longer than the data
    ],
)
def test_malformed_auth_bodies(body: bytes) -> None:
    with pytest.raises(HandshakeError):
        AuthMessage.decode(body)


def test_auth_with_bad_signature_or_key_is_rejected() -> None:
    recipient = Recipient(STATIC_KEY_B)
    with pytest.raises(HandshakeError):
        recipient.handle_auth(AuthMessage(bytes(65), PUB_A, NONCE_A))
    with pytest.raises(HandshakeError):
        recipient.handle_auth(AuthMessage(AUTH_SIGNATURE, bytes(64), NONCE_A))
    initiator = Initiator(STATIC_KEY_A, PUB_B)
    with pytest.raises(HandshakeError):
        initiator.handle_ack(AckMessage(bytes(64), NONCE_B))
