"""The RLPx frame codec: AES-256-CTR encryption and the Keccak header/frame MACs (protocol-notes §5.4).

A frame on the wire::

    header-ct (16) ‖ header-mac (16) ‖ frame-ct (frame-size padded to 16) ‖ frame-mac (16)

- header plaintext = ``frame-size (3 bytes BE) ‖ c2 80 80 ‖ zero padding``; header data is ignored on read;
- one continuous AES-256-CTR keystream per direction (IV = 16 zero bytes) covers headers and bodies;
- MAC update (geth ``updateMAC``): ``seed' = AES-256-ECB(mac-secret, digest(mac)[:16]) XOR seed``;
  ``mac.update(seed')``; ``tag = digest(mac)[:16]``. Header: ``seed = header-ct``. Frame:
  ``mac.update(frame-ct)`` then ``seed = digest(mac)[:16]``.

Reading verifies the header MAC before decrypting the header, checks the frame size against the caller's limit
before reading (and allocating) the body, and verifies the frame MAC before decrypting the body (geth
``Conn.Read``). After any error the ingress state no longer matches the remote's, so the codec refuses to
read further frames. The MAC states come from :class:`~devp2p.handshake.Secrets` or, in tests, from a fake
(:class:`~devp2p.abc.MacState`).
"""

from __future__ import annotations

import hmac

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from devp2p import constants as c
from devp2p.abc import MacState, TransportAPI
from devp2p.errors import BadMAC, FrameError, MessageTooLarge
from devp2p.handshake import Secrets

__all__ = ["FrameCodec", "padded_length"]

_ZERO_IV = bytes(c.AES_BLOCK_SIZE)
_HEADER_PADDING = bytes(c.FRAME_HEADER_LENGTH - 3 - len(c.FRAME_HEADER_DATA))
_ZEROS = bytes(c.AES_BLOCK_SIZE)


def padded_length(frame_size: int) -> int:
    """``frame_size`` rounded up to the AES block size (the encrypted body length)."""
    return frame_size + (-frame_size % c.AES_BLOCK_SIZE)


