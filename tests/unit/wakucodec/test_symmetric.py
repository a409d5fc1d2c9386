"""AES-256-GCM ``ciphertext ‖ tag ‖ nonce`` and PBKDF2 password keys (protocol-notes §2.4, §2.6-2.7)."""

from __future__ import annotations

import pytest
from Crypto.Cipher import AES
from hypothesis import given, settings
from hypothesis import strategies as st

from wakucodec import symmetric
from wakucodec.errors import DecryptionFailed, InvalidKey

H = bytes.fromhex
keys = st.binary(min_size=32, max_size=32).filter(any)


def _oracle_seal(key: bytes, nonce: bytes, plaintext: bytes) -> bytes:
    """pycryptodome's GCM as an independent implementation of geth's ``Seal(...) ‖ nonce``."""
    ct, tag = AES.new(key, AES.MODE_GCM, nonce=nonce).encrypt_and_digest(plaintext)
    return bytes(ct) + bytes(tag) + nonce


# --- PBKDF2 --------------------------------------------------------------------------------------------


def test_mailserver_password_key() -> None:
    # §2.7: status-go's default mailserver password; the same key is hard-coded in murmur's manager.js.
    assert symmetric.MAILSERVER_PASSWORD == "status-offline-inbox"
    assert symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD) == H(
        "765df27c0765526f920ba742ff4b9452bb0064e016435ffccd81186aa6feaae8"
    )


def test_wnode_password_key() -> None:
    # §2.7: geth `wnode -test` uses "wwww".
    assert symmetric.key_from_password("wwww") == H(
        "448652d595bd6ec00b2a9ea220ad6c26592d9bf4cf79023d3c1b30cb681e6e07"
    )


def test_password_key_is_cached_and_uses_65356_iterations() -> None:
    assert symmetric.PBKDF2_ITERATIONS == 65356  # not 65536
    first = symmetric.key_from_password("cache me")
    hits = symmetric.key_from_password.cache_info().hits
    assert symmetric.key_from_password("cache me") is first
    assert symmetric.key_from_password.cache_info().hits == hits + 1


# --- known answers -------------------------------------------------------------------------------------


def test_gcm_spec_test_case_14_zero_key_decrypts() -> None:
    # McGrew & Viega, "The Galois/Counter Mode of Operation", test case 14 (AES-256, zero key/IV/plaintext).
    # Encryption refuses the all-zero key, decryption (like geth's) does not.
    data = H("cea7403d4d606b6e074ec5d3baf39d18") + H("d0d1c8a799996bf0265b98b5d48ab919") + bytes(12)
    assert symmetric.decrypt(bytes(32), data) == bytes(16)


def test_gcm_spec_test_case_15() -> None:
    key = H("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
    nonce = H("cafebabefacedbaddecaf888")
    plaintext = H(
        "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
        "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
    )
    expected = (
        H(
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
            "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad"
        )
        + H("b094dac5d93471bdec1a502270e3cc6c")
        + nonce
    )
    assert symmetric.encrypt(key, plaintext, nonce=nonce) == expected
    assert symmetric.decrypt(key, expected) == plaintext


def test_fixed_nonce_known_answer_with_mailserver_key() -> None:
    # Computed once with `cryptography`; cross-checked here against pycryptodome's independent GCM.
    key = symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD)
    nonce = bytes(range(12))
    ciphertext, tag = H("39fa8cd6eb1d676b893aa6d382"), H("674372f19c71260e118d7d6bdca56700")
    expected = ciphertext + tag + nonce
    assert symmetric.encrypt(key, b"hello whisper", nonce=nonce) == expected
    assert _oracle_seal(key, nonce, b"hello whisper") == expected
    assert symmetric.decrypt(key, expected) == b"hello whisper"


# --- properties ----------------------------------------------------------------------------------------


@settings(max_examples=100)
@given(key=keys, plaintext=st.binary(max_size=2048), nonce=st.binary(min_size=12, max_size=12))
def test_round_trip_against_oracle(key: bytes, plaintext: bytes, nonce: bytes) -> None:
    data = symmetric.encrypt(key, plaintext, nonce=nonce)
    assert len(data) == len(plaintext) + symmetric.OVERHEAD
    assert data == _oracle_seal(key, nonce, plaintext)
    assert symmetric.decrypt(key, data) == plaintext


@settings(max_examples=50)
@given(key=keys, plaintext=st.binary(max_size=300))
def test_random_nonce_round_trip(key: bytes, plaintext: bytes) -> None:
    a = symmetric.encrypt(key, plaintext)
    b = symmetric.encrypt(key, plaintext)
    assert a[-12:] != b[-12:]  # fresh nonce each time
    assert symmetric.decrypt(key, a) == symmetric.decrypt(key, b) == plaintext


_KEY = H("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
_SAMPLE = symmetric.encrypt(_KEY, b"some whisper plaintext", nonce=b"\x07" * 12)


@settings(max_examples=100)
@given(
    index=st.integers(min_value=0, max_value=len(_SAMPLE) - 1), mask=st.integers(min_value=1, max_value=255)
)
def test_tampering_fails(index: int, mask: int) -> None:
    tampered = bytearray(_SAMPLE)
    tampered[index] ^= mask
    with pytest.raises(DecryptionFailed):
        symmetric.decrypt(_KEY, bytes(tampered))


def test_wrong_key_fails() -> None:
    with pytest.raises(DecryptionFailed):
        symmetric.decrypt(bytes(reversed(_KEY)), _SAMPLE)
    with pytest.raises(DecryptionFailed):
        symmetric.decrypt(_KEY[:16], _SAMPLE)


@pytest.mark.parametrize("length", [0, 1, 11, 12, 27])
def test_short_input(length: int) -> None:
    with pytest.raises(DecryptionFailed):
        symmetric.decrypt(_KEY, _SAMPLE[:length])


def test_empty_plaintext_is_28_bytes() -> None:
    data = symmetric.encrypt(_KEY, b"")
    assert len(data) == 28
    assert symmetric.decrypt(_KEY, data) == b""


# --- key rules (geth validateDataIntegrity on encrypt, aes.NewCipher on decrypt) ------------------------


@pytest.mark.parametrize("key", [bytes(32), b"", b"\x01" * 16, b"\x01" * 24, b"\x01" * 31, b"\x01" * 33])
def test_encrypt_refuses_bad_keys(key: bytes) -> None:
    with pytest.raises(InvalidKey):
        symmetric.encrypt(key, b"x")


@pytest.mark.parametrize("length", [16, 24])
def test_decrypt_accepts_any_aes_key_length_like_geth(length: int) -> None:
    key = bytes(range(1, length + 1))
    data = _oracle_seal(key, b"\x01" * 12, b"aes-128/192 works in geth's decryptSymmetric")
    assert symmetric.decrypt(key, data) == b"aes-128/192 works in geth's decryptSymmetric"


@pytest.mark.parametrize("length", [0, 15, 20, 31, 33, 64])
def test_decrypt_refuses_invalid_aes_key_lengths(length: int) -> None:
    with pytest.raises(InvalidKey):
        symmetric.decrypt(b"\x01" * length, _SAMPLE)


def test_nonce_must_be_12_bytes() -> None:
    with pytest.raises(ValueError, match="12 bytes"):
        symmetric.encrypt(_KEY, b"x", nonce=b"\x00" * 16)
