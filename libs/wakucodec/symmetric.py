"""Whisper v6 symmetric encryption (AES-256-GCM) and password-derived keys.

Wire form (docs/protocol-notes.md §2.4; G920 ``encryptSymmetric`` / ``decryptSymmetric``)::

    Data = GCM_Seal(key, nonce, plaintext, aad = none) ‖ nonce  =  ciphertext ‖ tag (16) ‖ nonce (12)

Encryption refuses a key that is not 32 bytes or is all zeros (geth ``validateDataIntegrity(key, 32)``).
Decryption, like geth's ``aes.NewCipher``, takes any valid AES key (16, 24 or 32 bytes — zeros included).

``cryptography``'s AESGCM is ~60x faster than pycryptodome at 1 KiB, but only when the key object is reused:
constructing it dominates small messages (docs/benchmarks.md "Reference: Python libraries on the hot path"),
so objects are kept in a small LRU keyed by the key bytes. A mailserver uses a handful of keys (its password
key, a few topic keys).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from wakucodec.errors import DecryptionFailed, InvalidKey

__all__ = [
    "KEY_LENGTH",
    "MAILSERVER_PASSWORD",
    "NONCE_LENGTH",
    "OVERHEAD",
    "PBKDF2_ITERATIONS",
    "TAG_LENGTH",
    "decrypt",
    "encrypt",
    "key_from_password",
]

#: AES-256 key length required when encrypting (geth ``aesKeyLength``).
KEY_LENGTH = 32
#: GCM standard nonce ("salt") length, appended after the tag (geth ``aesNonceLength``).
NONCE_LENGTH = 12
#: GCM authentication tag length.
TAG_LENGTH = 16
#: Bytes added to a plaintext: tag + nonce.
OVERHEAD = TAG_LENGTH + NONCE_LENGTH
#: PBKDF2 iteration count of ``shh_generateSymKeyFromPassword`` — 65356, *not* 65536 (§2.6).
PBKDF2_ITERATIONS = 65356
#: Password of the Status mailserver symmetric key (docs/protocol-notes.md §2.7).
MAILSERVER_PASSWORD = "status-offline-inbox"

_AES_KEY_LENGTHS = frozenset((16, 24, 32))
_CACHE_SIZE = 256


@lru_cache(maxsize=_CACHE_SIZE)
def _aead(key: bytes) -> AESGCM:
    """Return a cached AESGCM object for ``key`` (a valid AES key length, checked by the callers)."""
    return AESGCM(key)


def encrypt(key: bytes, plaintext: bytes, *, nonce: bytes | None = None) -> bytes:
    """Encrypt with AES-256-GCM; return ``ciphertext ‖ tag(16) ‖ nonce(12)``.

    ``nonce`` defaults to 12 random bytes (never reuse one with the same key: GCM fails catastrophically);
    pass one only for known-answer tests. Raises InvalidKey if ``key`` is not 32 bytes or is all zeros
    (geth refuses both when encrypting) and ``ValueError`` for a nonce that is not 12 bytes.
    """
    key = bytes(key)
    if len(key) != KEY_LENGTH or not any(key):
        raise InvalidKey(f"symmetric encryption needs a non-zero {KEY_LENGTH}-byte key")
    if nonce is None:
        nonce = os.urandom(NONCE_LENGTH)
    elif len(nonce) != NONCE_LENGTH:
        raise ValueError(f"nonce must be {NONCE_LENGTH} bytes, got {len(nonce)}")
    return _aead(key).encrypt(bytes(nonce), bytes(plaintext), None) + bytes(nonce)


def decrypt(key: bytes, data: bytes) -> bytes:
    """Open ``ciphertext ‖ tag ‖ nonce``; raise DecryptionFailed on a short input, wrong key or tampering.

    InvalidKey if ``key`` is not a valid AES key length (16/24/32 bytes; geth's ``aes.NewCipher`` rule).
    """
    key = bytes(key)
    if len(key) not in _AES_KEY_LENGTHS:
        raise InvalidKey(f"AES key must be 16, 24 or 32 bytes, got {len(key)}")
    if len(data) < OVERHEAD:
        # geth: < 12 bytes is "missing salt", < 28 fails inside GCM Open.
        raise DecryptionFailed(f"AES-GCM data is {len(data)} bytes, minimum is {OVERHEAD}")
    try:
        return _aead(key).decrypt(data[-NONCE_LENGTH:], data[:-NONCE_LENGTH], None)
    except InvalidTag as err:
        raise DecryptionFailed("AES-GCM authentication failed (wrong key or tampered data)") from err


@lru_cache(maxsize=64)
def key_from_password(password: str) -> bytes:
    """Derive the 32-byte key of ``shh_generateSymKeyFromPassword`` (geth ``AddSymKeyFromPassword``).

    ``PBKDF2-HMAC-SHA256(utf8(password), salt = b"", 65356 iterations, 32 bytes)`` — deliberately slow
    (~15 ms), hence cached. :data:`MAILSERVER_PASSWORD` gives
    ``765df27c0765526f920ba742ff4b9452bb0064e016435ffccd81186aa6feaae8`` (§2.7).
    """
    return hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), b"", PBKDF2_ITERATIONS, KEY_LENGTH)
