"""A Send request checked and turned into its outbox entry."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace

import pytest

from msgstore.types import ConfirmMode, Message, SendState
from services.send.errors import InvalidMessage, UnsupportedPubsubTopic
from services.send.validation import SendInput, prepare
from tests.unit.send.send_fixtures import RULES, T0, TOPIC
from wakucodec.wakumessage import WakuMessage, message_hash

NS = 1_000_000_000


def _input(**kw: object) -> SendInput:
    args: dict[str, object] = {
        "request_id": "",
        "pubsub_topic": "",
        "message": Message(payload=b"hello", content_topic=TOPIC),
    }
    args.update(kw)
    return SendInput(**args)  # type: ignore[arg-type]


def test_unsupported_pubsub_topic_has_the_spec_text() -> None:
    with pytest.raises(UnsupportedPubsubTopic) as err:
        prepare(_input(pubsub_topic="/waku/2/rs/1/7"), RULES, T0)
    assert err.value.message == "Failed to send message. Target pubsubTopic '/waku/2/rs/1/7' not supported."


def test_defaults_generated_id_default_topic_now_truncated_and_hash() -> None:
    e = prepare(_input(), RULES, T0 + 0.75)
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", e.request_id)
    assert e.pubsub_topic == "/waku/2/rs/1/0" and e.ttl == 120.0
    assert e.message.timestamp == int(T0) * NS
    assert e.state is SendState.QUEUED and e.sending and not e.sent and e.progress.max_attempts == 4
    expected = message_hash(
        "/waku/2/rs/1/0", WakuMessage(payload=b"hello", content_topic=TOPIC, timestamp=int(T0) * NS)
    )
    assert e.message_hash == expected


def test_sub_second_timestamps_are_dropped_before_hashing() -> None:
    given = int(T0) * NS + 123_456_789
    e = prepare(_input(message=Message(payload=b"x", content_topic=TOPIC, timestamp=given)), RULES, T0)
    same = prepare(
        _input(message=Message(payload=b"x", content_topic=TOPIC, timestamp=int(T0) * NS)), RULES, T0
    )
    assert e.message_hash == same.message_hash and e.message.timestamp == int(T0) * NS


@pytest.mark.parametrize(
    ("inp", "text"),
    [
        (_input(message=Message(payload=b"", content_topic="nope")), "invalid content topic"),
        (_input(message=Message(payload=b"", content_topic=TOPIC, meta=b"m" * 65)), "meta is 65 bytes"),
        (_input(message=Message(payload=b"x" * (1024 * 1024 - 19), content_topic=TOPIC)), "payload is"),
        (_input(message=Message(payload=b"", content_topic=TOPIC, timestamp=int(T0 + 11) * NS)), "future"),
        (
            _input(message=Message(payload=b"", content_topic=TOPIC, timestamp=int(T0 - 120) * NS)),
            "older than the ttl",
        ),
        (_input(ttl_s=9.0), "ttl must be"),
        (_input(ttl_s=86_401.0), "ttl must be"),
        (_input(request_id="NOT-A-GUID"), "requestId must be"),
        (
            _input(
                message=Message(payload=b"", content_topic=TOPIC, ephemeral=True),
                confirm_mode=ConfirmMode.STORE,
            ),
            "ephemeral",
        ),
    ],
)
def test_invalid_requests_are_refused_with_a_reason(inp: SendInput, text: str) -> None:
    with pytest.raises(InvalidMessage, match=text) as err:
        prepare(inp, RULES, T0)
    assert err.value.details["reason"] == "INVALID_MESSAGE"


def test_limits_are_inclusive() -> None:
    ok = _input(
        message=Message(payload=b"x" * (1024 * 1024 - 20), content_topic=TOPIC, meta=b"m" * 64), ttl_s=10.0
    )
    assert prepare(ok, RULES, T0).ttl == 10.0
    ahead = _input(message=Message(payload=b"", content_topic=TOPIC, timestamp=int(T0 + 10) * NS))
    assert prepare(ahead, RULES, T0).message.timestamp == int(T0 + 10) * NS


def test_store_confirmation_applies_as_configured() -> None:
    monitored = replace(RULES, store_confirmation=True, confirm_content_topics=frozenset({TOPIC}))
    assert prepare(_input(), monitored, T0).progress.store_confirmation
    assert not prepare(_input(), RULES, T0).progress.store_confirmation
    assert not prepare(_input(confirm_mode=ConfirmMode.SENT_ONLY), monitored, T0).progress.store_confirmation
    assert prepare(_input(confirm_mode=ConfirmMode.STORE), RULES, T0).progress.store_confirmation
    on = replace(RULES, store_confirmation=True)
    assert prepare(_input(monitor_content_topic=True), on, T0).progress.store_confirmation
    assert not prepare(_input(), on, T0).progress.store_confirmation
    ephemeral = _input(message=Message(payload=b"", content_topic=TOPIC, ephemeral=True))
    assert not prepare(ephemeral, monitored, T0).progress.store_confirmation


def test_generated_request_ids_are_distinct_uuid4_guids() -> None:
    ids = [prepare(_input(), RULES, T0).request_id for _ in range(600)]  # crosses two refills of the pool
    assert len(set(ids)) == 600
    assert all(uuid.UUID(i).version == 4 and str(uuid.UUID(i)) == i for i in ids)
