"""Entries for the send service's unit tests."""

from __future__ import annotations

from msgapi.topics import TopicPolicy
from msgstore.types import Message, OutboxEntry, SendPriority, SendProgress, SendState
from services.send.validation import SendRules

T0 = 1_800_000_000.0
TOPIC = "/waku/1/0x01020304/rfc26"
RULES = SendRules(
    topics=TopicPolicy(1, (0, 1)),
    default_ttl_s=120,
    max_attempts=4,
    store_confirmation=False,
    confirm_content_topics=frozenset(),
)


def entry(
    request_id: str = "r",
    *,
    state: SendState = SendState.QUEUED,
    attempts: int = 0,
    priority: SendPriority = SendPriority.NORMAL,
    scheduled_at: float = T0,
    last_attempt_at: float | None = None,
    next_attempt_at: float | None = None,
    store_confirmation: bool = False,
) -> OutboxEntry:
    """A request in the given state."""
    progress = SendProgress(
        state=state,
        priority=priority,
        attempts=attempts,
        max_attempts=4,
        relayed_peers=0,
        store_confirmation=store_confirmation,
        scheduled_at=scheduled_at,
        last_attempt_at=last_attempt_at,
        next_attempt_at=next_attempt_at,
    )
    message = Message(payload=b"hi", content_topic=TOPIC, timestamp=int(T0) * 1_000_000_000)
    return OutboxEntry(
        request_id=request_id,
        message_hash=b"\x01" * 32,
        pubsub_topic="/waku/2/rs/1/0",
        message=message,
        progress=progress,
        ttl=120.0,
        sending=True,
        updated_at=scheduled_at,
    )


class NeverStored:
    """A store checker (services.send.ports.StoreChecker) whose store never holds the envelope."""

    async def holds(self, entry: OutboxEntry) -> bool:
        return False
