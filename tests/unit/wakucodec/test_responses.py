"""0x7f bundles and 0x7d completions, every dialect (protocol-notes §3.1-3.2, §3.7, §4.6, §9 items 7-8)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wakucodec import rlp
from wakucodec.envelope import decode_envelope, encode_envelopes, make_envelope
from wakucodec.errors import InvalidResponse, SizeLimitExceeded
from wakucodec.historyrequest import Dialect
from wakucodec.responses import (
    ZERO_HASH,
    Completion,
    CompletionForm,
    MessageForm,
    bundle_envelopes,
    completion_form_for,
    decode_completion,
    decode_p2p_messages,
    encode_completion,
    encode_completion_error,
    encode_p2p_messages,
    message_form_for,
    parse_completion_bytes,
    split_sized,
)

RID = bytes(range(1, 33))
LAST = bytes(range(101, 133))
CURSOR = bytes(range(36))


def _env(i: int, size: int = 4) -> bytes:
    return make_envelope(expiry=1000 + i, ttl=10, topic=b"\x00\x00\x00\x01", data=bytes([i % 256]) * size).raw


# ------------------------------------------------------------------------------------------------ forms


@pytest.mark.parametrize(
    ("dialect", "shh", "message_form", "completion_form"),
    [
        (Dialect.STATUS_PLAIN, False, MessageForm.LIST, CompletionForm.CONCATENATED),
        (Dialect.STATUS_ENVELOPE, False, MessageForm.LIST, CompletionForm.CONCATENATED),
        (Dialect.STATUS_LEGACY_6, True, MessageForm.LIST, CompletionForm.CONCATENATED),
        (Dialect.SPEC_5, False, MessageForm.LIST, CompletionForm.RLP_LIST),
        (Dialect.SPEC_6_TOPICS, True, MessageForm.LIST, CompletionForm.RLP_LIST),
        (Dialect.GETH_BINARY, True, MessageForm.SINGLE, CompletionForm.CONCATENATED),
        (Dialect.GETH_BINARY, False, MessageForm.LIST, CompletionForm.CONCATENATED),  # waku lists always
    ],
)
def test_answer_in_the_dialect_of_the_request(
    dialect: Dialect, shh: bool, message_form: MessageForm, completion_form: CompletionForm
) -> None:
    assert message_form_for(dialect, shh=shh) is message_form
    assert completion_form_for(dialect) is completion_form


# ------------------------------------------------------------------------------------------------ 0x7f


def test_p2p_messages_list_form_even_for_one_envelope() -> None:
    one = _env(1)
    payload = encode_p2p_messages([one])
    assert payload == encode_envelopes([decode_envelope(one)])
    assert decode_p2p_messages(payload) == ([one], MessageForm.LIST)


def test_p2p_messages_keep_raw_bytes_and_order() -> None:
    envs = [_env(i, size=30 * i) for i in range(5)]
    payload = encode_p2p_messages(envs)
    raws, form = decode_p2p_messages(payload)
    assert form is MessageForm.LIST and raws == envs
    assert [decode_envelope(r).hash for r in raws] == [decode_envelope(e).hash for e in envs]


def test_p2p_messages_empty_list() -> None:
    assert decode_p2p_messages(b"\xc0") == ([], MessageForm.LIST)


def test_p2p_message_single_envelope_geth_form() -> None:
    one = _env(7)
    assert decode_p2p_messages(one) == ([one], MessageForm.SINGLE)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x80",  # a string, not a list
        b"\xc3\x01\x02\x03",  # three strings: not an envelope
        rlp.encode([[b"\x01"], b"\x02"]),  # mixed list / string
        rlp.encode([b"\x01", b"\x02", b"\x03", [b"\x04"], b"\x05"]),  # 5 items, one of them a list
        b"\xc5\x01\x02",  # truncated
        b"\xc1\x01\xff",  # trailing byte
    ],
)
def test_p2p_messages_malformed(payload: bytes) -> None:
    with pytest.raises(InvalidResponse):
        decode_p2p_messages(payload)


def test_p2p_messages_size_limit() -> None:
    with pytest.raises(SizeLimitExceeded):
        decode_p2p_messages(encode_p2p_messages([_env(1, 100)]), max_size=50)


@given(st.binary(max_size=64))
def test_p2p_messages_never_leaks_untyped_errors(data: bytes) -> None:
    with contextlib.suppress(InvalidResponse):
        decode_p2p_messages(data)


# ------------------------------------------------------------------------------------------------ bundling


def test_bundles_are_split_at_the_limit_including_the_list_header() -> None:
    envs = [_env(i, size=40) for i in range(4)]  # each 1 + 1+2 + 1+2 + 1+4 + 1+40 + 1+0 ... bytes
    size = len(envs[0])
    exact = len(encode_p2p_messages(envs[:2]))
    assert list(bundle_envelopes(envs, exact)) == [envs[:2], envs[2:]]
    # One byte less and only one envelope fits per bundle, although 2 * size < exact - 1 would fit status-go's
    # rule (which ignores the header).
    assert 2 * size < exact - 1
    assert list(bundle_envelopes(envs, exact - 1)) == [[e] for e in envs]


def test_oversized_envelope_goes_alone() -> None:
    small, big = _env(1), _env(2, size=500)
    assert list(bundle_envelopes([small, big, small], 100)) == [[small], [big], [small]]


def test_no_batch_means_one_envelope_per_bundle() -> None:
    envs = [_env(i) for i in range(3)]
    assert list(bundle_envelopes(envs, 10**6, batch=False)) == [[e] for e in envs]
    assert list(bundle_envelopes(envs, 10**6)) == [envs]
    assert list(bundle_envelopes([], 100)) == []


def test_negative_limit_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        list(bundle_envelopes([_env(1)], -1))


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=300), max_size=40),
    limit=st.integers(min_value=0, max_value=2000),
)
def test_bundles_never_exceed_the_limit(sizes: list[int], limit: int) -> None:
    envs = [_env(i, size) for i, size in enumerate(sizes)]
    bundles = list(bundle_envelopes(envs, limit))
    assert [e for b in bundles for e in b] == envs  # order kept, nothing lost or duplicated
    for i, bundle in enumerate(bundles):
        assert bundle
        encoded = len(encode_p2p_messages(bundle))
        assert encoded <= limit or len(bundle) == 1  # only a lone oversize envelope may exceed
        if i + 1 < len(bundles):  # greedy: the next envelope did not fit
            assert len(encode_p2p_messages([*bundle, bundles[i + 1][0]])) > limit


# ------------------------------------------------------------------------------------------------ 0x7d encode


def test_concatenated_completion_is_one_rlp_string() -> None:
    payload = encode_completion(RID, LAST, CURSOR)
    assert rlp.decode(payload) == RID + LAST + CURSOR
    assert encode_completion(RID) == rlp.encode(RID + ZERO_HASH)  # nothing matched: zero last hash


def test_list_completion() -> None:
    payload = encode_completion(RID, LAST, b"any-length-cursor", form=CompletionForm.RLP_LIST)
    assert rlp.decode(payload) == [RID, LAST, b"any-length-cursor"]


def test_concatenated_cursor_must_be_36_bytes() -> None:
    with pytest.raises(InvalidResponse):
        encode_completion(RID, LAST, b"short")


@pytest.mark.parametrize(("rid", "last"), [(b"\x01" * 31, LAST), (RID, b"\x02" * 33)])
def test_completion_hash_lengths(rid: bytes, last: bytes) -> None:
    with pytest.raises(InvalidResponse):
        encode_completion(rid, last)
    with pytest.raises(InvalidResponse):
        encode_completion(rid, last, form=CompletionForm.RLP_LIST)


def test_error_completion_status_go_form() -> None:
    payload = encode_completion_error(RID, "request is invalid: limit exceeds the maximum allowed value")
    assert (
        rlp.decode(payload)
        == b"ERROR=" + RID + b"request is invalid: limit exceeds the maximum allowed value"
    )
    assert decode_completion(payload) == Completion(
        request_id=RID, error="request is invalid: limit exceeds the maximum allowed value"
    )


def test_error_completion_list_form_is_an_empty_completion() -> None:
    payload = encode_completion_error(RID, "PoW too low", form=CompletionForm.RLP_LIST)
    assert rlp.decode(payload) == [RID, ZERO_HASH, b""]


# ------------------------------------------------------------------------------------------------ 0x7d decode


@pytest.mark.parametrize(
    ("form", "cursor"),
    [
        (CompletionForm.CONCATENATED, b""),
        (CompletionForm.CONCATENATED, CURSOR),
        (CompletionForm.RLP_LIST, b"c" * 90),
    ],
)
def test_completion_round_trip(form: CompletionForm, cursor: bytes) -> None:
    payload = encode_completion(RID, LAST, cursor, form=form)
    assert decode_completion(payload) == Completion(RID, LAST, cursor, None, form)


def test_list_completion_without_cursor_item() -> None:
    assert decode_completion(rlp.encode([RID, LAST])) == Completion(RID, LAST, form=CompletionForm.RLP_LIST)


# Edge cases of status-go's tryCreateMailServerRequestCompletedEvent / CreateMailServerEvent.
def test_parser_rejects_31_bytes() -> None:
    with pytest.raises(InvalidResponse, match="unexpected payload size: 31"):
        parse_completion_bytes(bytes(31))


def test_parser_32_bytes_is_request_id_only() -> None:
    assert parse_completion_bytes(RID) == Completion(RID, ZERO_HASH, b"")


def test_parser_64_bytes() -> None:
    assert parse_completion_bytes(RID + LAST) == Completion(RID, LAST, b"")


def test_parser_100_bytes_has_a_cursor() -> None:
    assert parse_completion_bytes(RID + LAST + CURSOR) == Completion(RID, LAST, CURSOR)


def test_parser_rejects_101_bytes() -> None:
    with pytest.raises(InvalidResponse, match="unexpected payload size: 101"):
        parse_completion_bytes(RID + LAST + CURSOR + b"x")


def test_parser_drops_a_short_cursor_like_status_go() -> None:
    assert parse_completion_bytes(RID + LAST + b"\x07" * 35) == Completion(RID, LAST, b"")
    assert parse_completion_bytes(RID + b"\x07" * 20) == Completion(RID, ZERO_HASH, b"")


def test_parser_error_form_is_checked_first_and_has_no_upper_bound() -> None:
    text = "x" * 500
    assert parse_completion_bytes(b"ERROR=" + RID + text.encode()) == Completion(RID, error=text)
    assert parse_completion_bytes(b"ERROR=" + RID) == Completion(RID, error="")  # exactly 38 bytes


def test_parser_short_error_payload_is_read_as_a_completion() -> None:
    # 37 bytes starting with ERROR=: below the 38-byte threshold, so status-go parses a plain completion.
    data = b"ERROR=" + RID[:31]
    assert parse_completion_bytes(data) == Completion(data[:32], ZERO_HASH, b"")


def test_parser_error_text_with_invalid_utf8() -> None:
    assert parse_completion_bytes(b"ERROR=" + RID + b"\xff") == Completion(RID, error="\ufffd")


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xb8",  # truncated string header
        rlp.encode(bytes(31)),
        rlp.encode([RID]),
        rlp.encode([RID, LAST, b"", b"extra"]),
        rlp.encode([RID[:31], LAST, b""]),
        rlp.encode([RID, LAST[:31], b""]),
        rlp.encode([RID, LAST, [b"nested"]]),
        rlp.encode([[RID], LAST]),
    ],
)
def test_decode_completion_malformed(payload: bytes) -> None:
    with pytest.raises(InvalidResponse):
        decode_completion(payload)


@given(st.binary(max_size=120))
def test_decode_completion_never_leaks_untyped_errors(data: bytes) -> None:
    for candidate in (data, rlp.encode(data)):
        with contextlib.suppress(InvalidResponse):
            decode_completion(candidate)


@given(items=st.lists(st.binary(max_size=200), max_size=30))
def test_split_sized_inverts_concatenation(items: list[bytes]) -> None:
    assert split_sized(b"".join(items), [len(i) for i in items]) == items


@pytest.mark.parametrize(
    ("body", "sizes"), [(b"abc", [1, 1]), (b"abc", [2, 2]), (b"", [1]), (b"ab", [3, -1])]
)
def test_split_sized_refuses_sizes_that_do_not_add_up(body: bytes, sizes: list[int]) -> None:
    with pytest.raises(InvalidResponse, match="add up"):
        split_sized(body, sizes)
