"""The reading-while-writing half of the messaging store contract (see contract.py): no false gaps in the
logs while a write is half visible, resume positions committed with their data, records by envelope hash,
and revision entries of changes that emit no event."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from msgstore.protocol import MsgStore
from msgstore.sharding import shard_of
from msgstore.types import EventDraft, EventType, Gap, SendState
from tests.integration.msgstore.contract_data import (
    SHARDS,
    T0,
    advanced,
    entry,
    record,
    shard_lease,
    writer_of,
)

Observer = Callable[[], Awaitable[None]]


class Interleave(Protocol):
    """Runs ``observe`` at every state of the store a reader can see while the block writes.

    SQLite: before and after each transaction (readers see whole transactions). Cassandra: between the
    statements of every LOGGED batch, applied one at a time and in reverse order — the worst order in
    which the partitions of a batch may become visible (a batch is atomic, not isolated).
    """

    def __call__(self, store: MsgStore, observe: Observer) -> AbstractAsyncContextManager[None]: ...


class LogContract:
    """Logs read while they are written; positions; the envelope index; revision entries."""

    async def test_a_reader_never_believes_a_gap_that_is_not_one(
        self, store: MsgStore, interleave: Interleave
    ) -> None:
        writer = await writer_of(store)
        lease = await shard_lease(store, 0)
        requests = [e for e in (entry(n) for n in range(40)) if shard_of(e.request_id, SHARDS) == 0][:3]
        for e in requests:
            await store.outbox.add(e, now=T0)
        now = T0 + 1
        events: list[int] = []
        changes: list[int] = []
        after, position = 0, b""

        async def observe() -> None:
            nonlocal after, position
            page = await store.records.events_after(after, 100, now=now)
            assert not isinstance(page, Gap), f"a gap believed after {after} while a commit was half written"
            assert all(e.sequence > after for e in page)
            for e in page:  # an event is visible only with the record state it reports
                assert e.record is not None
                stored = await store.records.get(e.record.message_hash)
                assert stored is not None and stored.revision >= e.record.revision, "event before its data"
                listed = await store.records.list_by_topic(e.record.message.content_topic, None, None)
                assert e.record.message_hash in [x.message_hash for x in listed], "event before its listing"
            events.extend(e.sequence for e in page)
            after = page[-1].sequence if page else after
            got = await store.outbox.changes_after(position, 100, now=now)
            assert got.gaps == (), "a gap believed while a save was half written"
            changes.extend(c.sequence for c in got.changes)
            position = got.position

        written: list[int] = []
        async with interleave(store, observe):
            for n, request in enumerate(requests):
                r = record(n, created=now)
                done = await writer.commit(
                    [r],
                    [
                        EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash),
                        EventDraft(EventType.MESSAGE_CHANGE, r.message_hash),
                    ],
                    now=now,
                )
                written += [e.sequence for e in done.events]
                await store.outbox.save(advanced(request, SendState.SENDING, now), lease, now=now)
        await observe()
        assert events == written, "every event, once, in order"
        assert changes == [1, 2, 3], "every change of the shard, once, in order"

    async def test_positions_are_committed_with_the_data_they_cover(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        assert await store.records.position("edge/a") is None
        r = record(1, created=T0)
        await writer.commit(
            [r],
            [EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash)],
            now=T0,
            positions={"edge/a": b"e1:7", "send": b"\x01\x00"},
        )
        assert await store.records.position("edge/a") == b"e1:7"
        assert await store.records.position("send") == b"\x01\x00"
        head = await store.records.head()
        quiet = await writer.commit([], [], now=T0 + 1, positions={"edge/a": b"e1:9"})  # positions alone
        assert quiet.records == [] and quiet.events == []
        assert await store.records.position("edge/a") == b"e1:9"
        assert await store.records.head() == head, "a positions-only commit allocates nothing"
        assert await store.records.position("edge/b") is None

    async def test_records_are_found_by_envelope_hash(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        a, b = record(1, created=T0), record(2, created=T0)
        twin = dataclasses.replace(record(3, created=T0), envelope_hash=a.envelope_hash)
        bare = dataclasses.replace(record(4, created=T0), envelope_hash=b"")
        await writer.commit([a, b, twin, bare], [], now=T0)
        found = await store.records.by_envelope([a.envelope_hash, b"\x09" * 32])
        assert sorted(r.message_hash for r in found) == sorted([a.message_hash, twin.message_hash])
        assert [r.message_hash for r in await store.records.by_envelope([b.envelope_hash])] == [
            b.message_hash
        ]
        assert await store.records.by_envelope([]) == []
        assert await store.records.by_envelope([b""]) == []
        # an envelope learnt later (a sent record whose network copy arrives) is found under it
        moved = dataclasses.replace(bare, envelope_hash=b"\x07" * 32)
        await writer.commit([moved], [], now=T0 + 1)
        assert [r.message_hash for r in await store.records.by_envelope([b"\x07" * 32])] == [
            bare.message_hash
        ]
        many = await store.records.by_envelope(
            [a.envelope_hash] + [i.to_bytes(32, "big") for i in range(1200)]
        )
        assert len(many) == 2, "more keys than one statement takes"

    async def test_a_change_without_event_is_logged_as_a_revision_entry(self, store: MsgStore) -> None:
        writer = await writer_of(store)
        r = record(1, created=T0, subs=("s1",))
        first = await writer.commit([r], [EventDraft(EventType.MESSAGE_RECEIVED, r.message_hash)], now=T0)
        second = dataclasses.replace(first.records[0], subscription_ids=("s1", "s2"))
        done = await writer.commit([second], [EventDraft(EventType.UNSPECIFIED, r.message_hash)], now=T0 + 1)
        (entry_,) = done.events
        assert entry_.type is EventType.UNSPECIFIED and done.records[0].revision == entry_.sequence
        page = await store.records.events_after(first.events[-1].sequence, 10, now=T0 + 2)
        assert not isinstance(page, Gap)
        assert [(e.type, e.record) for e in page] == [(EventType.UNSPECIFIED, done.records[0])]
