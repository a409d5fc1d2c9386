"""A Messaging API Send as a gRPC client sends it (services/send: ``input_from`` and ``validation.prepare``).

The input is the serialized ``SendRequest`` (send.proto); protobuf's own parse errors are protobuf's. The
rest is ours: the translation to the domain input, then the checks and the outbox entry (MESSAGING-API
"Send", 14/WAKU2-MESSAGE: served pubsub topic, content topic, meta, payload size, ttl, timestamp, the
deterministic hash). Contract: only InvalidMessage / UnsupportedPubsubTopic escape (INVALID_ARGUMENT and
NOT_FOUND); an entry is QUEUED on a served topic with a parsed content topic, a 32-byte hash and a sent
time within the sync allowance.
"""

from __future__ import annotations

import atheris
from google.protobuf.message import DecodeError

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from mailmesh.send.v1 import send_pb2
    from msgapi.topics import TopicPolicy
    from msgstore.types import SendState
    from services.send.convert import input_from
    from services.send.errors import InvalidMessage, UnsupportedPubsubTopic
    from services.send.validation import SendRules, prepare
    from wakucodec.contenttopic import ContentTopic

_NOW = 1_700_000_000.0
_RULES = SendRules(
    topics=TopicPolicy(1, (0, 1)),
    default_ttl_s=120,
    max_attempts=4,
    store_confirmation=True,
    confirm_content_topics=frozenset({"/waku/1/0xf26e7779/rfc26"}),
    max_message_size=4096,
)


def test_one_input(data: bytes) -> None:
    """Parse ``data`` as a SendRequest, translate and prepare it; check the contract above."""
    try:
        request = send_pb2.SendRequest.FromString(data)
    except DecodeError:
        return
    try:
        entry = prepare(input_from(request), _RULES, _NOW)
    except (InvalidMessage, UnsupportedPubsubTopic):
        return
    assert entry.state is SendState.QUEUED and entry.pubsub_topic in _RULES.topics.topics
    assert str(ContentTopic.parse(entry.message.content_topic)) == entry.message.content_topic
    assert len(entry.message_hash) == 32 and len(entry.message.meta or b"") <= 64
    timestamp = entry.message.timestamp or 0
    assert timestamp % 1_000_000_000 == 0 and timestamp // 1_000_000_000 <= _NOW + 10


if __name__ == "__main__":
    fuzz_main(test_one_input)
