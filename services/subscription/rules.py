"""The MessageRecord transition rules of MESSAGING-API "Properties of MessageRecord", as pure functions.

Each input (a message received on a subscription, a send status, a stored confirmation) is merged into the
previous state of the record, and :func:`events_for` derives the events the change emits. The rules:

- ``sending``/``sent`` apply only to messages this node sent ("not applicable to messages that are received
  by the node").
- ``sent`` becomes true "only after the ``sending`` property has transitioned back to ``false``": while the
  send service still reports ``sending`` the record keeps ``sent`` false, and turns it true (``message:sent``)
  in the update where ``sending`` is false.
- ``sent``, ``stored`` and ``received`` are terminal: once true they stay true whatever a later input says.
- ``error`` is set by a failed send (again only once ``sending`` is false) or a receive-side failure
  (``message:error``), and cleared by a later success ("if a message that initially encountered an error ...
  is later successfully transmitted, the error information MUST be cleared").
- Events only for actual changes (MESSAGING-API "Event source": "dispatched only after an actual change"):
  the specific ones first (``message:sent``, ``message:error``, ``message:received``, ``message:stored``),
  then ``message:change`` when any of ``sending``, ``sent``, ``stored``, ``received`` changed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from msgstore.types import (
    EventType,
    Message,
    MessageError,
    MessageOrigin,
    Record,
    SendProgress,
)

__all__ = ["Change", "SendUpdate", "events_for", "merge_received", "merge_send", "merge_stored"]


@dataclass(frozen=True, slots=True)
class SendUpdate:
    """One state of a Send API request as ``SendService.WatchSendStatuses`` reports it."""

    request_id: str
    message_hash: bytes
    pubsub_topic: str
    message: Message
    sending: bool
    sent: bool
    stored: bool
    error: MessageError | None
    progress: SendProgress | None
    envelope_hash: bytes
    updated_at: float


@dataclass(frozen=True, slots=True)
class Change:
    """A record's new state and the events it emits (possibly none: e.g. a subscription id appended)."""

    record: Record
    events: tuple[EventType, ...]


def events_for(previous: Record | None, current: Record) -> tuple[EventType, ...]:
    """The events ``previous`` → ``current`` emits, specific ones first, ``message:change`` last."""
    before = previous or Record(
        message_hash=current.message_hash,
        pubsub_topic=current.pubsub_topic,
        message=current.message,
        origin=current.origin,
        created_at=current.created_at,
    )
    events: list[EventType] = []
    if current.sent and not before.sent:
        events.append(EventType.MESSAGE_SENT)
    if current.error is not None and current.error != before.error:
        events.append(EventType.MESSAGE_ERROR)
    if current.received and not before.received:
        events.append(EventType.MESSAGE_RECEIVED)
    if current.stored and not before.stored:
        events.append(EventType.MESSAGE_STORED)
    flags = ("sending", "sent", "stored", "received")
    if any(getattr(current, f) != getattr(before, f) for f in flags) or (
        previous is None and current.error is not None
    ):
        events.append(EventType.MESSAGE_CHANGE)
    return tuple(events)


def _changed(previous: Record | None, current: Record) -> Change | None:
    if previous is not None and _same(previous, current):
        return None
    return Change(current, events_for(previous, current))


def _same(a: Record, b: Record) -> bool:
    # updated_at and revision move with every write; they are not part of the state.
    return replace(a, updated_at=0.0, revision=0) == replace(b, updated_at=0.0, revision=0)


def merge_received(
    previous: Record | None,
    *,
    message_hash: bytes,
    pubsub_topic: str,
    message: Message,
    envelope_hash: bytes,
    subscription_id: str,
    now: float,
) -> Change | None:
    """A message seen on active subscription ``subscription_id``: ``received`` (terminal), the id appended.

    A record of our own sent message keeps its origin, request id and send fields (the records merge).
    """
    if previous is None:
        record = Record(
            message_hash=message_hash,
            pubsub_topic=pubsub_topic,
            message=message,
            origin=MessageOrigin.SUBSCRIPTION,
            created_at=now,
            received=True,
            envelope_hash=envelope_hash,
            subscription_ids=(subscription_id,),
            updated_at=now,
            received_at=now,
        )
        return Change(record, events_for(None, record))
    ids = previous.subscription_ids
    if subscription_id not in ids:
        ids = (*ids, subscription_id)
    record = replace(
        previous,
        received=True,
        received_at=previous.received_at if previous.received else now,
        subscription_ids=ids,
        envelope_hash=previous.envelope_hash or envelope_hash,
        updated_at=now,
    )
    return _changed(previous, record)


def merge_send(previous: Record | None, update: SendUpdate, *, now: float) -> Change | None:
    """A send status merged into the record of its message (created by the first status seen)."""
    base = previous or Record(
        message_hash=update.message_hash,
        pubsub_topic=update.pubsub_topic,
        message=update.message,
        origin=MessageOrigin.SEND,
        created_at=update.progress.scheduled_at if update.progress else now,
    )
    settled = not update.sending
    sent = base.sent or (settled and update.sent)
    stored = base.stored or update.stored
    error = base.error
    if update.error is not None and settled:
        error = update.error
    elif update.error is None and (update.sent or update.stored):
        error = None  # a later success clears the error
    record = replace(
        base,
        # a received message the node then sends keeps SUBSCRIPTION's reception facts but becomes ours
        origin=MessageOrigin.SEND,
        request_id=base.request_id or update.request_id,
        sending=update.sending,
        sent=sent,
        stored=stored,
        error=error,
        envelope_hash=update.envelope_hash or base.envelope_hash,
        send_progress=update.progress or base.send_progress,
        updated_at=now,
        sent_at=base.sent_at if base.sent else (now if sent else None),
        stored_at=base.stored_at if base.stored else (now if stored else None),
    )
    return _changed(previous, record)


def merge_stored(previous: Record, *, now: float) -> Change | None:
    """The store confirmed the record's envelope: ``stored`` turns true (terminal); None if it already was."""
    if previous.stored:
        return None
    record = replace(previous, stored=True, stored_at=now, updated_at=now)
    return _changed(previous, record)