class FrameCodec:
    """Encrypts and authenticates frames for one RLPx session (geth ``rlpx.Conn`` / ``sessionState``).

    Not thread-safe and order-sensitive: frames must be encoded in the order they are written and decoded
    in the order they are read. The connection holds a write lock around :meth:`encode` + write.
    """

    def __init__(
        self, aes_secret: bytes, mac_secret: bytes, egress_mac: MacState, ingress_mac: MacState
    ) -> None:
        ctr = Cipher(algorithms.AES(aes_secret), modes.CTR(_ZERO_IV))
        # Two independent keystreams from the same key and IV, one per direction (geth InitWithSecrets).
        self._enc = ctr.encryptor()
        self._dec = ctr.decryptor()
        self._mac_block = Cipher(algorithms.AES(mac_secret), modes.ECB()).encryptor()
        self._egress = egress_mac
        self._ingress = ingress_mac
        self._broken: str | None = None

    @classmethod
    def from_secrets(cls, secrets: Secrets) -> FrameCodec:
        """Build a codec from handshake secrets."""
        return cls(secrets.aes_secret, secrets.mac_secret, secrets.egress_mac, secrets.ingress_mac)

    def _update_mac(self, mac: MacState, seed: bytes) -> bytes:
        """geth ``updateMAC``: reseed ``mac`` with the encrypted digest XOR ``seed``; return the new tag."""
        aes = self._mac_block.update(mac.digest()[: c.AES_BLOCK_SIZE])
        mac.update(
            (int.from_bytes(aes, "big") ^ int.from_bytes(seed, "big")).to_bytes(c.AES_BLOCK_SIZE, "big")
        )
        return mac.digest()[: c.FRAME_MAC_LENGTH]

    # --- egress ---------------------------------------------------------------------------------------------

    def encode(self, frame_data: bytes) -> bytes:
        """Return the wire bytes of one frame carrying ``frame_data`` (message id + payload)."""
        return self.encode_header(len(frame_data)) + self.encode_body(frame_data)

    def encode_header(self, frame_size: int) -> bytes:
        """Return ``header-ct ‖ header-mac`` for a frame of ``frame_size``; ``encode_body`` must follow."""
        if not 0 <= frame_size <= c.MAX_FRAME_SIZE:
            raise MessageTooLarge("frame", frame_size, c.MAX_FRAME_SIZE)
        header_ct = self._enc.update(frame_size.to_bytes(3, "big") + c.FRAME_HEADER_DATA + _HEADER_PADDING)
        return header_ct + self._update_mac(self._egress, header_ct)

    def encode_body(self, frame_data: bytes) -> bytes:
        """Return ``frame-ct ‖ frame-mac`` for the frame whose header was just encoded."""
        parts = [self._enc.update(frame_data)]
        padding = -len(frame_data) % c.AES_BLOCK_SIZE
        if padding:
            parts.append(self._enc.update(_ZEROS[:padding]))
        for chunk in parts:  # the MAC absorbs the padded body ciphertext; no 1 MiB concatenation
            self._egress.update(chunk)
        parts.append(self._update_mac(self._egress, self._egress.digest()[: c.FRAME_MAC_LENGTH]))
        return b"".join(parts)

    # --- ingress --------------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise FrameError(f"ingress stream unusable after an earlier error: {self._broken}")

    def _fail(self, error: FrameError | MessageTooLarge) -> FrameError | MessageTooLarge:
        self._broken = str(error)
        return error

    def decode_header(self, preamble: bytes) -> int:
        """Verify the MAC of ``header-ct ‖ header-mac`` (32 bytes), then decrypt; return the frame size."""
        self._check_usable()
        if len(preamble) != c.FRAME_PREAMBLE_LENGTH:
            raise ValueError(f"frame preamble must be {c.FRAME_PREAMBLE_LENGTH} bytes")
        header_ct = preamble[: c.FRAME_HEADER_LENGTH]
        expected = self._update_mac(self._ingress, header_ct)
        if not hmac.compare_digest(expected, preamble[c.FRAME_HEADER_LENGTH :]):
            raise self._fail(BadMAC("bad header MAC"))
        header = self._dec.update(header_ct)
        # Header data (c2 80 80) is ignored, as geth does.
        return int.from_bytes(header[:3], "big")

    @staticmethod
    def body_length(frame_size: int) -> int:
        """Bytes to read after the preamble for a frame of ``frame_size``: padded body + frame MAC."""
        return padded_length(frame_size) + c.FRAME_MAC_LENGTH

    def decode_body(self, frame_size: int, body: bytes) -> bytes:
        """Verify the MAC of ``frame-ct ‖ frame-mac``, then decrypt; return the ``frame_size`` data bytes."""
        self._check_usable()
        padded = padded_length(frame_size)
        if len(body) != padded + c.FRAME_MAC_LENGTH:
            raise ValueError("frame body has the wrong length")
        view = memoryview(body)
        ciphertext = view[:padded]
        self._ingress.update(ciphertext)
        expected = self._update_mac(self._ingress, self._ingress.digest()[: c.FRAME_MAC_LENGTH])
        if not hmac.compare_digest(expected, view[padded:]):
            raise self._fail(BadMAC("bad frame MAC"))
        data = self._dec.update(ciphertext[:frame_size])
        if padded != frame_size:
            self._dec.update(ciphertext[frame_size:])  # keep the keystream aligned with the remote's
        return data

    async def read_frame(self, transport: TransportAPI, *, max_size: int = c.MAX_FRAME_SIZE) -> bytes:
        """Read, authenticate and decrypt one frame; return its data (message id + payload).

        Raises BadMAC, :class:`~devp2p.errors.MessageTooLarge` (frame size over ``max_size``, raised before
        the body is read) or ConnectionLost. After any of them the codec refuses further reads.
        """
        self._check_usable()
        frame_size = self.decode_header(await transport.read_exactly(c.FRAME_PREAMBLE_LENGTH))
        if frame_size > max_size:
            raise self._fail(MessageTooLarge("frame", frame_size, max_size))
        return self.decode_body(frame_size, await transport.read_exactly(self.body_length(frame_size)))
