"""The storage contract every Messaging API store backend passes (docs/messaging-store.md).

Bind it by subclassing :class:`MsgStoreContract` in a ``test_*`` module and providing one fixture::

    class TestMyStore(MsgStoreContract):
        @pytest.fixture
        async def make_store(self, ...) -> AsyncIterator[StoreFactory]:
            ...  # yield an async factory opening a store on this test's own, initially empty location

``make_store(settings)`` opens (and the binding closes at teardown) a store on the *same* location every time
it is called within one test: a second call is a second replica, a call after ``close()`` is a restart.
Time is injected: every call passes ``now`` around ``T0``, so retention windows are crossed without waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
from collections.abc import Awaitable
from typing import Protocol

import pytest

from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.protocol import MsgStore, RecordWriter
from msgstore.sequencing import EPOCH_SHIFT
from msgstore.settings import StoreSettings
from msgstore.sharding import ResumePosition, lease_name, shard_of
from msgstore.types import (
    EventDraft,
    EventType,
    Gap,
    HealthChange,
    HealthStatus,
    Lease,
    Message,
    MessageError,
    MessageErrorKind,
    MessageOrigin,
    OutboxEntry,
    OutboxFilter,
    Record,
    SendPriority,
    SendProgress,
    SendState,
    Subscription,
)

T0 = 1_800_000_000.0
SHARDS = 4
SETTINGS = StoreSettings(shards=SHARDS, record_bucket=5.0, event_retention=600.0, change_retention=3600.0)
TTL = 60.0
SKIP_TAKE = [None, 0, 1, 2, 3, 5, 7, 100]


class StoreFactory(Protocol):
    """Opens a store on the current test's location (see the module docstring)."""

    def __call__(self, settings: StoreSettings = SETTINGS) -> Awaitable[MsgStore]: ...


