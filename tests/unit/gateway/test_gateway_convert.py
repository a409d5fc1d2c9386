"""Protos to the REST JSON: record and event shapes, hashes, health names in both vocabularies."""

from __future__ import annotations

import pytest

from mailmesh.common.v1 import common_pb2
from mailmesh.subscription.v1 import subscription_pb2 as pb
from services.gateway.convert import EVENT_TYPES, event_json, parse_hash, record_json


def test_a_record_shows_optional_fields_only_when_set() -> None:
    message = common_pb2.WakuMessage(payload=b"Initial message", content_topic="/messaging/2/api/utf8")
    record = common_pb2.MessageRecord(
        message_hash=b"\xab" * 32, pubsub_topic="/waku/2/rs/1/0", message=message, received=True
    )
    assert record_json(record) == {
        "sending": False,
        "sent": False,
        "stored": False,
        "received": True,
        "messageHash": "0x" + "ab" * 32,
        "pubsubTopic": "/waku/2/rs/1/0",
        "message": {"payload": "SW5pdGlhbCBtZXNzYWdl", "contentTopic": "/messaging/2/api/utf8"},
    }
    record.message.version = 0
    record.message.ephemeral = False
    record.request_id = "r"
    record.error.detail = ""
    shown = record_json(record)
    assert shown["message"]["version"] == 0 and shown["message"]["ephemeral"] is False
    assert shown["requestId"] == "r" and shown["error"] == "error"


def test_a_health_event_carries_the_status_as_its_detail() -> None:
    event = pb.Event(sequence=7, name="health:change", waku_api_name="health:connection-status")
    event.emitted_at.FromSeconds(1_700_000_000)
    event.health.status = common_pb2.HEALTH_STATUS_HEALTHY
    event.health.previous = common_pb2.HEALTH_STATUS_MINIMALLY_HEALTHY
    event.health.connection_status = common_pb2.CONNECTION_STATUS_CONNECTED
    assert event_json(event) == {
        "sequence": 7,
        "event": "health:change",
        "wakuApiEvent": "health:connection-status",
        "emittedAt": "2023-11-14T22:13:20.000Z",
        "detail": "Healthy",
        "previous": "MinimallyHealthy",
        "connectionStatus": "Connected",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0x" + "0a" * 32, b"\x0a" * 32),
        ("0A" * 32, b"\x0a" * 32),
        ("abc123", None),
        ("0x" + "zz" * 32, None),
        ("", None),
    ],
)
def test_hashes_in_any_case_with_or_without_prefix(text: str, expected: bytes | None) -> None:
    assert parse_hash(text) == expected


def test_both_vocabularies_of_event_names_are_accepted() -> None:
    assert EVENT_TYPES["message:send-propagated"] == EVENT_TYPES["message:sent"]
    assert EVENT_TYPES["health:connection-status"] == EVENT_TYPES["health:change"]
    assert len(set(EVENT_TYPES.values())) == 6
