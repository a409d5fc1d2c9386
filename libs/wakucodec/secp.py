"""secp256k1 keys, recoverable signatures and raw-X ECDH, as go-ethereum's ``crypto`` package does them.

Byte conventions (docs/protocol-notes.md §2.3, §5.1-5.2):

- private keys are 32 big-endian bytes with ``1 <= d < n`` (geth ``crypto.ToECDSA``);
- public keys are 64 bytes ``X ‖ Y`` without the ``0x04`` prefix (geth ``FromECDSAPub(pub)[1:]``, the RLPx
  wire form). Inputs may also be given in the 65-byte ``0x04 ‖ X ‖ Y`` form (``crypto.UnmarshalPubkey``);
- signatures are 65 bytes ``R ‖ S ‖ V`` with ``V ∈ {0, 1}`` (geth ``crypto.Sign``), over a 32-byte hash that
  is *not* hashed again;
- ECDH yields the raw 32-byte X coordinate of ``d·P``, left-padded (geth ``ecies.GenerateShared`` and the RLPx
  static/ephemeral shared secrets) — not coincurve's default ``sha256(compressed point)`` (§8).

Everything goes straight to libsecp256k1 through coincurve's cffi bindings, which is what geth's cgo build
links too: signing uses RFC 6979 nonces and low-S normalisation, so signatures are byte-identical to geth's.
coincurve's ``PrivateKey`` is avoided on hot paths because its constructor derives the public key (~40 µs).
"""

from __future__ import annotations

import os
from typing import Any

from coincurve._libsecp256k1 import ffi, lib
from coincurve.context import GLOBAL_CONTEXT

from wakucodec.errors import InvalidKey, InvalidSignature

__all__ = [
    "PRIVATE_KEY_LENGTH",
    "PUBLIC_KEY_LENGTH",
    "SIGNATURE_LENGTH",
    "ecdh_x",
    "generate_private_key",
    "public_key",
    "recover_public_key",
    "sign_recoverable",
    "validate_private_key",
    "validate_public_key",
]

#: Length of a private key scalar.
PRIVATE_KEY_LENGTH = 32
#: Length of a public key on the wire: ``X ‖ Y``, no ``0x04`` prefix.
PUBLIC_KEY_LENGTH = 64
#: Length of a recoverable signature ``R(32) ‖ S(32) ‖ V(1)``.
SIGNATURE_LENGTH = 65

_HASH_LENGTH = 32
_UNCOMPRESSED = 0x04
_SERIALIZE_UNCOMPRESSED = lib.SECP256K1_EC_UNCOMPRESSED
_CTX = GLOBAL_CONTEXT.ctx


@ffi.callback("int(unsigned char *, unsigned char *, unsigned char *, void *)")  # type: ignore[untyped-decorator]
def _copy_x(output: Any, x32: Any, _y32: Any, _data: Any) -> int:
    # secp256k1_ecdh's hash hook: output the X coordinate unchanged, so the constant-time ECDH gives geth's
    # raw shared secret instead of sha256(compressed point).
    ffi.memmove(output, x32, 32)
    return 1


def validate_private_key(priv: bytes) -> bytes:
    """Return ``priv`` as ``bytes`` if it is a valid 32-byte scalar ``1 <= d < n``, else raise InvalidKey."""
    if not isinstance(priv, (bytes, bytearray, memoryview)) or len(priv) != PRIVATE_KEY_LENGTH:
        raise InvalidKey(f"private key must be {PRIVATE_KEY_LENGTH} bytes")
    priv = bytes(priv)
    if not lib.secp256k1_ec_seckey_verify(_CTX, priv):
        raise InvalidKey("private key is zero or not below the curve order")
    return priv


def _parse_public_key(pub: bytes) -> Any:
    """Parse a 64- or 65-byte (``0x04``-prefixed) public key into a libsecp256k1 ``secp256k1_pubkey``."""
    if not isinstance(pub, (bytes, bytearray, memoryview)):
        raise InvalidKey("public key must be bytes")
    if len(pub) == PUBLIC_KEY_LENGTH:
        encoded = b"\x04" + bytes(pub)
    elif len(pub) == PUBLIC_KEY_LENGTH + 1 and pub[0] == _UNCOMPRESSED:
        encoded = bytes(pub)
    else:
        raise InvalidKey(f"public key must be {PUBLIC_KEY_LENGTH} bytes (or 65 with a 0x04 prefix)")
    point = ffi.new("secp256k1_pubkey *")
    # Rejects coordinates >= p and points that are not on the curve (geth elliptic.Unmarshal + IsOnCurve).
    if not lib.secp256k1_ec_pubkey_parse(_CTX, point, encoded, len(encoded)):
        raise InvalidKey("public key is not a point on secp256k1")
    return point


def _serialize(point: Any) -> bytes:
    out = ffi.new("unsigned char[65]")
    size = ffi.new("size_t *", 65)
    lib.secp256k1_ec_pubkey_serialize(_CTX, out, size, point, _SERIALIZE_UNCOMPRESSED)
    return bytes(ffi.buffer(out, 65))[1:]


