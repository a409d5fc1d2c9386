"""Whisper v6 message plaintext: layout, padding, signature, parsing, sealing (protocol-notes §2.1-2.5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wakucodec import ecies, payload, secp, symmetric
from wakucodec.errors import DecryptionFailed, InvalidKey, InvalidPayload, InvalidSignature, SizeLimitExceeded
from wakucodec.keccak import keccak256

SIGNER = bytes.fromhex("289c2857d4598e37fb9647507e47a309d6133539bf21a8b9cb6df88fd5232032")
SIGNER_PUB = secp.public_key(SIGNER)
RECIPIENT = bytes.fromhex("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
SYM_KEY = symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD)


def _reference_validate_and_parse(raw: bytes) -> tuple[bytes, bytes] | None:
    """status-go waku/common/message.go ``ValidateAndParse``, transliterated; signature recovery left out.

    Returns ``(payload, padding)`` or None where Go returns false. (geth's version differs only in panicking
    instead of returning false when ``size + 1 <= end < 1 + n + size``.)
    """
    end = len(raw)
    if end < 1:
        return None
    if raw[0] & 4:
        end -= 65
        if end <= 1:
            return None
    beg, size, body = 1, 0, b""
    n = raw[0] & 3
    if n != 0:
        if end < beg + n:
            return None
        size = int.from_bytes(raw[beg : beg + n], "little")
        beg += n
        if beg + size > end:
            return None
        body = raw[beg : beg + size]
    beg += size
    return body, raw[beg:end]


# --- size field and padding (§2.1-2.2) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("length", "field"), [(0, 1), (255, 1), (256, 2), (65535, 2), (65536, 3), (2**24 - 1, 3)]
)
def test_size_field_length(length: int, field: int) -> None:
    assert payload.size_field_length(length) == field


def test_size_field_limit() -> None:
    # A 4-byte field would OR 4 into the flags — the signature flag — so 16 MiB payloads are refused.
    with pytest.raises(SizeLimitExceeded):
        payload.size_field_length(2**24)
    with pytest.raises(SizeLimitExceeded):
        payload.build(bytes(2**24))


@pytest.mark.parametrize(
    ("length", "signed", "padding"),
    [
        # NIMETH tests (§2.2): unsigned 3 → 251, 254 → 256, 253 → 1.
        (3, False, 251),
        (254, False, 256),
        (253, False, 1),
        # Signed counterparts by the formula 256 - (1 + field + len + 65) % 256.
        (3, True, 186),
        (189, True, 256),
        (188, True, 1),
        (255, False, 255),
        (256, False, 253),
        (65536, False, 252),
        (65536, True, 187),
    ],
)
def test_padding_lengths(length: int, signed: bool, padding: int) -> None:
    assert payload.padding_length(length, signed=signed) == padding
    raw = payload.build(bytes(length), signing_key=SIGNER if signed else None)
    assert len(raw) % 256 == 0
    msg = payload.parse(raw)
    assert len(msg.padding) == padding
    assert msg.payload == bytes(length)


@pytest.mark.parametrize("length", [255, 256, 65535, 65536])
def test_size_field_bytes_little_endian(length: int) -> None:
    raw = payload.build(b"\xab" * length, padding=b"\x00")
    n = payload.size_field_length(length)
    assert raw[0] == n
    assert raw[1 : 1 + n] == length.to_bytes(n, "little")
    assert raw[1 + n : 1 + n + length] == b"\xab" * length
    assert raw[1 + n + length :] == b"\x00"
    assert payload.parse(raw).payload == b"\xab" * length


def test_exact_layout_with_given_padding() -> None:
    assert payload.build(b"abc", padding=b"\xff\xee") == bytes.fromhex("0103616263ffee")


def test_empty_padding_means_random_like_geth() -> None:
    # geth appendPadding: `len(params.Padding) != 0` — an empty padding is "not provided".
    raw = payload.build(b"abc", padding=b"")
    assert len(raw) == 256


# --- signature (§2.3) ----------------------------------------------------------------------------------


def test_signed_layout() -> None:
    raw = payload.build(b"hello", signing_key=SIGNER, padding=b"\x01\x02")
    assert raw[0] == 0x05  # size field 1 | signature flag, set before signing
    body, sig = raw[:-65], raw[-65:]
    assert body == bytes.fromhex("0505") + b"hello" + b"\x01\x02"
    assert sig == secp.sign_recoverable(keccak256(body), SIGNER)
    assert sig[64] in (0, 1)
    msg = payload.parse(raw)
    assert (msg.payload, msg.padding, msg.signature, msg.signer, msg.raw) == (
        b"hello",
        b"\x01\x02",
        sig,
        SIGNER_PUB,
        raw,
    )
    assert msg.flags == 0x05


def test_unsigned_message_fields() -> None:
    msg = payload.parse(payload.build(b"x", padding=b"pp"))
    assert (msg.payload, msg.padding, msg.signature, msg.signer) == (b"x", b"pp", None, None)


def test_bad_signing_key() -> None:
    with pytest.raises(InvalidKey):
        payload.build(b"x", signing_key=bytes(32))


def test_flipped_signature_bytes_never_yield_the_signer() -> None:
    raw = payload.build(b"signed payload", signing_key=SIGNER)
    for index in range(len(raw) - 65, len(raw)):
        for mask in (0x01, 0x80):
            tampered = bytearray(raw)
            tampered[index] ^= mask
            try:
                msg = payload.parse(bytes(tampered))
            except InvalidPayload as err:
                assert isinstance(err.__cause__, InvalidSignature)
            else:
                assert msg.signer != SIGNER_PUB


def test_flipped_body_byte_changes_signer() -> None:
    raw = bytearray(payload.build(b"signed payload", signing_key=SIGNER, padding=b"\x00" * 10))
    raw[-66] ^= 0xFF  # last padding byte
    assert payload.parse(bytes(raw)).signer != SIGNER_PUB


# --- malformed input (status-go ValidateAndParse) ------------------------------------------------------

_SIG = payload.build(b"", signing_key=SIGNER, padding=b"\x00")[-65:]


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # end < 1
        b"\x04" + bytes(65),  # signed, end = 1
        b"\x04" + _SIG,  # signed, end = 1 (a real signature does not help)
        b"\x04",  # signed and shorter than a signature
        b"\x02\x01",  # 2-byte size field, 1 byte left
        b"\x03\x00\x00",  # 3-byte size field, 2 bytes left
        b"\x01",  # size field missing entirely
        b"\x01\x05abcd",  # declares 5, has 4
        b"\x02\x00\x01" + bytes(255),  # declares 256, has 255
        b"\x01\xff",  # declares 255, has 0
        b"\x05\x01" + _SIG,  # signed: declares 1 byte but the payload would run into the signature
        b"\x07\x00" + _SIG,  # signed: size field runs into the signature (geth panics here)
        b"\x06\x00" + _SIG,  # signed: 2-byte field, end = 2
    ],
)
def test_malformed(raw: bytes) -> None:
    assert _reference_validate_and_parse(raw) is None
    with pytest.raises(InvalidPayload):
        payload.parse(raw)


def test_size_past_end_that_passes_geths_weaker_check() -> None:
    # geth v1.9.20 checks only `size + 1 > end`: size = 2, end = 3 passes it, then `Raw[4:3]` panics.
    raw = b"\x01\x02a"
    with pytest.raises(InvalidPayload):
        payload.parse(raw)


def test_unrecoverable_signature_is_invalid_payload() -> None:
    raw = b"\x04\x00" + bytes(64) + b"\x00"  # r = s = 0
    with pytest.raises(InvalidPayload) as info:
        payload.parse(raw)
    assert isinstance(info.value.__cause__, InvalidSignature)


# --- where Go is lenient, and so are we ----------------------------------------------------------------


def test_unknown_flag_bits_are_ignored() -> None:
    msg = payload.parse(b"\xf9\x02abpad")  # 0xf9 = bits 3..7 set, size field 1, unsigned
    assert (msg.payload, msg.padding) == (b"ab", b"pad")


def test_no_size_field_means_everything_is_padding() -> None:
    msg = payload.parse(b"\x00hello")
    assert (msg.payload, msg.padding) == (b"", b"hello")
    assert payload.parse(b"\x00").padding == b""


def test_oversized_size_field_and_unaligned_padding() -> None:
    msg = payload.parse(b"\x03\x02\x00\x00ab")  # 3-byte field for a 2-byte payload, no padding
    assert (msg.payload, msg.padding) == (b"ab", b"")


def test_minimal_signed_message() -> None:
    body = b"\x04\x99"  # signed, no size field, one padding byte: end = 2 is the minimum
    raw = body + secp.sign_recoverable(keccak256(body), SIGNER)
    msg = payload.parse(raw)
    assert (msg.payload, msg.padding, msg.signer) == (b"", b"\x99", SIGNER_PUB)


@settings(max_examples=300)
@given(raw=st.binary(max_size=80))
def test_parse_matches_status_go_model(raw: bytes) -> None:
    expected = _reference_validate_and_parse(raw)
    try:
        msg = payload.parse(raw)
    except InvalidPayload as err:
        # Rejected: either Go rejects the structure too, or the (random) signature does not recover.
        assert expected is None or isinstance(err.__cause__, InvalidSignature)
        return
    assert expected == (msg.payload, msg.padding)
    assert msg.raw == raw


@settings(max_examples=100)
@given(body=st.binary(min_size=1, max_size=40))
def test_parse_matches_model_with_valid_signatures(body: bytes) -> None:
    body = bytes((body[0] | 4,)) + body[1:]
    raw = body + secp.sign_recoverable(keccak256(body), SIGNER)
    expected = _reference_validate_and_parse(raw)
    if expected is None:
        with pytest.raises(InvalidPayload):
            payload.parse(raw)
    else:
        msg = payload.parse(raw)
        assert (msg.payload, msg.padding, msg.signer) == (*expected, SIGNER_PUB)


# --- round trips and sealing ---------------------------------------------------------------------------

payloads = st.binary(max_size=700)
paddings = st.none() | st.binary(max_size=40)


@settings(max_examples=60)
@given(body=payloads, pad=paddings, signed=st.booleans())
def test_build_parse_round_trip(body: bytes, pad: bytes | None, signed: bool) -> None:
    raw = payload.build(body, signing_key=SIGNER if signed else None, padding=pad)
    msg = payload.parse(raw)
    assert msg.payload == body
    assert msg.raw == raw
    assert msg.signer == (SIGNER_PUB if signed else None)
    if pad:
        assert msg.padding == pad
    else:
        assert len(raw) % 256 == 0 and 1 <= len(msg.padding) <= 256


@settings(max_examples=40)
@given(body=payloads, signed=st.booleans())
def test_symmetric_seal_open(body: bytes, signed: bool) -> None:
    data = payload.seal_symmetric(body, SYM_KEY, signing_key=SIGNER if signed else None)
    assert len(data) % 256 == symmetric.OVERHEAD
    msg = payload.open_symmetric(data, SYM_KEY)
    assert msg.payload == body
    assert msg.signer == (SIGNER_PUB if signed else None)


@settings(max_examples=40)
@given(body=payloads, signed=st.booleans())
def test_asymmetric_seal_open(body: bytes, signed: bool) -> None:
    data = payload.seal_asymmetric(body, secp.public_key(RECIPIENT), signing_key=SIGNER if signed else None)
    assert len(data) % 256 == ecies.OVERHEAD
    msg = payload.open_asymmetric(data, RECIPIENT)
    assert msg.payload == body
    assert msg.signer == (SIGNER_PUB if signed else None)


def test_open_with_wrong_keys() -> None:
    sym = payload.seal_symmetric(b"x", SYM_KEY)
    with pytest.raises(DecryptionFailed):
        payload.open_symmetric(sym, symmetric.key_from_password("wwww"))
    asym = payload.seal_asymmetric(b"x", secp.public_key(RECIPIENT))
    with pytest.raises(DecryptionFailed):
        payload.open_asymmetric(asym, SIGNER)


def test_open_rejects_malformed_plaintext_inside_valid_encryption() -> None:
    with pytest.raises(InvalidPayload):
        payload.open_symmetric(symmetric.encrypt(SYM_KEY, b"\x01\x09abc"), SYM_KEY)
    with pytest.raises(InvalidPayload):
        payload.open_asymmetric(ecies.encrypt(secp.public_key(RECIPIENT), b""), RECIPIENT)


def test_explicit_padding_passes_through_sealing() -> None:
    data = payload.seal_symmetric(b"abc", SYM_KEY, padding=b"\x00\x01")
    assert payload.open_symmetric(data, SYM_KEY).padding == b"\x00\x01"
