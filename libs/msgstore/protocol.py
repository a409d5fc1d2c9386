"""The storage contracts of the Messaging API services (docs/messaging-store.md).

One :class:`MsgStore` per process gives three parts: :class:`LeaseStore` (who owns what), the send
service's :class:`OutboxStore` and the subscription service's :class:`RecordStore`. Methods are ``async``
(the services run on grpc.aio); backend failures surface only as :mod:`msgstore.errors`; ``now`` (UNIX
seconds) is always passed in, so tests control time and every replica agrees on what expired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from msgstore.errors import LeaseLost, RequestIdConflict
from msgstore.types import (
    Event,
    EventDraft,
    Gap,
    Lease,
    Member,
    OutboxChanges,
    OutboxEntry,
    OutboxFilter,
    Record,
    Subscription,
)

__all__ = ["Committed", "LeaseStore", "MsgStore", "OutboxStore", "RecordStore", "RecordWriter"]


class LeaseStore(Protocol):
    """Named leases with fencing epochs (Cassandra: lightweight transactions; SQLite: one transaction)."""

    async def acquire(self, name: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Take ``name`` for ``ttl`` seconds if it is free or expired; None if someone holds it.

        Each new holder gets an epoch strictly greater than every earlier holder's. Of concurrent callers
        exactly one wins. The current holder asking again gets its lease back, renewed, with the same
        epoch: a retry after an ambiguous outcome (a timed-out lightweight transaction) is safe.
        """
        ...

    async def renew(self, lease: Lease, now: float) -> Lease | None:
        """Extend a held lease by its ttl from ``now``; None when it was lost (another holder took it)."""
        ...

    async def release(self, lease: Lease) -> None:
        """Give the lease up (it becomes free at once); a no-op when it was already lost."""
        ...

    async def holder(self, name: str) -> Lease | None:
        """The latest holder of ``name`` (possibly expired), or None if it was never taken."""
        ...

    async def heartbeat(self, group: str, member: str, address: str, ttl: float, now: float) -> None:
        """Record ``member`` of ``group`` as alive until ``now + ttl``, reachable at ``address`` (an upsert:
        no condition, no lightweight transaction)."""
        ...

    async def members(self, group: str, now: float) -> list[Member]:
        """The members of ``group`` alive at ``now``, by name."""
        ...

    async def leave(self, group: str, member: str) -> None:
        """End ``member``'s membership at once (graceful stop); a no-op when it is not a member."""
        ...


class OutboxStore(Protocol):
    """Send requests, sharded; a shard's requests are written only by the holder of ``outbox/<shard>``."""

    shards: int

    async def add(self, entry: OutboxEntry, *, now: float) -> tuple[OutboxEntry, bool]:
        """Persist a new request (any replica may call it); (entry, created).

        Idempotent by request id: the same message again returns the stored entry with created=False; a
        different message raises :class:`~msgstore.errors.RequestIdConflict`. Writes no change: the
        shard's owner numbers changes, from its first :meth:`save` of the entry on.
        """
        ...

    async def add_many(
        self, entries: Sequence[OutboxEntry], *, now: float
    ) -> list[tuple[OutboxEntry, bool] | RequestIdConflict]:
        """:meth:`add` for each entry, with one outcome per entry in order (a conflict is returned, not
        raised, so one bad request does not fail the others). SQLite: one transaction (group commit)."""
        ...

    async def get(self, request_id: str, *, now: float) -> OutboxEntry | None:
        """The request, or None when unknown or past retention."""
        ...

    async def latest_for_hash(self, message_hash: bytes, *, now: float) -> OutboxEntry | None:
        """The most recently scheduled request with this message hash."""
        ...

    async def save(self, entry: OutboxEntry, lease: Lease, *, now: float) -> OutboxEntry:
        """Write the entry's new state and append it to its shard's change log; returns it with its
        ``sequence``. ``lease`` must be the shard's lease, valid beyond the safety margin
        (:class:`~msgstore.errors.LeaseLost` otherwise). ``progress.scheduled_at`` is the one field that
        never changes after :meth:`add` (it keys the scheduling index and the listing order; a Resend
        re-queues with ``next_attempt_at``)."""
        ...

    async def save_many(
        self, items: Sequence[tuple[OutboxEntry, Lease]], *, now: float
    ) -> list[OutboxEntry | LeaseLost]:
        """:meth:`save` for each (entry, lease) in order, one outcome each (a lost lease is returned, not
        raised). Entries of one shard are numbered in the order given. SQLite: one transaction."""
        ...

    async def open_requests(self, shard: int, lease: Lease, *, now: float) -> list[OutboxEntry]:
        """Every unfinished request of ``shard`` by (scheduled_at, request id), for its (new) owner."""
        ...

    async def list(
        self, flt: OutboxFilter, skip: int | None, take: int | None, *, now: float
    ) -> list[OutboxEntry]:
        """Requests matching ``flt`` by (scheduled_at, request id), with MESSAGING-API skip/take."""
        ...

    async def head(self, *, now: float) -> bytes:
        """The position after every change written so far (each shard's last sequence): where a watch of
        live changes only starts, without reading the retained log through."""
        ...

    async def changes_after(self, position: bytes, limit: int, *, now: float) -> OutboxChanges:
        """Up to ``limit`` changes after ``position`` (an encoded ResumePosition; empty = the start),
        in sequence order within each shard, and the position after them."""
        ...