def validate_public_key(pub: bytes) -> bytes:
    """Return the canonical 64-byte form of a 64- or 65-byte public key; raise InvalidKey if off-curve."""
    return _serialize(_parse_public_key(pub))


def generate_private_key() -> bytes:
    """Return a fresh random private key (32 bytes from the OS CSPRNG, rejection-sampled into ``[1, n)``)."""
    while True:  # a draw outside [1, n) has probability ~2^-128; coincurve's get_valid_secret does the same
        candidate = os.urandom(PRIVATE_KEY_LENGTH)
        if lib.secp256k1_ec_seckey_verify(_CTX, candidate):
            return candidate


def public_key(priv: bytes) -> bytes:
    """Return the 64-byte public key (``X ‖ Y``, no prefix) of a private key."""
    priv = validate_private_key(priv)
    point = ffi.new("secp256k1_pubkey *")
    if not lib.secp256k1_ec_pubkey_create(_CTX, point, priv):  # pragma: no cover - key already validated
        raise InvalidKey("cannot derive the public key")
    return _serialize(point)


def sign_recoverable(msg_hash: bytes, priv: bytes) -> bytes:
    """Sign a 32-byte hash; return ``R ‖ S ‖ V`` (65 bytes, ``V ∈ {0, 1}``) exactly like geth ``crypto.Sign``.

    The nonce is RFC 6979 (libsecp256k1's default, as in geth's ``secp256k1_ext_ecdsa_sign``) and S is
    normalised low, so the output is deterministic and byte-identical to geth's. ``ValueError`` if
    ``msg_hash`` is not 32 bytes (a programming error: the hash is always computed locally).
    """
    if len(msg_hash) != _HASH_LENGTH:
        raise ValueError(f"message hash must be {_HASH_LENGTH} bytes, got {len(msg_hash)}")
    priv = validate_private_key(priv)
    sig = ffi.new("secp256k1_ecdsa_recoverable_signature *")
    if not lib.secp256k1_ecdsa_sign_recoverable(_CTX, sig, bytes(msg_hash), priv, ffi.NULL, ffi.NULL):
        raise InvalidKey("signing failed")  # pragma: no cover - only for invalid keys, checked above
    out = ffi.new("unsigned char[64]")
    recid = ffi.new("int *")
    lib.secp256k1_ecdsa_recoverable_signature_serialize_compact(_CTX, out, recid, sig)
    return bytes(ffi.buffer(out, 64)) + bytes((recid[0],))


def recover_public_key(msg_hash: bytes, sig: bytes) -> bytes:
    """Return the 64-byte public key that produced ``sig`` over the 32-byte ``msg_hash`` (geth ``SigToPub``).

    Raises InvalidSignature when the hash is not 32 bytes, the signature is not 65 bytes, ``V >= 4``
    (geth ``checkSignature``), R or S is zero or not below the curve order, or no key can be recovered.
    Like geth (and libsecp256k1), high-S signatures and ``V ∈ {2, 3}`` are *not* rejected here.
    """
    if len(msg_hash) != _HASH_LENGTH:
        raise InvalidSignature(f"message hash must be {_HASH_LENGTH} bytes, got {len(msg_hash)}")
    if len(sig) != SIGNATURE_LENGTH:
        raise InvalidSignature(f"signature must be {SIGNATURE_LENGTH} bytes, got {len(sig)}")
    recid = sig[64]
    if recid >= 4:
        raise InvalidSignature(f"invalid recovery id {recid}")
    parsed = ffi.new("secp256k1_ecdsa_recoverable_signature *")
    if not lib.secp256k1_ecdsa_recoverable_signature_parse_compact(_CTX, parsed, bytes(sig[:64]), recid):
        raise InvalidSignature("R or S is not below the curve order")
    point = ffi.new("secp256k1_pubkey *")
    if not lib.secp256k1_ecdsa_recover(_CTX, point, parsed, bytes(msg_hash)):
        raise InvalidSignature("no public key can be recovered from this signature")
    return _serialize(point)


def ecdh_x(priv: bytes, pub: bytes) -> bytes:
    """Return the 32-byte X coordinate of ``priv · pub`` (constant time), left-padded with zeros.

    This is geth's ``ecies.PrivateKey.GenerateShared(pub, 16, 16)`` and the RLPx ``static-shared-secret`` /
    ``ephemeral-key`` (docs/protocol-notes.md §2.5, §5.2-5.3). Raises InvalidKey for a bad key.
    """
    priv = validate_private_key(priv)
    point = _parse_public_key(pub)
    out = ffi.new("unsigned char[32]")
    if not lib.secp256k1_ecdh(_CTX, out, point, priv, _copy_x, ffi.NULL):  # pragma: no cover
        raise InvalidKey("ECDH failed")
    return bytes(ffi.buffer(out, 32))
