"""History requests: every dialect, the disambiguation rules, status-go's validation, and 0x7e end to end.

Sources: docs/protocol-notes.md §3.7, §4.1-4.2, §4.12, §9 item 6; SG ``mailserver/request.go``,
``waku/v1/peer.go``; G920 ``whisper/mailserver/mailserver.go``.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wakucodec import rlp, secp
from wakucodec.bloom import FULL_BLOOM, topics_to_bloom
from wakucodec.envelope import make_envelope
from wakucodec.errors import InvalidKey, InvalidRequest
from wakucodec.payload import seal_symmetric
from wakucodec.pow import calculate_pow
from wakucodec.requests import (
    DecodedRequest,
    Dialect,
    EncodedRequest,
    HistoryRequest,
    RejectedRequest,
    bytes_to_hash,
    decode_p2p_request,
    decode_payload,
    decode_plain,
    detect_payload_dialect,
    encode_p2p_request,
    encode_payload,
    encode_plain,
)
from wakucodec.symmetric import key_from_password

NOW = 1_700_000_000
T1, T2 = bytes.fromhex("f26e7779"), bytes.fromhex("aabbccdd")
BLOOM = topics_to_bloom([T1, T2])
CURSOR = bytes(range(36))
MAILSERVER_KEY = key_from_password("status-offline-inbox")
WWWW_KEY = key_from_password("wwww")  # geth wnode -test
ENVELOPE_DIALECTS = [d for d in Dialect if d is not Dialect.STATUS_PLAIN]
WITH_TOPICS = (Dialect.STATUS_ENVELOPE, Dialect.STATUS_PLAIN, Dialect.SPEC_6_TOPICS)

# ----------------------------------------------------------------------------------------- the model


def test_mailserver_key_vector() -> None:
    assert MAILSERVER_KEY.hex() == "765df27c0765526f920ba742ff4b9452bb0064e016435ffccd81186aa6feaae8"


def test_history_request_normalizes_its_shape() -> None:
    req = HistoryRequest(bloom=b"", topics=[T1], cursor=bytearray(b"c"))  # type: ignore[arg-type]
    assert req.bloom is None and req.topics == (T1,) and req.cursor == b"c"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"lower": -1}, "lower must be a uint32"),
        ({"upper": 2**32}, "upper must be a uint32"),
        ({"limit": True}, "limit must be a uint32"),
        ({"lower": 1.0}, "lower must be a uint32"),
        ({"bloom": bytes(63)}, "bloom filter must be 64 bytes"),
        ({"bloom": bytes(65)}, "bloom filter must be 64 bytes"),
        ({"bloom": "ff"}, "bloom must be bytes"),
        ({"topics": (b"abc",)}, "topic must be 4 bytes"),
        ({"topics": (b"abcde",)}, "topic must be 4 bytes"),
        ({"topics": ("abcd",)}, "topic must be 4 bytes"),
        ({"topics": b"abcd"}, "topics must be a sequence"),
        ({"cursor": None}, "cursor must be bytes"),
        ({"batch": 1}, "batch must be a bool"),
    ],
)
def test_history_request_rejects_bad_fields(kwargs: dict[str, object], reason: str) -> None:
    with pytest.raises(InvalidRequest, match=reason):
        HistoryRequest(**kwargs)  # type: ignore[arg-type]


# status-go MessagesRequestPayload.SetDefaults / Validate, messages verbatim (SG mailserver/request.go).
def test_with_defaults() -> None:
    assert HistoryRequest(topics=(T1,)).with_defaults(NOW) == HistoryRequest(
        topics=(T1,), limit=1000, upper=NOW + 60
    )
    kept = HistoryRequest(lower=1, upper=5, topics=(T1,), limit=7)
    assert kept.with_defaults(NOW) == kept
    assert HistoryRequest().with_defaults(2**32).upper == 2**32 - 1  # clamped, never overflows


RANGE, EMPTY, LIMIT = (
    "query range is invalid: lower > upper",
    "bloom filter and topics is empty",
    "limit exceeds the maximum allowed value",
)


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (HistoryRequest(lower=10, upper=9, bloom=BLOOM, limit=1), RANGE),
        (HistoryRequest(lower=1, upper=9, limit=1), EMPTY),
        (HistoryRequest(lower=1, upper=9, bloom=BLOOM, limit=1001), LIMIT),
        # status-go checks in this order: range first, then emptiness, then limit.
        (HistoryRequest(lower=10, upper=9, limit=5000), RANGE),
        (HistoryRequest(lower=1, upper=9, limit=5000), EMPTY),
    ],
)
def test_validate_status_go_messages(req: HistoryRequest, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        req.validate()
    assert info.value.message == message


def test_validate_accepts_topics_without_bloom_and_the_limit_bound() -> None:
    HistoryRequest(lower=1, upper=1, topics=(T1,), limit=1000).validate()
    HistoryRequest(lower=1, upper=1, bloom=bytes(64), limit=0).validate()  # a zero bloom is still a bloom


def test_normalize_caps_the_limit_and_lets_topics_override_bloom() -> None:
    req = HistoryRequest(lower=5, upper=0, bloom=BLOOM, topics=(T2,), limit=5000, cursor=CURSOR)
    assert req.normalize(NOW) == HistoryRequest(
        lower=5, upper=NOW + 60, topics=(T2,), limit=1000, cursor=CURSOR
    )
    assert HistoryRequest(bloom=BLOOM).normalize(NOW).bloom == BLOOM  # kept when there are no topics


def test_normalize_keeps_the_other_errors() -> None:
    with pytest.raises(InvalidRequest, match=RANGE):
        HistoryRequest(lower=NOW + 61, bloom=BLOOM).normalize(NOW)  # upper defaulted to NOW + 60 first
    with pytest.raises(InvalidRequest, match=EMPTY):
        HistoryRequest(lower=1, upper=2).normalize(NOW)


def test_dialect_properties() -> None:
    signed = [Dialect.STATUS_ENVELOPE, Dialect.STATUS_LEGACY_6, Dialect.GETH_BINARY]
    assert [d for d in Dialect if d.requires_signature] == signed
    assert [d for d in Dialect if not d.in_envelope] == [Dialect.STATUS_PLAIN]


# ----------------------------------------------------------------------------------------- dialect codecs

_u32 = st.integers(min_value=0, max_value=2**32 - 1)
_bloom = st.one_of(st.none(), st.binary(min_size=64, max_size=64))
_topics = st.lists(st.binary(min_size=4, max_size=4), max_size=6).map(tuple)
_cursor = st.binary(max_size=48)


def requests_in(dialect: Dialect) -> st.SearchStrategy[HistoryRequest]:
    """Requests a dialect can express (batch set to what the dialect implies where it has no field)."""
    topics = _topics if dialect in WITH_TOPICS else st.just(())
    batch = st.booleans() if dialect in (Dialect.STATUS_ENVELOPE, Dialect.STATUS_LEGACY_6) else st.just(True)
    bloom, cursor = _bloom, _cursor
    if dialect is Dialect.GETH_BINARY:
        bloom = st.one_of(st.just(FULL_BLOOM), st.binary(min_size=64, max_size=64))
        cursor = st.one_of(st.just(b""), st.binary(min_size=36, max_size=36))
        batch = st.just(False)
    # positional: lower, upper, bloom, topics, limit, cursor, batch
    return st.builds(HistoryRequest, _u32, _u32, bloom, topics, _u32, cursor, batch)


@pytest.mark.parametrize("dialect", ENVELOPE_DIALECTS)
@given(data=st.data())
def test_envelope_dialects_round_trip(dialect: Dialect, data: st.DataObject) -> None:
    req = data.draw(requests_in(dialect))
    encoded = encode_payload(req, dialect)
    assert detect_payload_dialect(encoded) is dialect
    assert decode_payload(encoded) == (req, dialect)
    assert decode_payload(encoded, dialect) == (req, dialect)


@given(req=requests_in(Dialect.STATUS_PLAIN), raw_id=st.binary(max_size=40))
def test_plain_round_trip(req: HistoryRequest, raw_id: bytes) -> None:
    assert decode_plain(encode_plain(req, raw_id)) == (req, raw_id)


def test_plain_layout_matches_status_go() -> None:
    req = HistoryRequest(lower=1, upper=2, topics=(T1,), limit=1000)
    assert encode_plain(req, b"I" * 32) == rlp.encode([b"I" * 32, 1, 2, 1000, b"", b"", [T1]])


_LAYOUT_REQ = HistoryRequest(lower=1, upper=2, bloom=BLOOM, topics=(T1,), limit=3, cursor=b"c", batch=False)


@pytest.mark.parametrize(
    ("dialect", "fields"),
    [
        (Dialect.STATUS_ENVELOPE, [1, 2, BLOOM, [T1], 3, b"c", b""]),  # Topics 4th, Batch false = 0x80
        (Dialect.SPEC_6_TOPICS, [1, 2, BLOOM, 3, b"c", [T1]]),
        (Dialect.STATUS_LEGACY_6, [1, 2, BLOOM, 3, b"c", b""]),
        (Dialect.SPEC_5, [1, 2, BLOOM, 3, b"c"]),
    ],
)
def test_envelope_payload_layouts(dialect: Dialect, fields: list[rlp.Encodable]) -> None:
    req = _LAYOUT_REQ if dialect in WITH_TOPICS else replace(_LAYOUT_REQ, topics=())
    assert encode_payload(req, dialect) == rlp.encode(fields)


# Shape-aware inputs for the canonical property: each dialect's slot layout, every slot usually a valid
# value and sometimes a near miss (non-canonical int, bad bool, wrong-length bloom or topic, a list where a
# string belongs), so many draws decode and the property is exercised, not just the rejections.
_uint_bytes = _u32.map(lambda i: i.to_bytes((i.bit_length() + 7) // 8, "big"))
_near_miss: st.SearchStrategy[rlp.Item] = st.one_of(
    st.sampled_from([b"\x00", b"\x00\x01", b"\x02", bytes(63), bytes(5)]),
    st.lists(st.one_of(st.binary(min_size=3, max_size=3), st.just([b"x"])), min_size=1, max_size=2),
)
_VALID_SLOT: dict[str, st.SearchStrategy[rlp.Item]] = {
    "uint": _uint_bytes,
    "bloom": st.one_of(st.just(b""), st.binary(min_size=64, max_size=64)),
    "bytes": st.binary(max_size=40),
    "topics": st.lists(st.binary(min_size=4, max_size=4), max_size=3),
    "bool": st.sampled_from([b"", b"\x01"]),
}
_SHAPES = {
    Dialect.STATUS_PLAIN: ["bytes", "uint", "uint", "uint", "bytes", "bloom", "topics"],
    Dialect.STATUS_ENVELOPE: ["uint", "uint", "bloom", "topics", "uint", "bytes", "bool"],
    Dialect.STATUS_LEGACY_6: ["uint", "uint", "bloom", "uint", "bytes", "bool"],
    Dialect.SPEC_6_TOPICS: ["uint", "uint", "bloom", "uint", "bytes", "topics"],
    Dialect.SPEC_5: ["uint", "uint", "bloom", "uint", "bytes"],
}


def _shaped(dialect: Dialect) -> st.SearchStrategy[list[rlp.Item]]:
    def slot(kind: str) -> st.SearchStrategy[rlp.Item]:  # a near miss one time in ten
        return st.tuples(st.integers(0, 9), _VALID_SLOT[kind], _near_miss).map(
            lambda t: t[2] if t[0] == 0 else t[1]
        )

    return st.tuples(*[slot(kind) for kind in _SHAPES[dialect]]).map(list)


def _encodable(item: rlp.Item) -> rlp.Encodable:
    return item if isinstance(item, bytes) else tuple(_encodable(x) for x in item)


@pytest.mark.parametrize("shape", [d for d in _SHAPES if d is not Dialect.STATUS_PLAIN])
@given(data=st.data())
def test_rlp_dialects_are_canonical(shape: Dialect, data: st.DataObject) -> None:
    """Whatever an RLP dialect decoder accepts re-encodes to the very same bytes."""
    encoded = rlp.encode(_encodable(data.draw(_shaped(shape))))
    try:
        req, dialect = decode_payload(encoded)
    except InvalidRequest:
        return
    assert encode_payload(req, dialect) == encoded


@given(items=_shaped(Dialect.STATUS_PLAIN))
def test_plain_dialect_is_canonical(items: list[rlp.Item]) -> None:
    encoded = rlp.encode(_encodable(items))
    try:
        req, raw_id = decode_plain(encoded)
    except InvalidRequest:
        return
    assert encode_plain(req, raw_id) == encoded


def test_an_rlp_list_wins_over_a_binary_length() -> None:
    # [0, 0, bloom(64), 0, ""] is exactly 72 bytes — a geth binary length — but it is an RLP list.
    five = encode_payload(HistoryRequest(bloom=BLOOM), Dialect.SPEC_5)
    assert len(five) == 72
    assert detect_payload_dialect(five) is Dialect.SPEC_5


def test_disambiguation_table() -> None:
    req = HistoryRequest(lower=1, upper=2, bloom=BLOOM, limit=3)
    examples = {
        Dialect.STATUS_ENVELOPE: encode_payload(
            HistoryRequest(lower=1, bloom=BLOOM, topics=(T1,)), Dialect.STATUS_ENVELOPE
        ),
        Dialect.STATUS_LEGACY_6: encode_payload(req, Dialect.STATUS_LEGACY_6),
        Dialect.SPEC_6_TOPICS: encode_payload(req, Dialect.SPEC_6_TOPICS),  # empty topics list still a list
        Dialect.SPEC_5: encode_payload(req, Dialect.SPEC_5),
        Dialect.GETH_BINARY: encode_payload(req, Dialect.GETH_BINARY),
    }
    for dialect, data in examples.items():
        assert detect_payload_dialect(data) is dialect, dialect
    # And the plain form is what decode_plain reads at the top level.
    assert decode_plain(encode_plain(req, b"x"))[0].limit == 3


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (rlp.encode([1, 2, b"", 3, b"", b"\x01", b""]), "7-item request payload without a Topics list"),
        (rlp.encode([1, 2, b"", 3]), "RLP list of 4 items"),
        (rlp.encode([1, 2, b"", 3, b"", [], b"", b""]), "RLP list of 8 items"),
        (rlp.encode([]), "RLP list of 0 items"),
        (rlp.encode([1, 2, b"", 3, b"", b"\x02"]), "Batch: invalid boolean"),  # legacy form, bad bool
        (rlp.encode([1, 2, bytes(63), 3, b""]), "bloom filter must be 64 bytes"),
        (rlp.encode([1, 2, b"", 3, b"", [b"abc"]]), "topic must be 4 bytes"),
        (rlp.encode([b"\x00\x01", 2, b"", 3, b""]), "non-canonical integer"),
        (rlp.encode([2**32, 2, b"", 3, b""]), "overflows uint32"),
        (rlp.encode([1, [2], b"", 3, b""]), "Upper: expected an RLP string"),
        (rlp.encode([1, 2, [b""], 3, b""]), "Bloom: expected an RLP string"),
        (rlp.encode([1, 2, b"", 3, b"", [[b"abcd"]]]), "Topics item: expected an RLP string"),
        (rlp.encode([1, 2, b"", b"topics", 3, b"", b""]), "7-item request payload"),
    ],
)
def test_envelope_payload_rejections(data: bytes, reason: str) -> None:
    with pytest.raises(InvalidRequest, match=reason):
        decode_payload(data)


def test_forced_dialect_must_match_the_shape() -> None:
    five = encode_payload(HistoryRequest(bloom=BLOOM, cursor=b"ab"), Dialect.SPEC_5)
    with pytest.raises(InvalidRequest, match="STATUS_LEGACY_6 payload must be an RLP list of 6 items"):
        decode_payload(five, Dialect.STATUS_LEGACY_6)
    with pytest.raises(InvalidRequest, match="expected 8, 72, 76 or 112"):
        decode_payload(five, Dialect.GETH_BINARY)
    with pytest.raises(InvalidRequest, match="use decode_plain"):
        decode_payload(five, Dialect.STATUS_PLAIN)


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc8", b"\x83ab", rlp.encode([1, 2, 3]), rlp.encode([[], [], [], [], [], [], []])],
)
def test_plain_rejections(data: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode_plain(data)


@given(st.binary(max_size=130))
def test_decoders_only_raise_invalid_request(data: bytes) -> None:
    for decoder in (decode_payload, decode_plain, detect_payload_dialect):
        with contextlib.suppress(InvalidRequest):
            decoder(data)


# ----------------------------------------------------------------------------------------- geth binary


def _binary(lower: int, upper: int, rest: bytes = b"") -> bytes:
    return lower.to_bytes(4, "big") + upper.to_bytes(4, "big") + rest


def test_geth_binary_8_bytes_means_full_bloom() -> None:
    assert decode_payload(_binary(5, 9)) == (
        HistoryRequest(lower=5, upper=9, bloom=FULL_BLOOM, batch=False),
        Dialect.GETH_BINARY,
    )


@pytest.mark.parametrize(
    ("tail", "limit", "cursor"),
    [(b"", 0, b""), ((7).to_bytes(4, "big"), 7, b""), ((7).to_bytes(4, "big") + CURSOR, 7, CURSOR)],
)
def test_geth_binary_72_76_112(tail: bytes, limit: int, cursor: bytes) -> None:
    bloom = topics_to_bloom([T1])
    expected = HistoryRequest(lower=1, upper=2, bloom=bloom, limit=limit, cursor=cursor, batch=False)
    assert decode_payload(_binary(1, 2, bloom + tail)) == (expected, Dialect.GETH_BINARY)


def test_geth_binary_encoder_picks_the_shortest_form() -> None:
    assert len(encode_payload(HistoryRequest(bloom=FULL_BLOOM), Dialect.GETH_BINARY)) == 8
    assert len(encode_payload(HistoryRequest(bloom=BLOOM), Dialect.GETH_BINARY)) == 72
    assert len(encode_payload(HistoryRequest(bloom=FULL_BLOOM, limit=1), Dialect.GETH_BINARY)) == 76
    assert len(encode_payload(HistoryRequest(bloom=BLOOM, cursor=CURSOR), Dialect.GETH_BINARY)) == 112


@pytest.mark.parametrize("size", [n for n in range(130) if n not in (8, 72, 76, 112)])
def test_geth_binary_other_lengths_rejected(size: int) -> None:
    # < 8 and 9..71 bytes: geth's / status-go's own texts (protocol-notes §4.12); 73+ is our strictness.
    if size < 8:
        reason = r"^Undersized p2p request$"
    elif size < 72:
        reason = r"^Undersized bloom filter in p2p request$"
    else:
        reason = "expected 8, 72, 76 or 112"
    with pytest.raises(InvalidRequest, match=reason):
        decode_payload(b"\x01" * size)


@pytest.mark.parametrize(
    ("req", "dialect", "reason"),
    [
        (HistoryRequest(bloom=BLOOM, topics=(T1,)), Dialect.STATUS_LEGACY_6, "cannot carry topics"),
        (HistoryRequest(bloom=BLOOM, topics=(T1,)), Dialect.SPEC_5, "cannot carry topics"),
        (HistoryRequest(bloom=BLOOM, topics=(T1,)), Dialect.GETH_BINARY, "cannot carry topics"),
        (HistoryRequest(topics=()), Dialect.GETH_BINARY, "need a bloom"),
        (HistoryRequest(bloom=BLOOM, cursor=b"short"), Dialect.GETH_BINARY, "cursor must be 36 bytes"),
        (HistoryRequest(bloom=BLOOM), Dialect.STATUS_PLAIN, "use encode_plain"),
    ],
)
def test_encoders_refuse_what_a_dialect_cannot_express(
    req: HistoryRequest, dialect: Dialect, reason: str
) -> None:
    with pytest.raises(InvalidRequest, match=reason):
        encode_payload(req, dialect)


# ----------------------------------------------------------------------------------------- request IDs


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (bytes(range(32)), bytes(range(32))),
        (b"\x01\x02", bytes(30) + b"\x01\x02"),  # right-aligned (Go Hash.SetBytes)
        (b"", bytes(32)),
        (bytes(range(40)), bytes(range(8, 40))),  # the last 32 bytes
    ],
)
def test_bytes_to_hash(raw: bytes, expected: bytes) -> None:
    assert bytes_to_hash(raw) == expected


# ----------------------------------------------------------------------------------------- 0x7e end to end

SIGNER = secp.generate_private_key()
SIGNER_PUB = secp.public_key(SIGNER)
SERVER_KEY = secp.generate_private_key()


def _decode(payload: bytes, **kwargs: Any) -> DecodedRequest:
    """Decode as a mailserver with the status-go key, no private key and no PoW minimum (or kwargs)."""
    options: dict[str, Any] = {
        "symmetric_keys": [MAILSERVER_KEY],
        "private_key": None,
        "min_pow": 0,
        **kwargs,
    }
    return decode_p2p_request(payload, now=NOW, **options)


def _build(req: HistoryRequest, dialect: Dialect, **kwargs: Any) -> EncodedRequest:
    """A client request as status-go built it: mailserver key, signed, now=NOW (override via kwargs)."""
    options: dict[str, Any] = {"symmetric_key": MAILSERVER_KEY, "signing_key": SIGNER, "now": NOW, **kwargs}
    return encode_p2p_request(req, dialect, **options)


def _sample(dialect: Dialect) -> HistoryRequest:
    if dialect is Dialect.GETH_BINARY:
        return HistoryRequest(lower=NOW - 3600, upper=NOW, bloom=BLOOM, limit=50, cursor=CURSOR, batch=False)
    topics = (T1, T2) if dialect in WITH_TOPICS else ()
    batch = dialect is not Dialect.STATUS_LEGACY_6  # exercise both bool values
    return HistoryRequest(
        lower=NOW - 3600, upper=NOW, bloom=BLOOM, topics=topics, limit=50, cursor=CURSOR, batch=batch
    )


@pytest.mark.parametrize("dialect", ENVELOPE_DIALECTS)
def test_signed_envelope_requests_end_to_end(dialect: Dialect) -> None:
    req = _sample(dialect)
    encoded = _build(req, dialect)
    assert encoded.envelope is not None and encoded.envelope.ttl == 50 and encoded.envelope.topic == bytes(4)
    decoded = _decode(encoded.payload)
    assert decoded == DecodedRequest(req, dialect, encoded.envelope.hash, SIGNER_PUB)  # as sent


def test_plain_request_end_to_end() -> None:
    req = _sample(Dialect.STATUS_PLAIN)
    encoded = encode_p2p_request(req, Dialect.STATUS_PLAIN)
    raw_id = rlp.decode(encoded.payload)[0]
    assert isinstance(raw_id, bytes) and len(raw_id) == 32 and raw_id.isascii()  # hex of a random UUID
    assert _decode(encoded.payload) == DecodedRequest(req, Dialect.STATUS_PLAIN, raw_id, None)


@pytest.mark.parametrize(
    ("raw_id", "expected"), [(b"\x05", bytes(31) + b"\x05"), (bytes(range(33)), bytes(range(1, 33)))]
)
def test_plain_request_id_uses_bytes_to_hash(raw_id: bytes, expected: bytes) -> None:
    encoded = encode_p2p_request(HistoryRequest(topics=(T1,)), Dialect.STATUS_PLAIN, request_id=raw_id)
    assert encoded.request_id == expected
    assert _decode(encoded.payload).request_id == expected


@pytest.mark.parametrize("dialect", ENVELOPE_DIALECTS)
def test_unsigned_envelope_requests(dialect: Dialect) -> None:
    encoded = _build(_sample(dialect), dialect, signing_key=None)
    if dialect in (Dialect.SPEC_5, Dialect.SPEC_6_TOPICS):  # NWAKU sends these unsigned
        decoded = _decode(encoded.payload)
        assert decoded.dialect is dialect and decoded.signer is None
        return
    with pytest.raises(
        RejectedRequest, match=r"^check message signature failed: Wrong signature of p2p"
    ) as info:
        _decode(encoded.payload)
    assert info.value.request_id == encoded.request_id and info.value.dialect is dialect


def test_nwaku_style_request() -> None:
    # NWAKU requestMail: [lower, upper, bloom, limit, cursor], unsigned, in Envelope(expiry: 0, ttl: 0).
    req = HistoryRequest(lower=NOW - 60, upper=NOW, bloom=BLOOM, limit=100)
    encoded = _build(req, Dialect.SPEC_5, signing_key=None, now=0, ttl=0)
    assert encoded.envelope is not None and (encoded.envelope.expiry, encoded.envelope.ttl) == (0, 0)
    decoded = _decode(encoded.payload, min_pow=1.0)  # TTL 0 → +Inf PoW in Go: passes any minimum
    assert decoded.dialect is Dialect.SPEC_5 and decoded.request == req


def test_wrong_key_is_rejected_with_the_request_id() -> None:
    encoded = _build(_sample(Dialect.STATUS_ENVELOPE), Dialect.STATUS_ENVELOPE, symmetric_key=WWWW_KEY)
    with pytest.raises(RejectedRequest, match=r"^failed to decrypt p2p request$") as info:
        _decode(encoded.payload)
    assert isinstance(info.value, InvalidRequest) and info.value.request_id == encoded.request_id
    second_key_works = _decode(encoded.payload, symmetric_keys=[MAILSERVER_KEY, WWWW_KEY])
    assert second_key_works.dialect is Dialect.STATUS_ENVELOPE
    with pytest.raises(RejectedRequest, match="failed to decrypt"):
        _decode(encoded.payload, symmetric_keys=[])


def test_asymmetric_request() -> None:
    req = _sample(Dialect.STATUS_ENVELOPE)
    encoded = _build(req, Dialect.STATUS_ENVELOPE, symmetric_key=None, public_key=secp.public_key(SERVER_KEY))
    assert _decode(encoded.payload, private_key=SERVER_KEY).signer == SIGNER_PUB
    with pytest.raises(RejectedRequest, match="failed to decrypt"):
        _decode(encoded.payload, private_key=secp.generate_private_key())


def test_pow_check() -> None:
    encoded = _build(_sample(Dialect.STATUS_ENVELOPE), Dialect.STATUS_ENVELOPE, pow_target=0.002)
    assert encoded.envelope is not None
    achieved = calculate_pow(encoded.envelope)
    assert achieved >= 0.002
    assert _decode(encoded.payload, min_pow=0.002).dialect is Dialect.STATUS_ENVELOPE
    with pytest.raises(RejectedRequest, match=r"^PoW too low$") as info:
        _decode(encoded.payload, min_pow=achieved * 2)
    assert info.value.request_id == encoded.request_id
    assert _decode(encoded.payload, min_pow=-1.0).dialect is Dialect.STATUS_ENVELOPE  # <= 0: not checked


def test_validation_failures_carry_the_id_and_status_go_text() -> None:
    bad = HistoryRequest(lower=10, upper=5, bloom=BLOOM)
    encoded = _build(bad, Dialect.STATUS_ENVELOPE)
    with pytest.raises(RejectedRequest) as info:
        _decode(encoded.payload)
    assert info.value.message == "request is invalid: query range is invalid: lower > upper"
    assert info.value.request_id == encoded.request_id and info.value.dialect is Dialect.STATUS_ENVELOPE
    plain = encode_p2p_request(HistoryRequest(lower=1, upper=2), Dialect.STATUS_PLAIN, request_id=b"r" * 32)
    with pytest.raises(RejectedRequest, match=rf"^request is invalid: {EMPTY}$") as info:
        _decode(plain.payload)
    assert info.value.request_id == b"r" * 32 and info.value.dialect is Dialect.STATUS_PLAIN


def test_decode_passes_the_request_as_sent() -> None:
    # upper 0, limit 0, a limit above 1000 and a bloom beside topics all survive decoding: the query side
    # (history-query, HistoryRequest.normalize) applies the defaults, once.
    for sent in (
        HistoryRequest(topics=(T1,), limit=5000),
        HistoryRequest(lower=NOW - 10, upper=0, bloom=BLOOM, topics=(T1,), limit=0),
    ):
        decoded = _decode(encode_p2p_request(sent, Dialect.STATUS_PLAIN).payload).request
        assert decoded == sent
    assert HistoryRequest(topics=(T1,), limit=5000).normalize(NOW).limit == 1000  # capped, not refused


def test_decode_checks_with_the_defaulted_upper_but_does_not_keep_it() -> None:
    # status-go refuses an invalid request before the rate limit, so the decoder must check it: upper 0 is
    # "now + 60" for the comparison with lower.
    ok = encode_p2p_request(HistoryRequest(lower=NOW + 60, upper=0, topics=(T1,)), Dialect.STATUS_PLAIN)
    assert _decode(ok.payload).request.upper == 0
    late = encode_p2p_request(HistoryRequest(lower=NOW + 61, upper=0, topics=(T1,)), Dialect.STATUS_PLAIN)
    with pytest.raises(RejectedRequest, match=r"^request is invalid: query range is invalid: lower > upper$"):
        _decode(late.payload)


def test_undecodable_inner_payload() -> None:
    data = seal_symmetric(rlp.encode([1, 2, 3]), MAILSERVER_KEY, signing_key=SIGNER)
    env = make_envelope(expiry=NOW + 50, ttl=50, topic=bytes(4), data=data)
    with pytest.raises(RejectedRequest, match=r"^failed to decode data: request payload is an RLP list of 3"):
        _decode(env.raw)


@pytest.mark.parametrize(
    "payload",
    [b"", b"\xc0", b"\x01" * 72, rlp.encode([1, 2, 3, 4]), rlp.encode([b"id", 1, 2, 3, b"", b"", b"x"])],
)
def test_unidentifiable_packets(payload: bytes) -> None:
    with pytest.raises(InvalidRequest, match=r"^invalid p2p request message$") as info:
        _decode(payload)
    assert not isinstance(info.value, RejectedRequest)


def test_configuration_and_size_errors() -> None:
    with pytest.raises(InvalidKey):
        _decode(b"", symmetric_keys=[b"short"])
    with pytest.raises(InvalidKey):
        _decode(b"", private_key=bytes(32))
    big = encode_p2p_request(HistoryRequest(topics=(T1,) * 10), Dialect.STATUS_PLAIN).payload
    with pytest.raises(InvalidRequest, match="limit is 10"):
        decode_p2p_request(big, symmetric_keys=[], private_key=None, min_pow=0, now=NOW, max_size=10)


def test_encode_needs_exactly_one_key() -> None:
    with pytest.raises(ValueError):
        encode_p2p_request(HistoryRequest(bloom=BLOOM), Dialect.SPEC_5)
    with pytest.raises(ValueError):
        _build(HistoryRequest(bloom=BLOOM), Dialect.SPEC_5, public_key=SIGNER_PUB)  # and the default sym key


@given(st.binary(max_size=200))
def test_decode_p2p_request_only_raises_invalid_request(data: bytes) -> None:
    with contextlib.suppress(InvalidRequest):  # anything else (IndexError, other CodecErrors) fails the test
        _decode(data)


@given(data=st.binary(max_size=300), signed=st.booleans())
def test_any_sealed_inner_payload_only_raises_invalid_request(data: bytes, signed: bool) -> None:
    sealed = seal_symmetric(data, MAILSERVER_KEY, signing_key=SIGNER if signed else None)
    env = make_envelope(expiry=NOW + 50, ttl=50, topic=bytes(4), data=sealed)
    try:
        decoded = _decode(env.raw, private_key=SERVER_KEY)
    except RejectedRequest as err:
        assert err.request_id == env.hash
        return
    assert decoded.request_id == env.hash and decoded.dialect is not Dialect.STATUS_PLAIN


@given(data=st.binary(max_size=300))
def test_any_envelope_data_only_raises_invalid_request(data: bytes) -> None:
    env = make_envelope(expiry=NOW + 50, ttl=50, topic=bytes(4), data=data)
    with pytest.raises(RejectedRequest, match=r"^failed to decrypt p2p request$"):
        _decode(env.raw, private_key=SERVER_KEY)
