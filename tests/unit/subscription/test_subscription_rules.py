"""The MessageRecord rules of MESSAGING-API "Properties of MessageRecord" and the events each change emits."""

from __future__ import annotations

from dataclasses import replace

from msgstore.types import EventType, Message, MessageError, MessageErrorKind, MessageOrigin, Record
from services.subscription.rules import SendUpdate, events_for, merge_received, merge_send, merge_stored

H = b"\x11" * 32
ENV = b"\x22" * 32
MSG = Message(payload=b"hi", content_topic="/app/1/chat/proto", timestamp=10**18)
SUB_A, SUB_B = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
E = EventType
ERR = MessageError(MessageErrorKind.NO_PEERS, "no peer took it", attempt=1)


def receive(previous: Record | None, sub: str = SUB_A, now: float = 100.0) -> Record:
    change = merge_received(
        previous,
        message_hash=H,
        pubsub_topic="/waku/2/rs/1/0",
        message=MSG,
        envelope_hash=ENV,
        subscription_id=sub,
        now=now,
    )
    assert change is not None
    return change.record


def status(**kw: object) -> SendUpdate:
    base = dict(
        request_id="cccccccc-0000-4000-8000-000000000003",
        message_hash=H,
        pubsub_topic="/waku/2/rs/1/0",
        message=MSG,
        sending=True,
        sent=False,
        stored=False,
        error=None,
        progress=None,
        envelope_hash=ENV,
        updated_at=0.0,
    )
    base.update(kw)
    return SendUpdate(**base)  # type: ignore[arg-type]


def test_first_reception_creates_a_received_subscription_record_with_received_then_change() -> None:
    change = merge_received(
        None,
        message_hash=H,
        pubsub_topic="/waku/2/rs/1/0",
        message=MSG,
        envelope_hash=ENV,
        subscription_id=SUB_A,
        now=5.0,
    )
    assert change is not None
    r = change.record
    assert (r.received, r.origin, r.subscription_ids, r.received_at, r.created_at) == (
        True,
        MessageOrigin.SUBSCRIPTION,
        (SUB_A,),
        5.0,
        5.0,
    )
    assert (r.sending, r.sent, r.stored, r.request_id) == (False, False, False, "")
    assert change.events == (E.MESSAGE_RECEIVED, E.MESSAGE_CHANGE)


def test_a_repeated_reception_changes_nothing_and_emits_nothing() -> None:
    first = receive(None)
    assert (
        merge_received(
            first,
            message_hash=H,
            pubsub_topic="/waku/2/rs/1/0",
            message=MSG,
            envelope_hash=ENV,
            subscription_id=SUB_A,
            now=200.0,
        )
        is None
    )


def test_a_second_subscription_is_appended_without_events() -> None:
    first = receive(None)
    change = merge_received(
        first,
        message_hash=H,
        pubsub_topic="/waku/2/rs/1/0",
        message=MSG,
        envelope_hash=ENV,
        subscription_id=SUB_B,
        now=200.0,
    )
    assert change is not None
    assert change.record.subscription_ids == (SUB_A, SUB_B)
    assert change.record.received_at == 100.0  # received is terminal: its time does not move
    assert change.events == ()


def test_sent_waits_until_sending_is_false_then_message_sent_before_change() -> None:
    c1 = merge_send(None, status(sending=True, sent=True), now=1.0)
    assert c1 is not None
    assert (c1.record.sending, c1.record.sent, c1.record.origin) == (True, False, MessageOrigin.SEND)
    assert c1.events == (E.MESSAGE_CHANGE,)
    c2 = merge_send(c1.record, status(sending=False, sent=True), now=2.0)
    assert c2 is not None
    assert (c2.record.sending, c2.record.sent, c2.record.sent_at) == (False, True, 2.0)
    assert c2.events == (E.MESSAGE_SENT, E.MESSAGE_CHANGE)


def test_sent_and_stored_stay_true_whatever_a_later_status_says() -> None:
    c = merge_send(None, status(sending=False, sent=True, stored=True), now=1.0)
    assert c is not None
    later = merge_send(c.record, status(sending=False, sent=False, stored=False), now=2.0)
    assert later is None or (later.record.sent and later.record.stored)


def test_an_error_shows_only_once_sending_is_false_and_a_later_success_clears_it() -> None:
    c1 = merge_send(None, status(sending=True, error=ERR), now=1.0)
    assert c1 is not None and c1.record.error is None
    c2 = merge_send(c1.record, status(sending=False, error=ERR), now=2.0)
    assert c2 is not None and c2.record.error == ERR
    assert c2.events == (E.MESSAGE_ERROR, E.MESSAGE_CHANGE)
    c3 = merge_send(c2.record, status(sending=False, sent=True, error=None), now=3.0)
    assert c3 is not None and c3.record.error is None
    assert c3.events == (E.MESSAGE_SENT, E.MESSAGE_CHANGE)


def test_a_reception_of_our_own_message_merges_into_its_send_record() -> None:
    c = merge_send(None, status(sending=False, sent=True), now=1.0)
    assert c is not None
    merged = merge_received(
        c.record,
        message_hash=H,
        pubsub_topic="/waku/2/rs/1/0",
        message=MSG,
        envelope_hash=ENV,
        subscription_id=SUB_A,
        now=2.0,
    )
    assert merged is not None
    r = merged.record
    assert (r.origin, r.request_id, r.sent, r.received) == (
        MessageOrigin.SEND,
        c.record.request_id,
        True,
        True,
    )
    assert merged.events == (E.MESSAGE_RECEIVED, E.MESSAGE_CHANGE)


def test_stored_is_terminal_and_emitted_once() -> None:
    r = receive(None)
    c = merge_stored(r, now=300.0)
    assert c is not None
    assert (c.record.stored, c.record.stored_at, c.events) == (
        True,
        300.0,
        (E.MESSAGE_STORED, E.MESSAGE_CHANGE),
    )
    assert merge_stored(c.record, now=400.0) is None


def test_events_for_orders_specific_events_before_change() -> None:
    before = receive(None)
    after = replace(before, stored=True, sent=True, error=ERR)
    assert events_for(before, after) == (E.MESSAGE_SENT, E.MESSAGE_ERROR, E.MESSAGE_STORED, E.MESSAGE_CHANGE)
    assert events_for(before, replace(before, updated_at=99.0)) == ()
