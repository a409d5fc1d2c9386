"""secp256k1 keys, recoverable signatures and raw-X ECDH against geth's and RFC 6979's published vectors."""

from __future__ import annotations

import hashlib

import pytest
from coincurve import PublicKey as CCPublicKey
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed, encode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st

from wakucodec import secp
from wakucodec.errors import CodecError, InvalidKey, InvalidSignature
from wakucodec.keccak import keccak256

H = bytes.fromhex
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
G64 = H(
    "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"
)

private_keys = st.integers(min_value=1, max_value=N - 1).map(lambda d: d.to_bytes(32, "big"))
hashes32 = st.binary(min_size=32, max_size=32)


def _int(d: int) -> bytes:
    return d.to_bytes(32, "big")


# --- published vectors ---------------------------------------------------------------------------------


def test_geth_ecrecover_vector() -> None:
    # go-ethereum crypto/signature_test.go: testmsg / testsig / testpubkey (TestEcrecover).
    msg = H("ce0677bb30baa8cf067c88db9811f4333d131bf8bcf12fe7065d211dce971008")
    sig = H(
        "90f27b8b488db00b00606796d2987f6a5f59ae62ea05effe84fef5b8b0e549984a691139ad57a3f0b906637673aa2f63"
        "d1f55cb1a69199d4009eea23ceaddc9301"
    )
    expected = H(
        "e32df42865e97135acfb65f3bae71bdc86f4d49150ad6a440b6f15878109880a"
        "0a2b2667f7e725ceea70c673093bf67663e0312623c8e091b13cf2c0f11ef652"
    )
    assert secp.recover_public_key(msg, sig) == expected


def test_geth_sign_vector_address() -> None:
    # go-ethereum crypto/crypto_test.go TestSign: testPrivHex -> testAddrHex (keccak256(pub)[12:]).
    priv = H("289c2857d4598e37fb9647507e47a309d6133539bf21a8b9cb6df88fd5232032")
    pub = secp.public_key(priv)
    assert keccak256(pub)[12:] == H("970e8128ab834e8eac17ab8e3812f010678cf791")
    msg = keccak256(b"foo")
    assert secp.recover_public_key(msg, secp.sign_recoverable(msg, priv)) == pub


def test_geth_ecies_public_keys_and_shared_secret() -> None:
    # go-ethereum crypto/ecies/ecies_test.go TestSharedKeyPadding (prv1 has a leading zero byte) and
    # TestSharedKeyStatic (skLen = macLen = 16, i.e. the full 32-byte X coordinate).
    prv0 = H("1adf5c18167d96a1f9a0b1ef63be8aa27eaf6032c233b2b38f7850cf5b859fd9")
    prv1 = H("0097a076fc7fcd9208240668e31c9abee952cbb6e375d1b8febc7499d6e16f1a")
    assert secp.public_key(prv0) == H(
        "1a8ed022ff7aec59dc1b440446bdda5ff6bcb3509a8b109077282b361efffbd8"
        "e040bd480b1deccc3bc40bd5b1fdcb7bfd352500b477cb9471366dbd4493f923"
    )
    assert secp.public_key(prv1) == H(
        "6ab3ac374251f638d0abb3ef596d1dc67955b507c104e5f2009724812dc027b8"
        "8ad915f2b503a8be6facab6588731fefeb584fd2dfa9a77a5e0bba1ec439e4fa"
    )
    assert secp.ecdh_x(prv0, secp.public_key(prv1)) == secp.ecdh_x(prv1, secp.public_key(prv0))
    a = H("7ebbc6a8358bc76dd73ebc557056702c8cfc34e5cfcd90eb83af0347575fd2ad")
    b = H("6a3d6396903245bba5837752b9e0348874e72db0c4e11e9c485a81b4ea4353b9")
    shared = H("167ccc13ac5e8a26b131c3446030c60fbfac6aa8e31149d0869f93626a4cdf62")
    assert secp.ecdh_x(a, secp.public_key(b)) == shared
    assert secp.ecdh_x(b, secp.public_key(a)) == shared