def rid(n: int) -> str:
    """A GUID-shaped request id."""
    h = hashlib.sha256(str(n).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def entry(n: int, *, at: float = T0, topic: str = "/app/1/a/proto", payload: bytes = b"") -> OutboxEntry:
    """A freshly queued request ``n`` scheduled at ``at``."""
    body = payload or f"payload {n}".encode()
    return OutboxEntry(
        request_id=rid(n),
        message_hash=hashlib.sha256(body + topic.encode()).digest(),
        pubsub_topic="/waku/2/rs/16/32",
        message=Message(body, topic, timestamp=int(at) * 10**9, meta=b"m"),
        progress=SendProgress(SendState.QUEUED, SendPriority.NORMAL, 0, 4, 0, True, at),
        ttl=120.0,
        sending=True,
        updated_at=at,
    )


def advanced(e: OutboxEntry, state: SendState, at: float) -> OutboxEntry:
    """``e`` moved to ``state`` at ``at`` (one attempt more)."""
    progress = dataclasses.replace(
        e.progress, state=state, attempts=e.progress.attempts + 1, last_attempt_at=at
    )
    final = state.is_final
    return dataclasses.replace(
        e,
        progress=dataclasses.replace(progress, finished_at=at if final else None),
        sending=not final,
        sent=e.sent or state is SendState.SUCCEEDED,
        error=MessageError(MessageErrorKind.NO_PEERS, "no peer", attempt=progress.attempts, occurred_at=at)
        if state is SendState.FAILED
        else None,
        updated_at=at,
    )


def record(n: int, *, created: float, topic: str = "/app/1/r/proto", subs: tuple[str, ...] = ()) -> Record:
    """A received record ``n``."""
    body = f"record {n}".encode()
    return Record(
        message_hash=hashlib.sha256(body).digest(),
        pubsub_topic="/waku/2/rs/16/32",
        message=Message(body, topic, timestamp=int(created) * 10**9),
        origin=MessageOrigin.SUBSCRIPTION,
        created_at=created,
        received=True,
        subscription_ids=subs,
        envelope_hash=hashlib.sha256(b"env" + body).digest(),
        updated_at=created,
        received_at=created,
    )


def window(rows: list[Record], skip: int | None, take: int | None) -> list[bytes]:
    """The spec's skip/take over a plain list: the model the stores are compared with."""
    start = skip or 0
    end = None if take is None else start + take
    return [r.message_hash for r in rows[start:end]]


async def writer_of(store: MsgStore, owner: str = "w1", now: float = T0) -> RecordWriter:
    """The records writer of ``store`` under a fresh ``records/writer`` lease."""
    lease = await store.leases.acquire("records/writer", owner, TTL, now)
    assert lease is not None
    return await store.records.writer(lease, now=now)


async def shard_lease(store: MsgStore, shard: int, owner: str = "o1", now: float = T0) -> Lease:
    """The lease of ``shard`` for ``owner``."""
    lease = await store.leases.acquire(lease_name(shard), owner, TTL, now)
    assert lease is not None
    return lease


class MsgStoreContract:
    """Behaviour every backend must have."""

    @pytest.fixture
    async def store(self, make_store: StoreFactory) -> MsgStore:
        """A store on an empty location."""
        return await make_store()

    # ------------------------------------------------------------------ leases
    async def test_racing_owners_exactly_one_wins(self, make_store: StoreFactory) -> None:
        replicas = [await make_store() for _ in range(3)]
        for round_ in range(3):
            name = f"race/{round_}"
            got = await asyncio.gather(
                *(s.leases.acquire(name, f"owner{i}", TTL, T0) for i, s in enumerate(replicas))
            )
            winners = [lease for lease in got if lease is not None]
            assert len(winners) == 1
            holder = await replicas[0].leases.holder(name)
            assert holder is not None and holder.owner == winners[0].owner and holder.epoch == 1

    async def test_expiry_hands_over_with_greater_epoch(self, store: MsgStore) -> None:
        a = await store.leases.acquire("L", "a", TTL, T0)
        assert a is not None and a.epoch == 1 and a.expires_at == T0 + TTL
        assert await store.leases.acquire("L", "b", TTL, T0 + TTL - 1) is None
        renewed = await store.leases.renew(a, T0 + 10)
        assert renewed is not None and renewed.expires_at == T0 + 10 + TTL and renewed.epoch == 1
        assert await store.leases.acquire("L", "b", TTL, T0 + TTL + 5) is None  # renewal counted
        b = await store.leases.acquire("L", "b", TTL, T0 + 10 + TTL + 1)
        assert b is not None and b.owner == "b" and b.epoch == 2
        assert await store.leases.renew(renewed, T0 + 100) is None  # lost
        await store.leases.release(renewed)  # a no-op for a lost lease
        holder = await store.leases.holder("L")
        assert holder is not None and (holder.owner, holder.epoch) == ("b", 2)

    async def test_release_frees_at_once_and_epochs_keep_growing(self, store: MsgStore) -> None:
        epochs = []
        for i in range(4):
            lease = await store.leases.acquire("L", f"o{i}", TTL, T0 + i)
            assert lease is not None
            epochs.append(lease.epoch)
            await store.leases.release(lease)
        assert epochs == [1, 2, 3, 4]
        assert await store.leases.holder("never") is None

    # ------------------------------------------------------------------ outbox
    async def test_add_is_idempotent_and_detects_conflicts(self, store: MsgStore) -> None:
        first = entry(1)
        stored, created = await store.outbox.add(first, now=T0)
        assert created and stored == first
        again = dataclasses.replace(first, message=dataclasses.replace(first.message, timestamp=None))
        stored, created = await store.outbox.add(again, now=T0 + 1)
        assert not created and stored == first
        other = dataclasses.replace(first, message=dataclasses.replace(first.message, payload=b"other"))
        with pytest.raises(RequestIdConflict) as info:
            await store.outbox.add(other, now=T0 + 2)
        assert info.value.request_id == first.request_id
        assert await store.outbox.get(first.request_id, now=T0) == first
        assert await store.outbox.get(rid(99), now=T0) is None

    async def test_entries_round_trip_every_field(self, store: MsgStore) -> None:
        e = entry(2, payload=bytes(range(256)) * 40)
        lease = await shard_lease(store, shard_of(e.request_id, SHARDS))
        await store.outbox.add(e, now=T0)
        full = dataclasses.replace(
            advanced(e, SendState.FAILED, T0 + 7),
            confirm_mode=1,  # type: ignore[arg-type]  # IntEnum value as the service passes it
            monitor_content_topic=True,
            envelope_hash=b"\x07" * 32,
            sent_at=T0 + 1.25,
            stored_at=T0 + 2.5,
            stored=True,
            message=Message(e.message.payload, e.message.content_topic, 1, 5, b"meta", b"rln", True),
        )
        saved = await store.outbox.save(full, lease, now=T0 + 7)
        assert saved.sequence == 1
        assert await store.outbox.get(e.request_id, now=T0 + 8) == saved

    async def test_save_numbers_changes_per_shard_and_needs_the_lease(self, store: MsgStore) -> None:
        e = entry(3)
        shard = shard_of(e.request_id, SHARDS)
        await store.outbox.add(e, now=T0)
        lease = await shard_lease(store, shard)
        other = await shard_lease(store, (shard + 1) % SHARDS)
        with pytest.raises(ValueError):
            await store.outbox.save(e, other, now=T0)
        with pytest.raises(LeaseLost):  # within the safety margin of expiry
            await store.outbox.save(e, lease, now=lease.expires_at - SETTINGS.lease_margin / 2)
        seqs = []
        for i, state in enumerate((SendState.SENDING, SendState.RETRY_WAIT, SendState.SUCCEEDED)):
            e = await store.outbox.save(advanced(e, state, T0 + i), lease, now=T0 + i)
            seqs.append(e.sequence)
        assert seqs == [1, 2, 3]
        latest = await store.outbox.latest_for_hash(e.message_hash, now=T0 + 5)
        assert latest is not None and latest.state is SendState.SUCCEEDED

    async def test_open_requests_survive_restart_and_new_owner_continues_numbering(
        self, make_store: StoreFactory
    ) -> None:
        store = await make_store()
        entries = [entry(n, at=T0 + n) for n in range(40)]
        for e in entries:
            await store.outbox.add(e, now=e.progress.scheduled_at)
        leases = {s: await shard_lease(store, s) for s in range(SHARDS)}
        finished = set()
        last_seq = dict.fromkeys(range(SHARDS), 0)
        for e in entries[::3]:
            shard = shard_of(e.request_id, SHARDS)
            saved = await store.outbox.save(
                advanced(e, SendState.SUCCEEDED, T0 + 20), leases[shard], now=T0 + 20
            )
            last_seq[shard] = saved.sequence
            finished.add(e.request_id)
        await store.close()
        reopened = await make_store()
        for shard in range(SHARDS):
            taken = await reopened.leases.acquire(lease_name(shard), "o2", TTL, T0 + 100)
            assert taken is not None and taken.epoch == 2
            got = await reopened.outbox.open_requests(shard, taken, now=T0 + 100)
            want = [
                e.request_id
                for e in entries
                if shard_of(e.request_id, SHARDS) == shard and e.request_id not in finished
            ]
            assert [g.request_id for g in got] == want
            if got:
                saved = await reopened.outbox.save(
                    advanced(got[0], SendState.SENDING, T0 + 101), taken, now=T0 + 101
                )
                assert saved.sequence == last_seq[shard] + 1

    async def test_list_order_filters_and_every_skip_take_edge(self, store: MsgStore) -> None:
        entries = [entry(n, at=T0 + n % 5, topic=f"/app/1/{n % 2}/proto") for n in range(12)]
        for e in entries:
            await store.outbox.add(e, now=T0)
        leases = {s: await shard_lease(store, s) for s in range(SHARDS)}
        failed = entries[4]
        await store.outbox.save(
            advanced(failed, SendState.FAILED, T0 + 9),
            leases[shard_of(failed.request_id, SHARDS)],
            now=T0 + 9,
        )
        order = sorted(entries, key=lambda e: (e.progress.scheduled_at, e.request_id))
        ids = [e.request_id for e in order]
        for skip, take in itertools.product([*SKIP_TAKE, 11, 12, 13], SKIP_TAKE):
            got = await store.outbox.list(OutboxFilter(), skip, take, now=T0 + 10)
            start, end = skip or 0, None if take is None else (skip or 0) + take
            assert [g.request_id for g in got] == ids[start:end], (skip, take)
        topic1 = await store.outbox.list(OutboxFilter(content_topic="/app/1/1/proto"), None, None, now=T0)
        assert [g.request_id for g in topic1] == [
            e.request_id for e in order if e.message.content_topic.endswith("1/proto")
        ]
        by_state = await store.outbox.list(OutboxFilter(states=(SendState.FAILED,)), None, None, now=T0 + 10)
        assert [g.request_id for g in by_state] == [failed.request_id]
        some = (entries[7].request_id, entries[2].request_id, rid(1000))
        by_id = await store.outbox.list(OutboxFilter(request_ids=some), None, None, now=T0)
        assert [g.request_id for g in by_id] == [i for i in ids if i in some]
        by_hash = await store.outbox.list(OutboxFilter(message_hash=entries[3].message_hash), 0, 5, now=T0)
        assert [g.request_id for g in by_hash] == [entries[3].request_id]
        assert await store.outbox.list(OutboxFilter(states=(SendState.CANCELED,)), None, None, now=T0) == []

    async def test_changes_resume_by_position_and_report_gaps(self, store: MsgStore) -> None:
        entries = [entry(n) for n in range(10)]
        leases = {s: await shard_lease(store, s) for s in range(SHARDS)}
        for i, e in enumerate(entries):
            await store.outbox.add(e, now=T0)
            await store.outbox.save(
                advanced(e, SendState.SENDING, T0 + i), leases[shard_of(e.request_id, SHARDS)], now=T0 + i
            )
        seen: list[tuple[int, int]] = []
        position = b""
        while True:
            page = await store.outbox.changes_after(position, 3, now=T0 + 20)
            assert page.gaps == ()
            if not page.changes:
                break
            seen += [(c.shard, c.sequence) for c in page.changes]
            position = page.position
        assert sorted(seen) == sorted(set(seen)) and len(seen) == len(entries)
        assert [c for c in seen] == sorted(seen, key=lambda c: entries_time(entries, c, SHARDS))
        assert ResumePosition.decode(position, SHARDS).sequences == tuple(
            sum(1 for e in entries if shard_of(e.request_id, SHARDS) == s) for s in range(SHARDS)
        )
        # nothing new after the end; everything replayed from the start until it ages out
        assert (await store.outbox.changes_after(position, 10, now=T0 + 20)).changes == []
        late = T0 + 9 + SETTINGS.change_retention + 1
        aged = await store.outbox.changes_after(b"", 100, now=late)
        assert aged.changes == [] and set(aged.gaps) == {shard_of(e.request_id, SHARDS) for e in entries}
        assert ResumePosition.decode(aged.position, SHARDS) == ResumePosition.decode(position, SHARDS)
        assert (await store.outbox.changes_after(position, 10, now=late)).gaps == ()

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
        health = await writer.commit(
            [],
            [
                EventDraft(
                    EventType.HEALTH_CHANGE, health=HealthChange(HealthStatus.HEALTHY, HealthStatus.UNHEALTHY)
                )
            ],
            now=T0 + 2,
        )
        assert health.events[0].sequence == first + 3 and health.events[0].record is None
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
        for n in range(1200):
            created = T0 + (n * 7919 % 1200) * 0.5  # shuffled times over 120 buckets of 5 s
            subs = ("A",) if n % 3 else ("A", "B")
            rows.append(record(n, created=created, topic=f"/t/1/{n % 2}/proto", subs=subs))
        for i in range(0, len(rows), 20):
            await writer.commit(rows[i : i + 20], [], now=T0)
        key = lambda r: (r.created_at, r.message_hash)  # noqa: E731
        topic0 = sorted((r for r in rows if r.message.content_topic == "/t/1/0/proto"), key=key)
        sub_b = sorted((r for r in rows if "B" in r.subscription_ids), key=key)
        sub_a = sorted(rows, key=key)
        cases = [
            (None, None),
            (0, None),
            (None, 0),
            (0, 0),
            (1, 1),
            (5, 10),
            (599, 5),
            (600, 1),
            (601, None),
            (10_000, 10),
            (None, 10_000),
            (150, 125),
            (3, None),
            (398, 10),
            (1199, 100),
        ]
        for skip, take in cases:
            got = await store.records.list_by_topic("/t/1/0/proto", skip, take)
            assert [g.message_hash for g in got] == window(topic0, skip, take), ("topic", skip, take)
            got = await store.records.list_by_subscription("B", skip, take)
            assert [g.message_hash for g in got] == window(sub_b, skip, take), ("sub", skip, take)
            got = await store.records.list_by_subscription("A", skip, take)
            assert [g.message_hash for g in got] == window(sub_a, skip, take), ("all", skip, take)
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


def entries_time(entries: list[OutboxEntry], change: tuple[int, int], shards: int) -> tuple[float, int, int]:
    """Sort key of a (shard, sequence) change in test_changes_resume_by_position: its save time."""
    shard, seq = change
    mine = [i for i, e in enumerate(entries) if shard_of(e.request_id, shards) == shard]
    return (float(mine[seq - 1]), shard, seq)
