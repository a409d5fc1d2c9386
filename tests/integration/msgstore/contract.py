"""The storage contract every Messaging API store backend passes (docs/messaging-store.md).

Bind it by subclassing :class:`MsgStoreContract` in a ``test_*`` module and providing two fixtures::

    class TestMyStore(MsgStoreContract):
        @pytest.fixture
        async def make_store(self, ...) -> AsyncIterator[StoreFactory]:
            ...  # yield an async factory opening a store on this test's own, initially empty location

        @pytest.fixture
        def interleave(self) -> Interleave:
            ...  # run an observer at every state a reader can see while a write is applied

``make_store(settings)`` opens (and the binding closes at teardown) a store on the *same* location every time
it is called within one test: a second call is a second replica, a call after ``close()`` is a restart.
Time is injected: every call passes ``now`` around ``T0``, so retention windows are crossed without waiting.
"""

from __future__ import annotations

import asyncio

import pytest

from msgstore.protocol import MsgStore
from tests.integration.msgstore.contract_data import SETTINGS, SHARDS, T0, TTL, StoreFactory
from tests.integration.msgstore.contract_logs import Interleave, LogContract, Observer
from tests.integration.msgstore.contract_outbox import OutboxContract
from tests.integration.msgstore.contract_records import RecordContract
from tests.integration.msgstore.contract_send import MembershipContract, OutboxBatchContract

__all__ = [
    "SETTINGS",
    "SHARDS",
    "T0",
    "TTL",
    "Interleave",
    "MsgStoreContract",
    "Observer",
    "StoreFactory",
]


class MsgStoreContract(OutboxContract, OutboxBatchContract, MembershipContract, RecordContract, LogContract):
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

    async def test_the_holder_asking_again_keeps_its_epoch(self, store: MsgStore) -> None:
        first = await store.leases.acquire("L", "a", TTL, T0)
        assert first is not None
        again = await store.leases.acquire("L", "a", TTL / 2, T0 + 5)  # a retry after an unknown outcome
        assert again is not None and again.epoch == first.epoch and again.expires_at == T0 + 5 + TTL / 2
        holder = await store.leases.holder("L")
        assert holder == again
        assert await store.leases.acquire("L", "b", TTL, T0 + 5 + TTL / 2 - 0.5) is None
