"""The records, subscriptions and events half of the messaging store contract (see contract.py)."""

from __future__ import annotations

import dataclasses

import pytest

from msgstore.errors import LeaseLost
from msgstore.protocol import MsgStore
from msgstore.sequencing import EPOCH_SHIFT
from msgstore.types import (
    EventDraft,
    EventType,
    Gap,
    HealthChange,
    HealthStatus,
    MessageOrigin,
    Record,
    Subscription,
)
from tests.integration.msgstore.contract_data import (
    SETTINGS,
    T0,
    TTL,
    StoreFactory,
    record,
    rid,
    window,
    writer_of,
)


class RecordContract:
    """Records, listings, subscriptions and the event log with its single writer."""

    # ------------------------------------------------------------------ records and events
    async def test_commit_writes_records_and_events_with_one_counter(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        r = record(1, created=T0, subs=("s1",))
        sent = dataclasses.replace(r, request_id=rid(1), origin=MessageOrigin.SEND, sent=True, sent_at=T0)
        done = await writer.commit(
            [sent],
            [
                EventDraft(EventType.MESSAGE_SENT, r.message_hash),
                EventDraft(EventType.MESSAGE_CHANGE, r.message_hash),
            ],
            now=T0,
        )
        first = done.events[0].sequence
        assert first > writer.lease.epoch << EPOCH_SHIFT
        assert [e.sequence for e in done.events] == [first, first + 1]
        assert done.records[0].revision == first + 1
        assert all(e.record == done.records[0] for e in done.events)
        quiet = await writer.commit(
            [dataclasses.replace(done.records[0], subscription_ids=("s1", "s2"))], [], now=T0 + 1
        )
        assert quiet.records[0].revision == first + 2 and quiet.events == []
        change = HealthChange(HealthStatus.HEALTHY, HealthStatus.UNHEALTHY)
        assert await writer.append([EventDraft(EventType.HEALTH_CHANGE, health=change)], now=T0 + 2) == [
            first + 3
        ]
        assert await store.records.head() == first + 3
        assert await store.records.get(r.message_hash) == quiet.records[0]
        assert await store.records.get_by_request(rid(1)) == quiet.records[0]
        assert await store.records.get_by_request(rid(2)) is None
        assert await store.records.get(b"\x00" * 32) is None
        events = await store.records.events_after(0, 10, now=T0 + 3)
        assert not isinstance(events, Gap)
        assert [e.sequence for e in events] == [first, first + 1, first + 3]
        assert [e.type for e in events] == [
            EventType.MESSAGE_SENT,
            EventType.MESSAGE_CHANGE,
            EventType.HEALTH_CHANGE,
        ]
        assert events[0].record == done.records[0] and events[2].health == HealthChange(
            HealthStatus.HEALTHY, HealthStatus.UNHEALTHY
        )
        assert await store.records.events_after(first + 3, 10, now=T0 + 3) == []
        with pytest.raises(ValueError):
            await writer.commit([r], [EventDraft(EventType.MESSAGE_STORED, b"\x01" * 32)], now=T0 + 4)

    async def test_created_at_is_kept_across_updates(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        r = record(5, created=T0)
        await writer.commit([r], [], now=T0)
        moved = await writer.commit(
            [dataclasses.replace(r, created_at=T0 + 20, stored=True)], [], now=T0 + 20
        )
        assert moved.records[0].created_at == T0 and moved.records[0].stored
        assert [
            x.message_hash for x in await store.records.list_by_topic(r.message.content_topic, None, None)
        ] == [r.message_hash]

    async def test_listings_skip_take_across_many_buckets(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        rows: list[Record] = []
        for n in range(2400):
            # shuffled over 240 buckets of 5 s; two records per instant, so the hash breaks ties
            created = T0 + (n * 7919 % 2400) // 2
            subs = ("A",) if n % 3 else ("A", "B")
            rows.append(record(n, created=created, topic=f"/t/1/{n % 2}/proto", subs=subs))
        for i in range(0, len(rows), 20):
            await writer.commit(rows[i : i + 20], [], now=T0)
        # a later subscription reaching records already listed elsewhere
        rows[::24] = [dataclasses.replace(r, subscription_ids=(*r.subscription_ids, "C")) for r in rows[::24]]
        await writer.commit(rows[::24], [], now=T0 + 10)
        key = lambda r: (r.created_at, r.message_hash)  # noqa: E731
        topic0 = sorted((r for r in rows if r.message.content_topic == "/t/1/0/proto"), key=key)
        sub_b = sorted((r for r in rows if "B" in r.subscription_ids), key=key)
        sub_a = sorted(rows, key=key)
        sub_c = sorted(rows[::24], key=key)
        cases = [
            (None, None),
            (0, None),
            (None, 0),
            (0, 0),
            (1, 1),
            (5, 10),
            (799, 5),
            (800, 1),
            (801, None),
            (1199, 5),
            (1200, 1),
            (1201, None),
            (2399, 100),
            (2400, None),
            (10_000, 10),
            (None, 10_000),
            (150, 125),
            (3, None),
            (398, 10),
        ]
        for skip, take in cases:
            got = await store.records.list_by_topic("/t/1/0/proto", skip, take)
            assert [g.message_hash for g in got] == window(topic0, skip, take), ("topic", skip, take)
            got = await store.records.list_by_subscription("B", skip, take)
            assert [g.message_hash for g in got] == window(sub_b, skip, take), ("sub", skip, take)
            got = await store.records.list_by_subscription("A", skip, take)
            assert [g.message_hash for g in got] == window(sub_a, skip, take), ("all", skip, take)
            got = await store.records.list_by_subscription("C", skip, take)
            assert [g.message_hash for g in got] == window(sub_c, skip, take), ("later", skip, take)
        assert await store.records.list_by_topic("/none/1/x/proto", None, None) == []
        assert await store.records.list_by_subscription("none", 0, 10) == []

    async def test_subscription_lifecycle(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        subs = [
            Subscription(f"s{i}", "/waku/2/rs/16/32", (f"/t/1/{i}/proto",), (bytes([i]) * 4,), T0 + i)
            for i in range(3)
        ]
        for s in subs:
            await writer.save_subscription(s, now=T0)
        assert await store.records.list_subscriptions() == subs
        ended = dataclasses.replace(subs[1], active=False, ended_at=T0 + 9, received_count=4)
        await writer.save_subscription(ended, now=T0 + 9)
        assert await store.records.list_subscriptions() == [subs[0], subs[2]]
        assert await store.records.list_subscriptions(active_only=False) == [subs[0], ended, subs[2]]
        assert await store.records.get_subscription("s1") == ended
        assert await store.records.get_subscription("nope") is None

    async def test_events_resume_gap_and_survive_reopen(self, make_store: StoreFactory) -> None:
        store = await make_store()
        writer = await writer_of(store)
        seqs: list[int] = []
        for n in range(30):
            r = record(n, created=T0 + n)
            done = await writer.commit(
                [r],
                [
                    EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash),
                    EventDraft(EventType.MESSAGE_CHANGE, r.message_hash),
                ],
                now=T0 + n,
            )
            seqs += [e.sequence for e in done.events]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
        await store.close()
        store = await make_store()
        got: list[int] = []
        after = 0
        while True:
            page = await store.records.events_after(after, 7, now=T0 + 30)
            assert not isinstance(page, Gap)
            if not page:
                break
            got += [e.sequence for e in page]
            after = page[-1].sequence
        assert got == seqs
        # the first 10 records' events (T0 .. T0 + 9) leave the window at T0 + 9 + retention
        later = T0 + 9.5 + SETTINGS.event_retention
        gap = await store.records.events_after(seqs[5], 100, now=later)
        assert gap == Gap(seqs[20])
        ok = await store.records.events_after(seqs[19], 100, now=later)
        assert not isinstance(ok, Gap) and [e.sequence for e in ok] == seqs[20:]
        everything_gone = await store.records.events_after(seqs[-3], 10, now=T0 + 10_000)
        assert everything_gone == Gap(seqs[-1] + 1)
        assert await store.records.events_after(seqs[-1], 10, now=T0 + 10_000) == []
        # a new writer continues above everything
        lease = await store.leases.acquire("records/writer", "w2", TTL, T0 + 100)
        assert lease is not None and lease.epoch == 2
        second = await store.records.writer(lease, now=T0 + 100)
        r = record(99, created=T0 + 100)
        done = await second.commit(
            [r], [EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash)], now=T0 + 100
        )
        assert done.events[0].sequence == (2 << EPOCH_SHIFT) + 1
        page = await store.records.events_after(seqs[-1], 10, now=T0 + 100)
        assert not isinstance(page, Gap) and [e.sequence for e in page] == [done.events[0].sequence]

    async def test_a_deposed_writer_is_numbered_below_its_successor(self, make_store: StoreFactory) -> None:
        old_store, new_store = await make_store(), await make_store()
        old = await writer_of(old_store, "old", T0)
        r = record(1, created=T0)
        await old.commit([r], [EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash)], now=T0)
        taken = await new_store.leases.acquire("records/writer", "new", TTL, T0 + TTL + 1)
        assert taken is not None and taken.epoch == 2
        new = await new_store.records.writer(taken, now=T0 + TTL + 1)
        fresh = record(2, created=T0 + TTL + 1)
        done = await new.commit(
            [fresh], [EventDraft(EventType.MESSAGE_RECEIVED, fresh.message_hash)], now=T0 + TTL + 1
        )
        # the old writer's clock says its lease still holds (a paused process waking up)
        late = record(3, created=T0 + 5)
        try:
            stale = await old.commit(
                [late], [EventDraft(EventType.MESSAGE_RECEIVED, late.message_hash)], now=T0 + 5
            )
        except LeaseLost:
            return  # the backend fences the write itself
        assert max(e.sequence for e in stale.events) < min(e.sequence for e in done.events)
        assert max(e.sequence for e in stale.events) < 2 << EPOCH_SHIFT
