"""Regression tests for what the fuzzing campaign found in wakucodec (docs/fuzzing.md "Findings").

Each input is the minimized one from the finding, as a literal; each test failed before its fix.
"""

from __future__ import annotations

import pytest

from wakucodec.bloom import FULL_BLOOM
from wakucodec.errors import InvalidRequest
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.requestdialects import decode_payload, detect_payload_dialect, encode_payload

# request_payload: a 76-byte geth binary request whose 72-byte form is one canonical RLP list
# (f8 46 ‖ 70 bytes: 01, 01, a 64-byte string, 00, 00). Its limit is 0, so the encoder chose the 72-byte
# form, which decoders read as SPEC_5 and refused ("Limit: non-canonical integer").
BINARY_76_WHOSE_72_IS_RLP = bytes.fromhex("f8460101b840" + "00" * 70)


def test_a_binary_request_whose_short_form_is_rlp_reencodes_as_binary() -> None:
    req, dialect = decode_payload(BINARY_76_WHOSE_72_IS_RLP)
    assert dialect is Dialect.GETH_BINARY
    assert (req.lower, req.upper, req.limit, req.bloom) == (0xF8460101, 0xB8400000, 0, bytes(64))
    encoded = encode_payload(req, Dialect.GETH_BINARY)
    assert encoded == BINARY_76_WHOSE_72_IS_RLP  # the next longer form, with an explicit limit 0
    assert decode_payload(encoded) == (req, Dialect.GETH_BINARY)


def test_the_8_byte_full_bloom_form_is_skipped_when_it_is_an_rlp_list() -> None:
    # c7 80 80 80 80 80 80 80: a 7-item list — as 8 bytes it would be refused as a malformed STATUS_ENVELOPE.
    req = HistoryRequest(lower=0xC7808080, upper=0x80808080, bloom=FULL_BLOOM, batch=False)
    encoded = encode_payload(req, Dialect.GETH_BINARY)
    assert len(encoded) == 72 and detect_payload_dialect(encoded) is Dialect.GETH_BINARY
    assert decode_payload(encoded) == (req, Dialect.GETH_BINARY)


def test_a_cursor_request_with_no_binary_form_is_refused_by_the_encoder() -> None:
    # 112 bytes that are one canonical RLP list (f8 6e ‖ 110 bytes): there is no longer form to fall back on.
    body = bytes.fromhex("b840") + bytes(64) + bytes.fromhex("a0") + bytes(32) + bytes(11)
    raw = bytes.fromhex("f86e") + body
    assert len(raw) == 112
    req = HistoryRequest(
        lower=int.from_bytes(raw[0:4], "big"),
        upper=int.from_bytes(raw[4:8], "big"),
        bloom=raw[8:72],
        limit=int.from_bytes(raw[72:76], "big"),
        cursor=raw[76:],
    )
    with pytest.raises(InvalidRequest, match="also an RLP list"):
        encode_payload(req, Dialect.GETH_BINARY)