@dataclass(frozen=True, slots=True)
class Committed:
    """What a commit stored: the records with their revisions, and the events with their sequences."""

    records: list[Record]
    events: list[Event]


class RecordWriter(Protocol):
    """The only writer of records, subscriptions and events while its ``records/writer`` lease holds."""

    lease: Lease

    def update_lease(self, lease: Lease) -> None:
        """Adopt a renewed lease (same name and epoch)."""

    async def commit(
        self,
        records: Sequence[Record],
        events: Sequence[EventDraft],
        *,
        now: float,
        positions: Mapping[str, bytes] | None = None,
    ) -> Committed:
        """Write record states and their events atomically (an event is visible only with its data).

        Sequences are allocated in ``events`` order; a record's revision is the sequence of its last event,
        or a fresh one when it has none. A draft of type ``UNSPECIFIED`` logs a record change that emits no
        Messaging API event (the record's revision entry; event consumers skip it). ``positions`` (name →
        opaque resume position of an input the writer follows) are written with the data they cover, in
        the same transaction (SQLite) or the commit's last batch (Cassandra): a writer that restarts from
        them neither misses nor re-applies an input. A commit of positions alone writes just those.
        Raises LeaseLost when the lease is within the safety margin of its expiry (or, where the backend
        can tell, was taken over).
        """
        ...

    async def append(self, events: Sequence[EventDraft], *, now: float) -> list[int]:
        """Append events that report no record (``health:change``); returns their sequences."""
        ...

    async def save_subscription(self, subscription: Subscription, *, now: float) -> None:
        """Create or update a subscription (ending one is an update: active=False)."""
        ...


class RecordStore(Protocol):
    """Records, subscriptions and the event log; any replica reads, one writer writes."""

    async def writer(self, lease: Lease, *, now: float) -> RecordWriter:
        """A writer numbering above every sequence readable now and above ``lease.epoch << 40``."""
        ...

    async def get(self, message_hash: bytes) -> Record | None:
        """The record with this message hash."""
        ...

    async def get_by_request(self, request_id: str) -> Record | None:
        """The record of this Send API request id."""
        ...

    async def list_by_topic(self, content_topic: str, skip: int | None, take: int | None) -> list[Record]:
        """Records of a content topic by (created_at, message hash), MESSAGING-API skip/take."""
        ...

    async def list_by_subscription(
        self, subscription_id: str, skip: int | None, take: int | None
    ) -> list[Record]:
        """Records received on a subscription by (created_at, message hash), MESSAGING-API skip/take."""
        ...

    async def by_envelope(self, envelope_hashes: Sequence[bytes]) -> list[Record]:
        """The records carrying any of these Waku v1 envelope hashes (several records may share one), in no
        particular order; records written before the envelope index existed are not found."""
        ...

    async def position(self, name: str) -> bytes | None:
        """The resume position last committed under ``name`` (see :meth:`RecordWriter.commit`), or None."""
        ...

    async def get_subscription(self, subscription_id: str) -> Subscription | None:
        """One subscription, active or ended."""
        ...

    async def list_subscriptions(self, *, active_only: bool = True) -> list[Subscription]:
        """Subscriptions by (created_at, id)."""
        ...

    async def events_after(self, sequence: int, limit: int, *, now: float) -> list[Event] | Gap:
        """Up to ``limit`` retained events after ``sequence``, or a Gap when some events after it are
        already gone (older than the retention window)."""
        ...

    async def head(self) -> int:
        """The greatest sequence allocated so far (events and revisions); 0 when none."""
        ...


class MsgStore(Protocol):
    """A Messaging API store: leases, outbox, records; opened once per process."""

    backend: str

    @property
    def leases(self) -> LeaseStore:
        """The leases."""
        ...

    @property
    def outbox(self) -> OutboxStore:
        """The send service's outbox."""
        ...

    @property
    def records(self) -> RecordStore:
        """The subscription service's records, subscriptions and events."""
        ...

    async def open(self) -> None:
        """Connect and create or migrate the schema. Idempotent."""

    async def close(self) -> None:
        """Finish pending writes and release connections."""

    async def maintain(self, *, now: float) -> int:
        """Remove rows past their retention where the backend has no TTL (SQLite); returns rows removed."""
        ...
