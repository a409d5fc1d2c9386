"""The outbox part of the messaging store contract (see contract.py)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.protocol import MsgStore
from msgstore.sharding import ResumePosition, lease_name, shard_of
from msgstore.types import (
    Message,
    OutboxFilter,
    SendState,
)
from tests.integration.msgstore.contract_data import (
    SETTINGS,
    SHARDS,
    SKIP_TAKE,
    T0,
    TTL,
    StoreFactory,
    advanced,
    entries_time,
    entry,
    rid,
    shard_lease,
)

#: A W3C traceparent (Trace Context, "traceparent Header").
TRACEPARENT = "00-" + "4b" * 16 + "-" + "00f0" * 4 + "-01"


class OutboxContract:
    """The send service's outbox: requests, shards, the open-request index, change logs."""

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
            traceparent=TRACEPARENT,
        )
        saved = await store.outbox.save(full, lease, now=T0 + 7)
        assert saved.sequence == 1
        assert await store.outbox.get(e.request_id, now=T0 + 8) == saved

    async def test_the_trace_context_is_kept_from_add_through_saves_to_a_new_owner(
        self, store: MsgStore
    ) -> None:
        """What makes a retry after a restart, or by another replica, join the Send's trace."""
        traced = dataclasses.replace(entry(4), traceparent=TRACEPARENT)
        plain = entry(5)  # no trace context: stored without one (as documents written before it existed)
        for e in (traced, plain):
            await store.outbox.add(e, now=T0)
        for e in (traced, plain):
            shard = shard_of(e.request_id, SHARDS)
            lease = await shard_lease(store, shard)
            [opened] = [o for o in await store.outbox.open_requests(shard, lease, now=T0) if o == e]
            await store.outbox.save(advanced(opened, SendState.RETRY_WAIT, T0 + 1), lease, now=T0 + 1)
            await store.leases.release(lease)
            taker = await shard_lease(store, shard, owner="o2", now=T0 + 2)
            [again] = [
                o
                for o in await store.outbox.open_requests(shard, taker, now=T0 + 2)
                if o.request_id == e.request_id
            ]
            assert (again.progress.attempts, again.traceparent) == (1, e.traceparent)
            await store.leases.release(taker)

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
