"""Reads of the Message Storage and event source APIs: record listings, replays, long polls.

- Listings follow MESSAGING-API "getByContentTopic" / "getBySubscriptionId": ``skip`` past the end gives
  nothing, ``take = 0`` gives nothing, both omitted give every record; order (created_at, message hash).
- Resume points: a sequence older than the retained window is a gap (OUT_OF_RANGE with the oldest retained
  sequence). ``0`` means "everything retained" (subscription.proto, StreamEventsRequest): it never gaps.
- Long polls register with the hub *before* reading the store, so an event committed between the read
  and the wait still wakes the poll.
- PollRecords reports every record changed after the revision, in its latest state: each change is in the
  log — ``message:change``/``message:error`` for changes with Messaging API events, a revision entry
  (``UNSPECIFIED``) for the others (another subscription id, new send progress) — and every entry carries
  the record's new state.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from mailmesh.subscription.v1 import subscription_pb2
from meshcore import InvalidArgument
from msgstore.protocol import RecordStore
from msgstore.types import Event, EventType, Gap, Record
from services.subscription.hub import EventFilter
from services.subscription.recorder import Recorder

__all__ = ["EventReader", "RecordQuery", "event_filter", "list_records", "page"]

_PAGE = 500


def page(records: Sequence[Record], skip: int | None, take: int | None) -> list[Record]:
    """MESSAGING-API skip/take over an ordered list."""
    start = skip or 0
    if take is None:
        return list(records[start:])
    return list(records[start : start + take])


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """``RecordFilter``: every set field ANDed."""

    content_topic: str = ""
    subscription_id: str = ""
    request_id: str = ""
    message_hash: bytes = b""

    @classmethod
    def of(cls, flt: subscription_pb2.RecordFilter) -> RecordQuery:
        """From the proto."""
        return cls(flt.content_topic, flt.subscription_id, flt.request_id, flt.message_hash)

    def matches(self, record: Record) -> bool:
        """Whether ``record`` passes every set field."""
        return (
            (not self.content_topic or record.message.content_topic == self.content_topic)
            and (not self.subscription_id or self.subscription_id in record.subscription_ids)
            and (not self.request_id or record.request_id == self.request_id)
            and (not self.message_hash or record.message_hash == self.message_hash)
        )


def event_filter(flt: subscription_pb2.EventFilter) -> EventFilter:
    """From the proto; EVENT_TYPE_UNSPECIFIED and unknown numbers are ignored (like unsupported names)."""
    known = {t.value for t in EventType} - {0}
    return EventFilter(
        types=frozenset(EventType(t) for t in flt.types if t in known),
        subscription_id=flt.subscription_id,
        request_id=flt.request_id,
    )


async def list_records(
    store: RecordStore, query: RecordQuery, skip: int | None, take: int | None
) -> list[Record]:
    """The records ``query`` selects, with skip/take; the store pages itself where one index suffices."""
    if query.message_hash or query.request_id:
        one = await (
            store.get(query.message_hash) if query.message_hash else store.get_by_request(query.request_id)
        )
        return page([one] if one is not None and query.matches(one) else [], skip, take)
    if query.subscription_id and not query.content_topic:
        return await store.list_by_subscription(query.subscription_id, skip, take)
    if query.content_topic and not query.subscription_id:
        return await store.list_by_topic(query.content_topic, skip, take)
    if query.subscription_id:
        every = await store.list_by_subscription(query.subscription_id, None, None)
        return page([r for r in every if query.matches(r)], skip, take)
    raise InvalidArgument(
        "filter: give content_topic, subscription_id, request_id or message_hash", {"field": "filter"}
    )


class EventReader:
    """Replays and long polls over the store's event log and the replica's hub."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder

    @property
    def _store(self) -> RecordStore:
        return self._recorder.store.records  # the store's parts exist only once it is open

    async def replay(self, flt: EventFilter, after: int) -> AsyncIterator[Event | Gap]:
        """Every retained event after ``after`` (filtered by the caller), or one Gap when some are gone."""
        last = after
        while True:
            found = await self._store.events_after(last, _PAGE, now=self._recorder.now())
            if isinstance(found, Gap):
                if after != 0:
                    yield found
                    return
                last = found.oldest - 1
                continue
            for event in found:
                last = event.sequence
                yield event
            if len(found) < _PAGE:
                return

    async def poll(
        self, flt: EventFilter, after: int | None, limit: int, wait: float
    ) -> tuple[list[Event], int] | Gap:
        """Up to ``limit`` matching events after ``after`` (None = the head), waiting ``wait`` for one."""
        hub = self._recorder.hub
        consumer = hub.subscribe(flt)
        try:
            last = hub.last_sequence if after is None else after
            matched: list[Event] = []
            if after is not None:
                async for event in self.replay(flt, after):
                    if isinstance(event, Gap):
                        return event
                    last = event.sequence
                    if flt.matches(event):
                        matched.append(event)
                        if len(matched) >= limit:
                            return matched, last
            deadline = asyncio.get_running_loop().time() + wait
            while not matched:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0 or consumer.closed or consumer.overflowed:
                    break
                for event in await consumer.next_batch(left):
                    if event.sequence > last and len(matched) < limit:
                        matched.append(event)
                        last = event.sequence
            return matched, last
        finally:
            hub.unsubscribe(consumer)

    async def poll_records(
        self, query: RecordQuery, after: int | None, limit: int, wait: float
    ) -> tuple[list[Record], int]:
        """Records whose latest event is after ``after`` (None = the head), each once, by revision."""
        flt = EventFilter(
            types=frozenset({EventType.MESSAGE_CHANGE, EventType.MESSAGE_ERROR, EventType.UNSPECIFIED}),
            subscription_id=query.subscription_id,
            request_id=query.request_id,
        )
        start = after
        while True:
            result = await self.poll(flt, start, 1000, wait)
            if isinstance(result, Gap):  # older than retention: continue from what is retained
                start = result.oldest - 1
                continue
            events, last = result
            break
        latest: dict[bytes, Record] = {}
        for event in events:
            if event.record is not None and query.matches(event.record):
                latest.pop(event.record.message_hash, None)
                latest[event.record.message_hash] = event.record
        records = sorted(latest.values(), key=lambda r: r.revision)[:limit]
        if len(records) < len(latest):
            last = records[-1].revision
        return records, last