@pytest.mark.parametrize(
    ("d", "message", "rs"),
    [
        # RFC 6979 secp256k1/SHA-256 vectors (bitcointalk topic 285142), S normalised low as libsecp256k1 and
        # geth's crypto.Sign do.
        (
            1,
            b"Satoshi Nakamoto",
            "934b1ea10a4b3c1757e2b0c017d0b6143ce3c9a7e6a4a49860d7a6ab210ee3d8"
            "2442ce9d2b916064108014783e923ec36b49743e2ffa1c4496f01a512aafd9e5",
        ),
        (
            1,
            b"All those moments will be lost in time, like tears in rain. Time to die...",
            "8600dbd41e348fe5c9465ab92d23e3db8b98b873beecd930736488696438cb6b"
            "547fe64427496db33bf66019dacbf0039c04199abb0122918601db38a72cfc21",
        ),
        (
            N - 1,
            b"Satoshi Nakamoto",
            "fd567d121db66e382991534ada77a6bd3106f0a1098c231e47993447cd6af2d0"
            "6b39cd0eb1bc8603e159ef5c20a5c8ad685a45b06ce9bebed3f153d10d93bed5",
        ),
    ],
)
def test_rfc6979_deterministic_low_s(d: int, message: bytes, rs: str) -> None:
    digest = hashlib.sha256(message).digest()
    sig = secp.sign_recoverable(digest, _int(d))
    assert sig[:64] == H(rs)
    assert sig[64] in (0, 1)
    assert secp.recover_public_key(digest, sig) == secp.public_key(_int(d))


def test_public_key_of_one_is_generator() -> None:
    assert secp.public_key(_int(1)) == G64


# --- properties ----------------------------------------------------------------------------------------


@settings(max_examples=60)
@given(priv=private_keys, msg=hashes32)
def test_sign_recover_round_trip_and_openssl_verifies(priv: bytes, msg: bytes) -> None:
    sig = secp.sign_recoverable(msg, priv)
    assert len(sig) == 65 and sig[64] in (0, 1)
    assert int.from_bytes(sig[32:64], "big") <= N // 2  # low-S
    pub = secp.public_key(priv)
    assert secp.recover_public_key(msg, sig) == pub
    assert sig == secp.sign_recoverable(msg, priv)  # deterministic
    # Independent oracle: OpenSSL (via cryptography) verifies the same signature over the prehashed message.
    oracle = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256K1(), b"\x04" + pub)
    der = encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:64], "big"))
    oracle.verify(der, msg, ec.ECDSA(Prehashed(hashes.SHA256())))


@settings(max_examples=60)
@given(a=private_keys, b=private_keys)
def test_ecdh_symmetric_and_matches_openssl(a: bytes, b: bytes) -> None:
    shared = secp.ecdh_x(a, secp.public_key(b))
    assert len(shared) == 32
    assert shared == secp.ecdh_x(b, secp.public_key(a))
    oracle = ec.derive_private_key(int.from_bytes(a, "big"), ec.SECP256K1())
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256K1(), b"\x04" + secp.public_key(b))
    assert shared == oracle.exchange(ec.ECDH(), peer)  # OpenSSL returns the raw X coordinate
    assert shared == CCPublicKey(b"\x04" + secp.public_key(b)).multiply(a).format()[1:]


def test_ecdh_x_is_left_padded() -> None:
    # ecdh_x(d, G) = X(d·G): find a d whose X has a leading zero byte (1 in 256) and check the padding.
    d = next(d for d in range(1, 5000) if secp.public_key(_int(d))[0] == 0)
    shared = secp.ecdh_x(_int(d), G64)
    assert len(shared) == 32 and shared[0] == 0
    assert shared == secp.public_key(_int(d))[:32]


def test_generate_private_key() -> None:
    keys = {secp.generate_private_key() for _ in range(8)}
    assert len(keys) == 8
    for k in keys:
        assert secp.validate_private_key(k) == k
        assert len(secp.public_key(k)) == 64


def test_public_key_forms() -> None:
    assert secp.validate_public_key(G64) == G64
    assert secp.validate_public_key(b"\x04" + G64) == G64
    assert secp.ecdh_x(_int(2), b"\x04" + G64) == secp.ecdh_x(_int(2), G64)


