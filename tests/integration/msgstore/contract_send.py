"""The parts of the contract the send service's replicas rely on (see contract.py).

- Group commit: ``add_many`` and ``save_many`` give each item the outcome its single call would have,
  number one shard's changes in the order given, and turn a conflict or a lost lease into that item's
  outcome without failing the others.
- Membership: heartbeats make a member visible until its expiry, with its address; leaving ends it at once;
  groups are apart.
"""

from __future__ import annotations

import dataclasses

from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.protocol import MsgStore
from msgstore.sharding import ResumePosition, lease_name, shard_of
from msgstore.types import OutboxEntry, SendState
from tests.integration.msgstore.contract_data import (
    SHARDS,
    T0,
    TTL,
    StoreFactory,
    advanced,
    entry,
    shard_lease,
)


def _in_shards(count: int) -> list[OutboxEntry]:
    """``count`` entries per shard 0 and 1, alternating between the two shards."""
    by_shard: dict[int, list[OutboxEntry]] = {0: [], 1: []}
    n = 0
    while min(len(v) for v in by_shard.values()) < count:
        e = entry(1000 + n)
        n += 1
        shard = shard_of(e.request_id, SHARDS)
        if shard in by_shard and len(by_shard[shard]) < count:
            by_shard[shard].append(e)
    return [e for pair in zip(by_shard[0], by_shard[1], strict=True) for e in pair]


class OutboxBatchContract:
    """add_many / save_many."""

    async def test_add_many_answers_each_request_as_add_would(self, store: MsgStore) -> None:
        old = entry(1)
        await store.outbox.add(old, now=T0)
        new = entry(2)
        repeat = dataclasses.replace(old, message=dataclasses.replace(old.message, timestamp=None))
        conflict = dataclasses.replace(old, message=dataclasses.replace(old.message, payload=b"other"))
        twice = dataclasses.replace(new, message=dataclasses.replace(new.message, timestamp=None))
        outcomes = await store.outbox.add_many([new, repeat, conflict, twice], now=T0 + 1)
        assert outcomes[0] == (new, True)
        assert outcomes[1] == (old, False)
        assert isinstance(outcomes[2], RequestIdConflict) and outcomes[2].request_id == old.request_id
        assert outcomes[3] == (new, False)  # the same id again in one batch: a repeat of the first
        assert await store.outbox.get(new.request_id, now=T0 + 1) == new
        assert await store.outbox.get(old.request_id, now=T0 + 1) == old

    async def test_save_many_numbers_each_shard_in_order_in_one_call(self, store: MsgStore) -> None:
        entries = _in_shards(3)
        for outcome in await store.outbox.add_many(entries, now=T0):
            assert not isinstance(outcome, RequestIdConflict)
        leases = {s: await shard_lease(store, s) for s in (0, 1)}
        changes = [advanced(e, SendState.SENDING, T0 + 1) for e in entries]
        changes += [advanced(c, SendState.SUCCEEDED, T0 + 1) for c in changes[:2]]
        items = [(c, leases[shard_of(c.request_id, SHARDS)]) for c in changes]
        saved = await store.outbox.save_many(items, now=T0 + 1)
        assert all(isinstance(s, OutboxEntry) for s in saved)
        numbers = [(shard_of(s.request_id, SHARDS), s.sequence) for s in saved if isinstance(s, OutboxEntry)]
        assert [n for shard, n in numbers if shard == 0] == [1, 2, 3, 4]
        assert [n for shard, n in numbers if shard == 1] == [1, 2, 3, 4]
        first = entries[0].request_id
        got = await store.outbox.get(first, now=T0 + 1)
        assert got is not None and got.state is SendState.SUCCEEDED and got.sequence == 4
        page = await store.outbox.changes_after(b"", 100, now=T0 + 1)
        assert [
            (c.shard, c.sequence, c.entry.state) for c in page.changes if c.entry.request_id == first
        ] == [
            (0, 1, SendState.SENDING),
            (0, 4, SendState.SUCCEEDED),
        ]

    async def test_head_is_the_position_after_every_change(self, store: MsgStore) -> None:
        assert await store.outbox.head(now=T0) == ResumePosition.start(SHARDS).encode()
        entries = _in_shards(2)
        await store.outbox.add_many(entries, now=T0)
        leases = {s: await shard_lease(store, s) for s in (0, 1)}
        items = [
            (advanced(e, SendState.SENDING, T0 + 1), leases[shard_of(e.request_id, SHARDS)]) for e in entries
        ]
        await store.outbox.save_many(items[:3], now=T0 + 1)
        head = await store.outbox.head(now=T0 + 1)
        assert head == (await store.outbox.changes_after(b"", 100, now=T0 + 1)).position
        assert (await store.outbox.changes_after(head, 100, now=T0 + 1)).changes == []
        [later] = await store.outbox.save_many(items[3:], now=T0 + 2)
        assert [
            c.entry.request_id for c in (await store.outbox.changes_after(head, 100, now=T0 + 2)).changes
        ] == [items[3][0].request_id]
        assert isinstance(later, OutboxEntry)

    async def test_a_lost_lease_fails_only_its_items(self, store: MsgStore) -> None:
        mine, theirs = _in_shards(1)
        await store.outbox.add_many([mine, theirs], now=T0)
        held = await shard_lease(store, 0)
        lapsing = await shard_lease(store, 1)
        taken = await store.leases.acquire(lease_name(1), "o2", TTL, T0 + TTL + 1)
        assert taken is not None
        held = await store.leases.renew(held, T0 + TTL) or held
        items = [(advanced(mine, SendState.SENDING, T0 + TTL), held)]
        items.append((advanced(theirs, SendState.SENDING, T0 + TTL), lapsing))
        outcomes = await store.outbox.save_many(items, now=T0 + TTL + 2)
        assert isinstance(outcomes[0], OutboxEntry) and outcomes[0].sequence == 1
        assert isinstance(outcomes[1], LeaseLost) and outcomes[1].name == lease_name(1)
        got = await store.outbox.get(theirs.request_id, now=T0 + TTL + 2)
        assert got is not None and got.state is SendState.QUEUED


