"""The stored form of outbox entries, records and events: versioned JSON without the message payload.

Entries and records are read and written whole by their single writer and never filtered on inner fields,
so both backends keep them as one document column beside the key and index columns, and a field added
later is one more key, not a schema migration. The payload is left out: it is immutable per message hash
and up to ~1 MiB, so it lives once in the ``payloads`` table (written before the rows that refer to it),
which keeps every row of a Cassandra logged batch small (batch size thresholds, cassandra.yaml
``batch_size_fail_threshold``). Bytes are hex; absent optional fields are omitted.
"""

from __future__ import annotations

import json
from typing import Any

from msgstore.types import (
    ConfirmMode,
    HealthChange,
    HealthStatus,
    Message,
    MessageError,
    MessageErrorKind,
    MessageOrigin,
    OutboxEntry,
    Record,
    SendPriority,
    SendProgress,
    SendState,
    Subscription,
)

__all__ = [
    "decode_entry",
    "decode_health",
    "decode_record",
    "decode_subscription",
    "encode_entry",
    "encode_health",
    "encode_record",
    "encode_subscription",
]

VERSION = 1
Doc = dict[str, Any]


def _dump(doc: Doc) -> bytes:
    doc["v"] = VERSION
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _load(raw: bytes) -> Doc:
    doc: Doc = json.loads(raw)
    if doc.get("v") != VERSION:
        raise ValueError(f"unknown document version {doc.get('v')!r}")
    return doc


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


def _unhex(value: str | None) -> bytes | None:
    return None if value is None else bytes.fromhex(value)


def _message(m: Message) -> Doc:
    return {
        "topic": m.content_topic,
        "version": m.version,
        "timestamp": m.timestamp,
        "meta": _hex(m.meta),
        "rlp_proof": _hex(m.rate_limit_proof),
        "ephemeral": m.ephemeral,
    }


def _unmessage(d: Doc, payload: bytes) -> Message:
    return Message(
        payload=payload,
        content_topic=d["topic"],
        version=d["version"],
        timestamp=d["timestamp"],
        meta=_unhex(d["meta"]),
        rate_limit_proof=_unhex(d["rlp_proof"]),
        ephemeral=d["ephemeral"],
    )


def _error(e: MessageError | None) -> Doc | None:
    if e is None:
        return None
    return {
        "kind": int(e.kind),
        "detail": e.detail,
        "fault": e.envelope_fault,
        "attempt": e.attempt,
        "at": e.occurred_at,
    }


def _unerror(d: Doc | None) -> MessageError | None:
    if d is None:
        return None
    return MessageError(MessageErrorKind(d["kind"]), d["detail"], d["fault"], d["attempt"], d["at"])


def _progress(p: SendProgress | None) -> Doc | None:
    if p is None:
        return None
    return {
        "state": int(p.state),
        "priority": int(p.priority),
        "attempts": p.attempts,
        "max_attempts": p.max_attempts,
        "relayed": p.relayed_peers,
        "store_conf": p.store_confirmation,
        "scheduled": p.scheduled_at,
        "last": p.last_attempt_at,
        "next": p.next_attempt_at,
        "finished": p.finished_at,
    }


def _unprogress(d: Doc | None) -> SendProgress | None:
    if d is None:
        return None
    return SendProgress(
        state=SendState(d["state"]),
        priority=SendPriority(d["priority"]),
        attempts=d["attempts"],
        max_attempts=d["max_attempts"],
        relayed_peers=d["relayed"],
        store_confirmation=d["store_conf"],
        scheduled_at=d["scheduled"],
        last_attempt_at=d["last"],
        next_attempt_at=d["next"],
        finished_at=d["finished"],
    )


def encode_entry(e: OutboxEntry) -> bytes:
    """An outbox entry's document (payload excluded); ``trace`` only when the request has a trace context
    (the key came later: documents without it are read as having none)."""
    doc: Doc = {
        "request_id": e.request_id,
        "hash": e.message_hash.hex(),
        "pubsub": e.pubsub_topic,
        "message": _message(e.message),
        "progress": _progress(e.progress),
        "confirm": int(e.confirm_mode),
        "monitor": e.monitor_content_topic,
        "ttl": e.ttl,
        "sending": e.sending,
        "sent": e.sent,
        "stored": e.stored,
        "error": _error(e.error),
        "envelope": e.envelope_hash.hex(),
        "seq": e.sequence,
        "updated": e.updated_at,
        "sent_at": e.sent_at,
        "stored_at": e.stored_at,
    }
    if e.traceparent:
        doc["trace"] = e.traceparent
    return _dump(doc)