def test_high_s_and_flipped_v_are_recovered_like_geth() -> None:
    # libsecp256k1's recover (geth SigToPub) does not enforce low S: (r, n-s, v^1) recovers the same key.
    priv, msg = _int(12345), keccak256(b"high-s")
    sig = secp.sign_recoverable(msg, priv)
    s = int.from_bytes(sig[32:64], "big")
    malleated = sig[:32] + _int(N - s) + bytes((sig[64] ^ 1,))
    assert secp.recover_public_key(msg, malleated) == secp.public_key(priv)
    flipped_v = sig[:64] + bytes((sig[64] ^ 1,))
    assert secp.recover_public_key(msg, flipped_v) != secp.public_key(priv)


# --- rejection -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "priv",
    [b"", b"\x01" * 31, b"\x01" * 33, _int(0), _int(N), _int(N + 1), b"\xff" * 32],
)
def test_invalid_private_keys(priv: bytes) -> None:
    with pytest.raises(InvalidKey):
        secp.validate_private_key(priv)
    with pytest.raises(InvalidKey):
        secp.public_key(priv)
    with pytest.raises(InvalidKey):
        secp.sign_recoverable(bytes(32), priv)
    with pytest.raises(InvalidKey):
        secp.ecdh_x(priv, G64)


@pytest.mark.parametrize(
    "pub",
    [
        b"",
        G64[:63],
        G64 + b"\x00",
        b"\x02" + G64,  # 65 bytes but not the uncompressed prefix
        b"\x03" + G64[:32],  # compressed form is not a wire form
        bytes(64),  # (0, 0) is not on the curve
        G64[:32] + _int((int.from_bytes(G64[32:], "big") + 1) % P),  # off-curve
        _int(P) + G64[32:],  # x >= p
    ],
)
def test_invalid_public_keys(pub: bytes) -> None:
    with pytest.raises(InvalidKey):
        secp.validate_public_key(pub)
    with pytest.raises(InvalidKey):
        secp.ecdh_x(_int(1), pub)


def test_invalid_key_types_are_codec_errors() -> None:
    with pytest.raises(CodecError):
        secp.validate_public_key("not bytes")  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        secp.validate_private_key(12345)  # type: ignore[arg-type]


def test_sign_needs_32_byte_hash() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        secp.sign_recoverable(b"short", _int(1))


def _valid_sig() -> tuple[bytes, bytes]:
    msg = keccak256(b"recover me")
    return msg, secp.sign_recoverable(msg, _int(7))


@pytest.mark.parametrize(
    "mutate",
    [
        lambda s: s[:64],  # 64 bytes
        lambda s: s + b"\x00",  # 66 bytes
        lambda s: s[:64] + b"\x04",  # V >= 4 (geth checkSignature)
        lambda s: s[:64] + b"\x1b",  # V = 27: EIP-627 prose, but geth uses 0/1
        lambda s: bytes(32) + s[32:],  # r = 0
        lambda s: s[:32] + bytes(32) + s[64:],  # s = 0
        lambda s: _int(N) + s[32:],  # r = n
        lambda s: s[:32] + _int(N) + s[64:],  # s = n
        lambda s: b"\xff" * 64 + s[64:],  # r, s >= n
    ],
)
def test_recover_rejects_malformed_signatures(mutate: object) -> None:
    msg, sig = _valid_sig()
    bad = mutate(sig)  # type: ignore[operator]
    with pytest.raises(InvalidSignature):
        secp.recover_public_key(msg, bad)


def test_recover_rejects_bad_hash_length() -> None:
    msg, sig = _valid_sig()
    with pytest.raises(InvalidSignature):
        secp.recover_public_key(msg[:31], sig)


def test_recover_v2_without_valid_point_fails() -> None:
    # V = 2/3 means "R.x = r + n"; for an ordinary r that x is not on the curve (or >= p) and recovery fails.
    msg, sig = _valid_sig()
    with pytest.raises(InvalidSignature):
        secp.recover_public_key(msg, sig[:64] + b"\x02")
