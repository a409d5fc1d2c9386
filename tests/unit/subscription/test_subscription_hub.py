"""The live event hub: strictly increasing fan-out, filters, bounded buffers."""

from __future__ import annotations

from msgstore.types import Event, EventType, HealthChange, HealthStatus, Message, MessageOrigin, Record
from services.subscription.hub import EventFilter, EventHub


def record_event(
    seq: int, kind: EventType = EventType.MESSAGE_CHANGE, sub: str = "s1", req: str = ""
) -> Event:
    record = Record(
        message_hash=seq.to_bytes(32, "big"),
        pubsub_topic="/waku/2/rs/1/0",
        message=Message(payload=b"", content_topic="/a/1/b/c"),
        origin=MessageOrigin.SUBSCRIPTION,
        created_at=1.0,
        subscription_ids=(sub,),
        request_id=req,
    )
    return Event(seq, kind, 1.0, record=record)


def health_event(seq: int) -> Event:
    return Event(
        seq, EventType.HEALTH_CHANGE, 1.0, health=HealthChange(HealthStatus.HEALTHY, HealthStatus.UNHEALTHY)
    )


async def test_events_at_or_below_the_last_published_are_dropped() -> None:
    hub = EventHub(capacity=10)
    consumer = hub.subscribe(EventFilter())
    assert hub.publish([record_event(1), record_event(2)]) == 2
    assert hub.publish([record_event(2), record_event(3)]) == 1
    assert [e.sequence for e in await consumer.next_batch(0)] == [1, 2, 3]


async def test_filters_by_type_subscription_and_request_health_passing_the_record_filters() -> None:
    hub = EventHub(capacity=10)
    by_sub = hub.subscribe(EventFilter(subscription_id="s2"))
    by_type = hub.subscribe(EventFilter(types=frozenset({EventType.MESSAGE_RECEIVED})))
    by_req = hub.subscribe(EventFilter(request_id="r1"))
    hub.publish(
        [
            record_event(1, sub="s1"),
            record_event(2, EventType.MESSAGE_RECEIVED, sub="s2"),
            health_event(3),
            record_event(4, req="r1"),
        ]
    )
    assert [e.sequence for e in await by_sub.next_batch(0)] == [2, 3]
    assert [e.sequence for e in await by_type.next_batch(0)] == [2]
    assert [e.sequence for e in await by_req.next_batch(0)] == [3, 4]


async def test_a_consumer_past_its_capacity_overflows_and_others_are_unaffected() -> None:
    hub = EventHub(capacity=2)
    slow, fast = hub.subscribe(EventFilter()), hub.subscribe(EventFilter())
    hub.publish([record_event(1), record_event(2)])
    assert len(await fast.next_batch(0)) == 2
    assert hub.slowest_lag == 2
    hub.publish([record_event(3)])
    assert slow.overflowed and not fast.overflowed
    assert await slow.next_batch(0) == []
    assert [e.sequence for e in await fast.next_batch(0)] == [3]


async def test_next_batch_times_out_empty_and_close_wakes_a_waiter() -> None:
    hub = EventHub(capacity=4)
    consumer = hub.subscribe(EventFilter())
    assert await consumer.next_batch(0.01) == []
    hub.close()
    assert await consumer.next_batch() == [] and consumer.closed
    hub.unsubscribe(consumer)
    assert hub.consumers == 0
