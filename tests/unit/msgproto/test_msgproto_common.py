"""WakuMessage, MessageError and SendProgress round-trip between common.proto and msgstore.types."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from msgproto.common import (
    error_from_proto,
    error_to_proto,
    message_from_proto,
    message_to_proto,
    progress_from_proto,
    progress_to_proto,
)
from msgstore.types import Message, MessageError, MessageErrorKind, SendPriority, SendProgress, SendState

# Whole milliseconds: a float of UNIX seconds keeps them exactly through a Timestamp.
instants = st.integers(1, 4_000_000_000_000).map(lambda ms: ms / 1000)

messages = st.builds(
    Message,
    payload=st.binary(max_size=64),
    content_topic=st.text(max_size=40),
    version=st.none() | st.integers(0, 2**32 - 1),
    timestamp=st.none() | st.integers(-(2**63), 2**63 - 1),
    meta=st.none() | st.binary(max_size=64),
    rate_limit_proof=st.none() | st.binary(max_size=16),
    ephemeral=st.none() | st.booleans(),
)
errors = st.builds(
    MessageError,
    kind=st.sampled_from(MessageErrorKind),
    detail=st.text(max_size=40),
    envelope_fault=st.integers(0, 9),
    attempt=st.integers(0, 4),
    occurred_at=st.just(0.0) | instants,
)
progresses = st.builds(
    SendProgress,
    state=st.sampled_from(SendState),
    priority=st.sampled_from(SendPriority),
    attempts=st.integers(0, 4),
    max_attempts=st.integers(1, 4),
    relayed_peers=st.integers(0, 100),
    store_confirmation=st.booleans(),
    scheduled_at=instants,
    last_attempt_at=st.none() | instants,
    next_attempt_at=st.none() | instants,
    finished_at=st.none() | instants,
)


@given(messages)
def test_message_round_trips_and_keeps_absent_fields_absent(message: Message) -> None:
    wire = message_to_proto(message)
    assert wire.HasField("meta") is (message.meta is not None)
    assert message_from_proto(wire) == message


@given(errors)
def test_error_round_trips(error: MessageError) -> None:
    wire = error_to_proto(error)
    assert wire.HasField("occurred_at") is bool(error.occurred_at)
    assert error_from_proto(wire) == error


@given(progresses)
def test_progress_round_trips(progress: SendProgress) -> None:
    wire = progress_to_proto(progress)
    assert wire.HasField("finished_at") is (progress.finished_at is not None)
    assert progress_from_proto(wire) == progress
