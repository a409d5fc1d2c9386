"""RLPx frame codec: geth's golden frame, round trips, MAC-before-decrypt and the size limit
(protocol-notes §5.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devp2p import constants as c
from devp2p.errors import BadMAC, FrameError, MessageTooLarge
from devp2p.frame import FrameCodec, padded_length
from devp2p.transport import MemoryTransport
from tests.unit.devp2p.vectors import FRAME_GOLDEN, FRAME_GOLDEN_CONTENT
from wakucodec import rlp
from wakucodec.keccak import keccak256, new_keccak256


class FakeHash:
    """geth's ``fakeHash``: ignores writes, its digest is always the same bytes."""

    def __init__(self, value: bytes) -> None:
        self.value = value

    def update(self, data: bytes | bytearray | memoryview, /) -> object:
        return self

    def digest(self) -> bytes:
        return self.value


class SpyDecryptor:
    """Wraps the codec's CTR decryptor to record whether anything was decrypted."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.calls = 0

    def update(self, data: bytes) -> bytes:
        self.calls += 1
        return self.inner.update(data)  # type: ignore[attr-defined,no-any-return]


def _golden_codec() -> FrameCodec:
    fake = FakeHash(b"\x01" * 32)
    return FrameCodec(keccak256(b""), keccak256(b""), fake, fake)


def test_golden_frame_encode() -> None:
    data = rlp.encode_uint(8) + rlp.encode([1, 2, 3, 4])
    assert data == FRAME_GOLDEN_CONTENT
    assert _golden_codec().encode(data) == FRAME_GOLDEN


def test_golden_frame_decode() -> None:
    codec = _golden_codec()
    size = codec.decode_header(FRAME_GOLDEN[:32])
    assert size == 6
    assert codec.decode_body(size, FRAME_GOLDEN[32:]) == FRAME_GOLDEN_CONTENT


def _pair(seed: bytes = b"session") -> tuple[FrameCodec, FrameCodec]:
    """Two codecs of one session: A's egress state equals B's ingress state and vice versa."""
    aes, mac = keccak256(seed + b"aes"), keccak256(seed + b"mac")
    a = FrameCodec(aes, mac, new_keccak256(b"a->b"), new_keccak256(b"b->a"))
    b = FrameCodec(aes, mac, new_keccak256(b"b->a"), new_keccak256(b"a->b"))
    return a, b


def _decode(codec: FrameCodec, frame: bytes) -> bytes:
    size = codec.decode_header(frame[:32])
    return codec.decode_body(size, frame[32:])


@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 31, 32, 33, 1000, 65536, 1 << 20])
def test_round_trip_sizes(size: int) -> None:
    a, b = _pair()
    data = bytes(i % 251 for i in range(size))
    frame = a.encode(data)
    assert len(frame) == 32 + padded_length(size) + 16
    assert _decode(b, frame) == data


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=8))
def test_round_trip_sequences_keep_the_keystream_and_macs_aligned(payloads: list[bytes]) -> None:
    a, b = _pair()
    for data in payloads:  # both directions interleaved: the streams are independent
        assert _decode(b, a.encode(data)) == data
        assert _decode(a, b.encode(data[::-1])) == data[::-1]


async def test_read_frame_from_transport() -> None:
    a, b = _pair()
    writer, reader = MemoryTransport.connected_pair()
    writer.write(a.encode(b"hello") + a.encode(b"") + a.encode(b"x" * 5000))
    assert await b.read_frame(reader) == b"hello"
    assert await b.read_frame(reader) == b""
    assert await b.read_frame(reader) == b"x" * 5000


@pytest.mark.parametrize("index", [0, 15, 16, 31, 32, 40, 47, 48, 63])
def test_any_tampered_byte_is_bad_mac_before_decryption(index: int) -> None:
    a, b = _pair()
    frame = bytearray(a.encode(b"sixteen bytes!!!"))  # 32 + 16 + 16 = 64 bytes
    frame[index] ^= 0x80
    spy = SpyDecryptor(b._dec)
    b._dec = spy  # type: ignore[assignment]
    with pytest.raises(BadMAC):
        _decode(b, bytes(frame))
    expected_calls = 1 if index >= 32 else 0  # a body error is found after the (valid) header was decrypted
    assert spy.calls == expected_calls
    with pytest.raises(FrameError, match="unusable"):  # the ingress state is poisoned
        b.decode_header(bytes(32))


async def test_oversized_frame_rejected_before_reading_the_body() -> None:
    a, b = _pair()
    writer, reader = MemoryTransport.connected_pair()
    frame = a.encode(bytes(5000))
    writer.write(frame[:32])  # header only: a reader that tried to read 5000 bytes would block forever
    with pytest.raises(MessageTooLarge) as info:
        await b.read_frame(reader, max_size=4096)
    assert (info.value.size, info.value.limit) == (5000, 4096)
    with pytest.raises(FrameError):
        await b.read_frame(reader)


def test_frame_size_limit_on_encode() -> None:
    a, _ = _pair()
    with pytest.raises(MessageTooLarge):
        a.encode(bytes(c.MAX_FRAME_SIZE + 1))


def test_header_carries_size_and_zero_header_data() -> None:
    aes, mac = keccak256(b"k"), keccak256(b"m")
    a = FrameCodec(aes, mac, new_keccak256(), new_keccak256())
    frame = a.encode(b"abc")
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    plain = Cipher(algorithms.AES(aes), modes.CTR(bytes(16))).decryptor().update(frame[:16])
    assert plain == b"\x00\x00\x03" + b"\xc2\x80\x80" + bytes(10)
