"""The RLPx encryption handshake as initiator and recipient, and the session secrets
(protocol-notes §5.2, §5.3).

The initiator signs ``static-shared-secret XOR initiator-nonce`` with its *ephemeral* key; the recipient
recovers the ephemeral public key from that signature. Both then derive the AES and MAC secrets from the
ephemeral ECDH and the two nonces, and seed the egress/ingress Keccak MAC states with the exact packets sent
and received (size prefix included). The packet format itself is in :mod:`devp2p.eip8`.

Ephemeral keys, nonces and padding are injectable so the EIP-8 vectors (§7.4) can be reproduced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from devp2p import constants as c
from devp2p.abc import MacState, TransportAPI
from devp2p.eip8 import AckMessage, AuthMessage, open_eip8, read_packet, seal_eip8
from devp2p.errors import HandshakeError
from wakucodec import secp
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256, new_keccak256

__all__ = [
    "AckMessage",
    "AuthMessage",
    "Initiator",
    "Recipient",
    "Secrets",
    "derive_secrets",
    "initiate",
    "open_eip8",
    "read_packet",
    "respond",
    "seal_eip8",
]


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


@dataclass(slots=True)
class Secrets:
    """Session secrets (§5.3). The MAC states are live Keccak states, updated by the frame codec."""

    remote_pubkey: bytes
    """The remote's 64-byte static public key, proven by the handshake."""
    aes_secret: bytes
    """32-byte AES-256-CTR key for both directions."""
    mac_secret: bytes
    """32-byte AES-256-ECB key for the MAC updates."""
    egress_mac: MacState
    """Running Keccak over what we send, seeded with ``(mac-secret XOR remote-nonce) ‖ our packet``."""
    ingress_mac: MacState
    """Running Keccak over what we receive, seeded with ``(mac-secret XOR our-nonce) ‖ remote packet``."""


def derive_secrets(
    *,
    initiator: bool,
    local_ephemeral_key: bytes,
    remote_ephemeral_pubkey: bytes,
    initiator_nonce: bytes,
    recipient_nonce: bytes,
    auth_packet: bytes,
    ack_packet: bytes,
    remote_pubkey: bytes,
) -> Secrets:
    """Derive the session secrets; ``auth_packet``/``ack_packet`` are the exact wire bytes incl. the prefix.

    geth ``encHandshake.secrets``: ``shared = keccak(ecdhe ‖ keccak(respNonce ‖ initNonce))``,
    ``aes = keccak(ecdhe ‖ shared)``, ``mac = keccak(ecdhe ‖ aes)``.
    """
    try:
        ecdhe = secp.ecdh_x(local_ephemeral_key, remote_ephemeral_pubkey)
    except CodecError as err:
        raise HandshakeError(f"bad ephemeral key: {err}") from err
    shared = keccak256(ecdhe + keccak256(recipient_nonce + initiator_nonce))
    aes_secret = keccak256(ecdhe + shared)
    mac_secret = keccak256(ecdhe + aes_secret)
    mac1 = new_keccak256(_xor(mac_secret, recipient_nonce) + auth_packet)
    mac2 = new_keccak256(_xor(mac_secret, initiator_nonce) + ack_packet)
    egress, ingress = (mac1, mac2) if initiator else (mac2, mac1)
    return Secrets(remote_pubkey, aes_secret, mac_secret, egress, ingress)


class Initiator:
    """The dialling side's handshake state (geth ``initiatorEncHandshake``)."""

    def __init__(
        self,
        node_key: bytes,
        remote_pubkey: bytes,
        *,
        ephemeral_key: bytes | None = None,
        nonce: bytes | None = None,
    ) -> None:
        self.node_key = node_key
        self.remote_pubkey = remote_pubkey
        #: Our ephemeral private key (random unless injected).
        self.ephemeral_key = ephemeral_key or secp.generate_private_key()
        #: Our nonce (random unless injected).
        self.nonce = nonce or os.urandom(c.NONCE_LENGTH)
        self._remote_ephemeral: bytes | None = None
        self._remote_nonce: bytes | None = None

    def auth_message(self) -> AuthMessage:
        """Build the auth body: sign ``static-shared-secret XOR nonce`` with the ephemeral key."""
        try:
            token = secp.ecdh_x(self.node_key, self.remote_pubkey)
        except CodecError as err:
            raise HandshakeError(f"bad remote public key: {err}") from err
        signature = secp.sign_recoverable(_xor(token, self.nonce), self.ephemeral_key)
        return AuthMessage(signature, secp.public_key(self.node_key), self.nonce)

    def create_auth(self, *, padding: int | None = None) -> bytes:
        """Return the auth packet's wire bytes."""
        return seal_eip8(self.auth_message().encode(), self.remote_pubkey, padding=padding)

    def handle_ack(self, ack: AckMessage) -> None:
        """Take the recipient's ephemeral key and nonce."""
        try:
            self._remote_ephemeral = secp.validate_public_key(ack.ephemeral_pubkey)
        except CodecError as err:
            raise HandshakeError(f"bad ack ephemeral key: {err}") from err
        self._remote_nonce = ack.nonce

    def secrets(self, auth_packet: bytes, ack_packet: bytes) -> Secrets:
        """Derive the session secrets once the ack was handled."""
        if self._remote_ephemeral is None or self._remote_nonce is None:
            raise RuntimeError("handle_ack() first")
        return derive_secrets(
            initiator=True,
            local_ephemeral_key=self.ephemeral_key,
            remote_ephemeral_pubkey=self._remote_ephemeral,
            initiator_nonce=self.nonce,
            recipient_nonce=self._remote_nonce,
            auth_packet=auth_packet,
            ack_packet=ack_packet,
            remote_pubkey=self.remote_pubkey,
        )


