"""Data, clock and helpers shared by the messaging store contract (see contract.py)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Awaitable
from typing import Protocol

from msgstore.protocol import MsgStore, RecordWriter
from msgstore.settings import StoreSettings
from msgstore.sharding import lease_name, shard_of
from msgstore.types import (
    Lease,
    Message,
    MessageError,
    MessageErrorKind,
    MessageOrigin,
    OutboxEntry,
    Record,
    SendPriority,
    SendProgress,
    SendState,
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


def entries_time(entries: list[OutboxEntry], change: tuple[int, int], shards: int) -> tuple[float, int, int]:
    """Sort key of a (shard, sequence) change in test_changes_resume_by_position: its save time."""
    shard, seq = change
    mine = [i for i, e in enumerate(entries) if shard_of(e.request_id, shards) == shard]
    return (float(mine[seq - 1]), shard, seq)