def decode_entry(raw: bytes, payload: bytes) -> OutboxEntry:
    """The entry of ``raw`` with its message's ``payload``."""
    d = _load(raw)
    progress = _unprogress(d["progress"])
    assert progress is not None
    return OutboxEntry(
        request_id=d["request_id"],
        message_hash=bytes.fromhex(d["hash"]),
        pubsub_topic=d["pubsub"],
        message=_unmessage(d["message"], payload),
        progress=progress,
        confirm_mode=ConfirmMode(d["confirm"]),
        monitor_content_topic=d["monitor"],
        ttl=d["ttl"],
        sending=d["sending"],
        sent=d["sent"],
        stored=d["stored"],
        error=_unerror(d["error"]),
        envelope_hash=bytes.fromhex(d["envelope"]),
        sequence=d["seq"],
        updated_at=d["updated"],
        sent_at=d["sent_at"],
        stored_at=d["stored_at"],
        traceparent=d.get("trace", ""),
    )


def encode_record(r: Record) -> bytes:
    """A message record's document (payload excluded)."""
    return _dump(
        {
            "hash": r.message_hash.hex(),
            "pubsub": r.pubsub_topic,
            "message": _message(r.message),
            "origin": int(r.origin),
            "created": r.created_at,
            "request_id": r.request_id,
            "flags": [r.sending, r.sent, r.stored, r.received],
            "error": _error(r.error),
            "envelope": r.envelope_hash.hex(),
            "subs": list(r.subscription_ids),
            "rev": r.revision,
            "progress": _progress(r.send_progress),
            "updated": r.updated_at,
            "sent_at": r.sent_at,
            "stored_at": r.stored_at,
            "received_at": r.received_at,
        }
    )


def decode_record(raw: bytes, payload: bytes) -> Record:
    """The record of ``raw`` with its message's ``payload``."""
    d = _load(raw)
    sending, sent, stored, received = d["flags"]
    return Record(
        message_hash=bytes.fromhex(d["hash"]),
        pubsub_topic=d["pubsub"],
        message=_unmessage(d["message"], payload),
        origin=MessageOrigin(d["origin"]),
        created_at=d["created"],
        request_id=d["request_id"],
        sending=sending,
        sent=sent,
        stored=stored,
        received=received,
        error=_unerror(d["error"]),
        envelope_hash=bytes.fromhex(d["envelope"]),
        subscription_ids=tuple(d["subs"]),
        revision=d["rev"],
        send_progress=_unprogress(d["progress"]),
        updated_at=d["updated"],
        sent_at=d["sent_at"],
        stored_at=d["stored_at"],
        received_at=d["received_at"],
    )


def encode_subscription(s: Subscription) -> bytes:
    """A subscription's document."""
    return _dump(
        {
            "id": s.subscription_id,
            "pubsub": s.pubsub_topic,
            "topics": list(s.content_topics),
            "envelope_topics": [t.hex() for t in s.envelope_topics],
            "created": s.created_at,
            "background": s.background,
            "store_conf": s.store_confirmation,
            "active": s.active,
            "ended": s.ended_at,
            "received": s.received_count,
        }
    )


def decode_subscription(raw: bytes) -> Subscription:
    """The subscription of ``raw``."""
    d = _load(raw)
    return Subscription(
        subscription_id=d["id"],
        pubsub_topic=d["pubsub"],
        content_topics=tuple(d["topics"]),
        envelope_topics=tuple(bytes.fromhex(t) for t in d["envelope_topics"]),
        created_at=d["created"],
        background=d["background"],
        store_confirmation=d["store_conf"],
        active=d["active"],
        ended_at=d["ended"],
        received_count=d["received"],
    )


def encode_health(h: HealthChange) -> bytes:
    """A ``health:change`` payload."""
    return _dump({"status": int(h.status), "previous": int(h.previous)})


def decode_health(raw: bytes) -> HealthChange:
    """The health change of ``raw``."""
    d = _load(raw)
    return HealthChange(HealthStatus(d["status"]), HealthStatus(d["previous"]))