class Recipient:
    """The listening side's handshake state (geth ``receiverEncHandshake``)."""

    def __init__(
        self, node_key: bytes, *, ephemeral_key: bytes | None = None, nonce: bytes | None = None
    ) -> None:
        self.node_key = node_key
        #: Our ephemeral private key (random unless injected).
        self.ephemeral_key = ephemeral_key or secp.generate_private_key()
        #: Our nonce (random unless injected).
        self.nonce = nonce or os.urandom(c.NONCE_LENGTH)
        #: The initiator's static public key, once the auth was handled.
        self.remote_pubkey: bytes | None = None
        #: The initiator's ephemeral public key, recovered from the auth signature.
        self.remote_ephemeral_pubkey: bytes | None = None
        self._remote_nonce: bytes | None = None

    def handle_auth(self, auth: AuthMessage) -> None:
        """Check the initiator's key and recover its ephemeral key from the signature (``handleAuthMsg``)."""
        try:
            token = secp.ecdh_x(self.node_key, auth.initiator_pubkey)
            ephemeral = secp.recover_public_key(_xor(token, auth.nonce), auth.signature)
        except CodecError as err:
            raise HandshakeError(f"invalid auth: {err}") from err
        self.remote_pubkey = auth.initiator_pubkey
        self.remote_ephemeral_pubkey = ephemeral
        self._remote_nonce = auth.nonce

    def create_ack(self, *, padding: int | None = None) -> bytes:
        """Return the ack packet's wire bytes (always EIP-8)."""
        if self.remote_pubkey is None:
            raise RuntimeError("handle_auth() first")
        body = AckMessage(secp.public_key(self.ephemeral_key), self.nonce).encode()
        return seal_eip8(body, self.remote_pubkey, padding=padding)

    def secrets(self, auth_packet: bytes, ack_packet: bytes) -> Secrets:
        """Derive the session secrets from the auth received and the ack sent."""
        if self.remote_pubkey is None or self.remote_ephemeral_pubkey is None or self._remote_nonce is None:
            raise RuntimeError("handle_auth() first")
        return derive_secrets(
            initiator=False,
            local_ephemeral_key=self.ephemeral_key,
            remote_ephemeral_pubkey=self.remote_ephemeral_pubkey,
            initiator_nonce=self._remote_nonce,
            recipient_nonce=self.nonce,
            auth_packet=auth_packet,
            ack_packet=ack_packet,
            remote_pubkey=self.remote_pubkey,
        )


async def initiate(
    transport: TransportAPI,
    node_key: bytes,
    remote_pubkey: bytes,
    *,
    max_packet_size: int = c.MAX_HANDSHAKE_PACKET_SIZE,
) -> Secrets:
    """Run the handshake as the dialler: send auth, read ack, derive secrets. No timeout of its own."""
    state = Initiator(node_key, remote_pubkey)
    auth_packet = state.create_auth()
    transport.write(auth_packet)
    await transport.drain()
    ack_packet, plaintext = await read_packet(
        transport, node_key, plain_size=c.ENC_ACK_PLAIN_LENGTH, max_size=max_packet_size
    )
    state.handle_ack(AckMessage.decode(plaintext))
    return state.secrets(auth_packet, ack_packet)


async def respond(
    transport: TransportAPI, node_key: bytes, *, max_packet_size: int = c.MAX_HANDSHAKE_PACKET_SIZE
) -> Secrets:
    """Run the handshake as the listener: read auth, send ack, derive secrets. No timeout of its own."""
    auth_packet, plaintext = await read_packet(
        transport, node_key, plain_size=c.ENC_AUTH_PLAIN_LENGTH, max_size=max_packet_size
    )
    state = Recipient(node_key)
    state.handle_auth(AuthMessage.decode(plaintext))
    ack_packet = state.create_ack()
    transport.write(ack_packet)
    await transport.drain()
    return state.secrets(auth_packet, ack_packet)
