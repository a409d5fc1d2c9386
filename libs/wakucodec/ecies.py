"""ECIES exactly as go-ethereum's ``crypto/ecies`` does it for secp256k1 (``ECIES_AES128_SHA256``).

Used for asymmetric Whisper payloads (docs/protocol-notes.md §2.5, s1 = s2 = nil) and for the RLPx
handshake (§5.1-5.2, s1 = nil, s2 = the 2-byte big-endian size prefix of an EIP-8 packet). Layout::

    R (65, 0x04‖X‖Y) ‖ IV (16) ‖ AES-128-CTR(Ke, IV, m) ‖ HMAC-SHA256(Km, IV ‖ c ‖ shared_mac_data) (32)

with ``z`` = raw X coordinate of ``r·K_B``, ``K = concatKDF_SHA256(z, s1 = "", 32) = SHA256(00000001 ‖ z)``,
``Ke = K[:16]`` and ``Km = SHA256(K[16:32])`` (G920 ``ecies.Encrypt`` / ``PrivateKey.Decrypt``).

Where we are stricter than geth (all inputs geth would reject, crash on, or never produce):

- geth accepts a ciphertext of ``98 <= len < 113`` bytes up to the MAC check and then panics in
  ``symDecrypt`` (negative ``make`` length); we reject anything shorter than :data:`OVERHEAD`.
- geth ``Encrypt`` of an empty message silently returns ``nil`` (``len(em) <= BlockSize``); we return a
  valid 113-byte ciphertext, which geth's ``Decrypt`` opens to an empty message.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from wakucodec import secp
from wakucodec.errors import DecryptionFailed, InvalidKey

__all__ = ["OVERHEAD", "decrypt", "encrypt"]

_R_LENGTH = 65  # uncompressed point, (BitSize + 7) / 4 in geth's Decrypt
_IV_LENGTH = 16  # AES block size
_MAC_LENGTH = 32  # SHA-256
_KEY_LENGTH = 16  # ECIES_AES128_SHA256.KeyLen
#: Bytes ECIES adds to a plaintext: ephemeral key 65 + IV 16 + MAC 32 (docs/protocol-notes.md §5.1).
OVERHEAD = _R_LENGTH + _IV_LENGTH + _MAC_LENGTH


def _concat_kdf(z: bytes, s1: bytes, length: int) -> bytes:
    """NIST SP 800-56A concatenation KDF with SHA-256 (geth ``concatKDF``): ``H(ctr ‖ z ‖ s1)`` blocks."""
    out = bytearray()
    counter = 1
    while len(out) < length:
        out += hashlib.sha256(counter.to_bytes(4, "big") + z + s1).digest()
        counter += 1
    return bytes(out[:length])


def _derive_keys(z: bytes) -> tuple[bytes, bytes]:
    """Return ``(Ke, Km)``: ``K = KDF(z, 32)``, ``Ke = K[:16]``, ``Km = SHA256(K[16:])`` (geth Encrypt)."""
    k = _concat_kdf(z, b"", 2 * _KEY_LENGTH)
    return k[:_KEY_LENGTH], hashlib.sha256(k[_KEY_LENGTH:]).digest()


def _aes128_ctr(key: bytes, iv: bytes, data: bytes) -> bytes:
    # Go's cipher.NewCTR increments the whole 16-byte IV as a big-endian counter, as OpenSSL's CTR does.
    ctx = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
    return ctx.update(data) + ctx.finalize()


def _encrypt_with(pub: bytes, plaintext: bytes, shared_mac_data: bytes, ephemeral: bytes, iv: bytes) -> bytes:
    """Deterministic core of :func:`encrypt`: the ephemeral key and IV are given (tests and vectors only)."""
    if len(iv) != _IV_LENGTH:
        raise ValueError(f"IV must be {_IV_LENGTH} bytes")
    z = secp.ecdh_x(ephemeral, pub)
    ke, km = _derive_keys(z)
    em = iv + _aes128_ctr(ke, iv, bytes(plaintext))
    tag = hmac.digest(km, em + bytes(shared_mac_data), "sha256")
    return b"\x04" + secp.public_key(ephemeral) + em + tag


def encrypt(pub: bytes, plaintext: bytes, *, shared_mac_data: bytes = b"") -> bytes:
    """Encrypt ``plaintext`` to the secp256k1 public key ``pub`` (64 bytes, or 65 with ``0x04``).

    ``shared_mac_data`` is geth's ``s2``: authenticated by the MAC but not transmitted (the RLPx EIP-8 size
    prefix; empty for Whisper). Output is ``len(plaintext) + OVERHEAD`` bytes. Raises InvalidKey for a
    public key that is not a secp256k1 point (geth checks it with ``ValidatePublicKey`` before encrypting).
    """
    secp.validate_public_key(pub)
    return _encrypt_with(pub, plaintext, shared_mac_data, secp.generate_private_key(), os.urandom(_IV_LENGTH))


def decrypt(priv: bytes, data: bytes, *, shared_mac_data: bytes = b"") -> bytes:
    """Open an ECIES ciphertext with the recipient's 32-byte private key; verify the MAC before decrypting.

    Raises DecryptionFailed for anything wrong with ``data`` (too short, R not an uncompressed curve point,
    MAC mismatch — including wrong key or wrong ``shared_mac_data``) and InvalidKey for a bad ``priv``.
    """
    priv = secp.validate_private_key(priv)
    data = bytes(data)
    if len(data) < OVERHEAD:
        raise DecryptionFailed(f"ECIES ciphertext is {len(data)} bytes, minimum is {OVERHEAD}")
    if data[0] != 0x04:
        # geth: prefixes 2/3 pass the length switch but elliptic.Unmarshal only takes uncompressed points.
        raise DecryptionFailed("ECIES ephemeral key is not an uncompressed point")
    try:
        z = secp.ecdh_x(priv, data[:_R_LENGTH])
    except InvalidKey as err:  # priv was validated, so this is R: off the curve or out of range
        raise DecryptionFailed("ECIES ephemeral key is not on secp256k1") from err
    ke, km = _derive_keys(z)
    mac_start = len(data) - _MAC_LENGTH
    expected = hmac.digest(km, data[_R_LENGTH:mac_start] + bytes(shared_mac_data), "sha256")
    if not hmac.compare_digest(expected, data[mac_start:]):  # constant time, like subtle.ConstantTimeCompare
        raise DecryptionFailed("ECIES MAC mismatch (wrong key, wrong shared data, or tampered ciphertext)")
    iv = data[_R_LENGTH : _R_LENGTH + _IV_LENGTH]
    return _aes128_ctr(ke, iv, data[_R_LENGTH + _IV_LENGTH : mac_start])