class MembershipContract:
    """heartbeat / members / leave."""

    async def test_members_are_seen_until_their_expiry_and_leave_at_once(
        self, make_store: StoreFactory
    ) -> None:
        a, b = await make_store(), await make_store()  # two replicas on one store
        await a.leases.heartbeat("send", "a", "10.0.0.1:50055", TTL, T0)
        await b.leases.heartbeat("send", "b", "10.0.0.2:50055", TTL / 2, T0)
        await b.leases.heartbeat("other", "c", "10.0.0.3:1", TTL, T0)
        seen = await b.leases.members("send", T0 + 1)
        assert [(m.name, m.address, m.expires_at) for m in seen] == [
            ("a", "10.0.0.1:50055", T0 + TTL),
            ("b", "10.0.0.2:50055", T0 + TTL / 2),
        ]
        assert [m.name for m in await a.leases.members("send", T0 + TTL / 2)] == ["a"]  # b's expired
        await b.leases.heartbeat("send", "b", "10.0.0.9:50055", TTL, T0 + TTL / 2)  # back, moved
        again = await a.leases.members("send", T0 + TTL / 2 + 1)
        assert [(m.name, m.address) for m in again] == [("a", "10.0.0.1:50055"), ("b", "10.0.0.9:50055")]
        await a.leases.leave("send", "a")
        await a.leases.leave("send", "nobody")  # a no-op
        assert [m.name for m in await b.leases.members("send", T0 + TTL / 2 + 1)] == ["b"]
        assert [m.name for m in await b.leases.members("other", T0 + 1)] == ["c"]
