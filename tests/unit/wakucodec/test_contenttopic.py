"""Content topics (23/WAKU2-TOPICS) and the v1 ↔ v2 mapping (protocol-notes §11.3, §11.5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wakucodec.contenttopic import (
    ContentTopic,
    content_topic_to_v1_topic,
    is_bridgeable,
    v1_topic_to_content_topic,
)
from wakucodec.errors import InvalidTopic
from wakucodec.keccak import keccak256


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/waku/2/default-content/proto", ContentTopic("waku", "2", "default-content", "proto")),
        ("/waku/1/0x01020304/rfc26", ContentTopic("waku", "1", "0x01020304", "rfc26")),
        ("/0/myapp/1/chat/proto", ContentTopic("myapp", "1", "chat", "proto", generation=0)),
        ("/00/myapp/1/chat/proto", ContentTopic("myapp", "1", "chat", "proto", generation=0)),
        ("/status/1/ünïcode name/json", ContentTopic("status", "1", "ünïcode name", "json")),
    ],
)
def test_parse_valid(text: str, expected: ContentTopic) -> None:
    assert ContentTopic.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "must start with a slash"),
        ("waku/2/x/proto", "must start with a slash"),
        ("/waku/2/x", "Invalid content topic structure"),
        ("/waku/2/x/proto/extra/more", "Invalid content topic structure"),
        ("/", "Invalid content topic structure"),
        ("//2/x/proto", "missing its application"),
        ("/waku//x/proto", "missing its version"),
        ("/waku/2//proto", "missing its topic-name"),
        ("/waku/2/x/", "missing its encoding"),
        ("//waku/2/x/proto", "missing its generation"),
        ("/1/waku/2/x/proto", "Generation > 0 are not supported yet"),
        ("/g/waku/2/x/proto", "generation should be a numeric value"),
        ("/-0/waku/2/x/proto", "generation should be a numeric value"),
        ("/+0/waku/2/x/proto", "generation should be a numeric value"),
        ("/\u0660/waku/2/x/proto", "generation should be a numeric value"),  # Arabic-Indic zero: not ASCII
        ("/0/waku//x/proto", "missing its version"),
    ],
)
def test_parse_invalid(text: str, reason: str) -> None:
    with pytest.raises(InvalidTopic, match=reason):
        ContentTopic.parse(text)


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(InvalidTopic):
        ContentTopic.parse(b"/waku/2/x/proto")  # type: ignore[arg-type]


_part = st.text(alphabet=st.characters(exclude_characters="/", exclude_categories=["Cs"]), min_size=1)


@given(app=_part, version=_part, name=_part, encoding=_part, generation=st.sampled_from([None, 0]))
def test_str_round_trip(app: str, version: str, name: str, encoding: str, generation: int | None) -> None:
    topic = ContentTopic(app, version, name, encoding, generation)
    assert ContentTopic.parse(str(topic)) == topic


def test_v1_to_content_topic_vector() -> None:
    # nwaku toV2ContentTopic / status-go wakuv2 topic.go: "/waku/1/" + hexutil.Encode(t[:]) + "/rfc26"
    assert v1_topic_to_content_topic(bytes.fromhex("f26e7779")) == "/waku/1/0xf26e7779/rfc26"
    assert v1_topic_to_content_topic(bytes(4)) == "/waku/1/0x00000000/rfc26"


@pytest.mark.parametrize("bad", [b"", b"\x01\x02\x03", b"\x01\x02\x03\x04\x05"])
def test_v1_to_content_topic_rejects_wrong_length(bad: bytes) -> None:
    with pytest.raises(InvalidTopic):
        v1_topic_to_content_topic(bad)


@given(st.binary(min_size=4, max_size=4))
def test_bridge_round_trip(topic: bytes) -> None:
    content_topic = v1_topic_to_content_topic(topic)
    assert is_bridgeable(content_topic)
    assert content_topic_to_v1_topic(content_topic) == topic


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("/waku/1/0xAABBCCDD/rfc26", "aabbccdd"),  # hex digits of either case (nwaku hexToSeqByte)
        ("/waku/1/aabbccdd/rfc26", "aabbccdd"),  # 0x optional, as nwaku
        ("/0/waku/1/0x01020304/rfc26", "01020304"),  # generation 0 is the default generation
    ],
)
def test_bridgeable_variants(text: str, topic: str) -> None:
    assert content_topic_to_v1_topic(text) == bytes.fromhex(topic)


@pytest.mark.parametrize(
    "text",
    [
        "/waku/2/default-content/proto",
        "/waku/1/0x0102030/rfc26",  # 7 digits
        "/waku/1/0x0102030405/rfc26",  # 5 bytes
        "/waku/1/0xzz020304/rfc26",  # not hex
        "/waku/1/0x01020304/proto",  # docs/design.md "Mapping onto Waku v1" names the rfc26 form only
        "/waku/2/0x01020304/rfc26",
        "/status/1/0x01020304/rfc26",
        "not a content topic",
        "",
    ],
)
def test_anything_else_maps_through_keccak(text: str) -> None:
    assert not is_bridgeable(text)
    assert content_topic_to_v1_topic(text) == keccak256(text.encode())[:4]


def test_keccak_mapping_vector() -> None:
    # Status public chats: topic = keccak256(name)[:4] (protocol-notes §2.6).
    assert (
        content_topic_to_v1_topic("/waku/2/default-content/proto")
        == keccak256(b"/waku/2/default-content/proto")[:4]
    )
    assert content_topic_to_v1_topic("") == bytes.fromhex("c5d24601")  # keccak256("") = c5d2460186f7…


def test_mapping_rejects_unencodable_strings() -> None:
    with pytest.raises(InvalidTopic):
        content_topic_to_v1_topic("/a/1/\ud800/proto")
    with pytest.raises(InvalidTopic):
        content_topic_to_v1_topic(42)  # type: ignore[arg-type]
