"""The Send API's operations over the engine and the outbox (no gRPC, no generated protos).

Send accepts and persists before it answers, with no network I/O (MESSAGING-API "send": the RequestID is
returned at once); queries read the outbox, so every replica answers them for every request. Cancel and
Resend change a request, which only its shard's owner may write: a replica that does not own it forwards
the call to the owner, found through the shard's lease (its holder) and the holder's member row (its
advertised address), and answers what the owner answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from meshcore.errors import FailedPrecondition, Unavailable
from msgstore.errors import InvalidPosition
from msgstore.protocol import MsgStore, OutboxStore
from msgstore.sharding import ResumePosition, lease_name
from msgstore.types import OutboxChange, OutboxChanges, OutboxEntry, OutboxFilter, SendState
from services.send.engine import SendEngine
from services.send.errors import InvalidMessage, NoOwner, NotOwner, RequestNotFound
from services.send.ownership import GROUP
from services.send.ports import ReplicaCalls
from services.send.schedule import PENDING, order_key
from services.send.validation import SendInput, SendRules, prepare

__all__ = ["SendApi", "WatchItem"]

_PAGE = 500  # changes read per change-log page
_GAP_CONFIRMATIONS = 5  # re-reads before a gap is believed (see SendApi._page)
_GAP_RECHECK_S = 0.05
_FORWARD_TRIES = 3  # owner look-ups per Cancel/Resend when the shard changes hands during the call


def _nothing_covered(pubsub_topic: str, content_topic: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class WatchItem:
    """One message of a watch: a change, or the shards whose changes were missed."""

    position: bytes
    change: OutboxChange | None = None
    gap_shards: tuple[int, ...] = ()


class SendApi:
    """What SendService does, in domain terms."""

    def __init__(
        self,
        engine: SendEngine,
        store: MsgStore,
        rules: SendRules,
        *,
        clock: Callable[[], float],
        watch_poll_s: float,
        replicas: ReplicaCalls | None = None,
        covered: Callable[[str, str], bool] | None = None,
    ) -> None:
        self._engine = engine
        self._replicas = replicas
        self._covered = covered or _nothing_covered
        self._store = store
        self._rules = rules
        self._clock = clock
        self._watch_poll_s = watch_poll_s
        self._closed = False
        self._open = asyncio.Event()

    @property
    def _outbox(self) -> OutboxStore:
        return self._store.outbox  # looked up per call: a Cassandra store has its parts only once open

    async def _ready(self) -> None:
        # The server takes calls before its start hook has opened the store (health says NOT_SERVING until
        # then): a call that arrives meanwhile waits for the store (its deadline bounds the wait) instead of
        # failing on a store that is not open.
        await self._open.wait()
        if self._closed:
            raise Unavailable("the send service is shutting down")

    async def send(self, inp: SendInput) -> tuple[OutboxEntry, bool]:
        """Validate, persist and schedule; (entry, created)."""
        entry = prepare(inp, self._rules, self._clock(), self._covered)
        await self._ready()
        return await self._engine.accept(
            entry, given_id=bool(inp.request_id), given_timestamp=bool(inp.message.timestamp)
        )

    async def status(self, *, request_id: str = "", message_hash: bytes = b"") -> OutboxEntry:
        """One request by id, or the latest with a message hash; RequestNotFound otherwise."""
        await self._ready()
        now = self._clock()
        if request_id:
            found = await self._outbox.get(request_id, now=now)
            if found is None:
                raise RequestNotFound.by_id(request_id)
            return found
        if len(message_hash) != 32:
            raise InvalidMessage("give a request_id or a 32-byte message_hash")
        latest = await self._outbox.latest_for_hash(message_hash, now=now)
        if latest is None:
            raise RequestNotFound.by_hash(message_hash)
        return latest

    async def pending(self) -> list[str]:
        """Ids of unfinished requests, in the order they will be served (priority, fresh, retries newest)."""
        await self._ready()
        entries = await self._outbox.list(OutboxFilter(states=tuple(PENDING)), None, None, now=self._clock())
        return [e.request_id for e in sorted(entries, key=order_key)]

    async def list(self, flt: OutboxFilter, skip: int | None, take: int | None) -> list[OutboxEntry]:
        """Matching requests by (scheduled_at, request id), MESSAGING-API skip/take."""
        await self._ready()
        return await self._outbox.list(flt, skip, take, now=self._clock())

    async def cancel(self, request_id: str, *, forwarded: bool = False) -> tuple[bool, SendState]:
        """MESSAGING-API cancelRequest: (canceled by this call, state after it), from the owner."""
        await self._ready()
        return await self._edit(request_id, forwarded, cancel=True)

    async def resend(self, request_id: str, *, forwarded: bool = False) -> tuple[bool, SendState]:
        """Re-queue a FAILED request: (rescheduled, state after it), from the owner."""
        await self._ready()
        return await self._edit(request_id, forwarded, cancel=False)

    async def _edit(self, request_id: str, forwarded: bool, *, cancel: bool) -> tuple[bool, SendState]:
        """The edit here if this replica owns the request's shard, else on its owner (module docstring). A
        forwarded call is never forwarded again; a shard that changes hands meanwhile is looked up anew."""
        local = self._engine.cancel if cancel else self._engine.resend
        shard = -1
        for _ in range(_FORWARD_TRIES):
            try:
                return await local(request_id)
            except NotOwner as err:
                if forwarded or self._replicas is None:
                    raise
                shard = err.shard
            address = await self._owner_address(request_id, shard)
            remote = self._replicas.cancel if cancel else self._replicas.resend
            try:
                return await remote(address, request_id)
            except FailedPrecondition:  # NOT_OWNER: the shard moved between the look-up and the call
                continue
        raise NoOwner(request_id, shard, "the shard kept changing hands during the call")

    async def _owner_address(self, request_id: str, shard: int) -> str:
        now = self._clock()
        leases = self._store.leases
        lease = await leases.holder(lease_name(shard))
        if lease is None or lease.expires_at <= now:
            raise NoOwner(request_id, shard, "its lease is free or expired")
        if lease.owner == self._engine.ownership.owner:
            raise NoOwner(request_id, shard, "this replica is taking it over or handing it over")
        members = {m.name: m for m in await leases.members(GROUP, now)}
        member = members.get(lease.owner)
        if member is None or not member.address:
            raise NoOwner(request_id, shard, f"its owner {lease.owner} is not a live member")
        return member.address

    def opened(self) -> None:
        """The store is open (the server's start hook): watches waiting for it begin."""
        self._open.set()

    async def watch(self, after: bytes | None) -> AsyncIterator[WatchItem]:
        """Every change after ``after`` (None = from now on), then live ones; never ends by itself.

        The server accepts calls before its start hook has opened the store (it reports NOT_SERVING until
        then), and a follower such as the subscription service reconnects at once: its watch waits for the
        store instead of failing on it.
        """
        await self._open.wait()
        try:
            if self._closed:
                raise Unavailable("the send service is shutting down; resume from the last position")
            position = await self._head() if after is None else after
            while True:
                if self._closed:
                    raise Unavailable("the send service is shutting down; resume from the last position")
                page = await self._page(position)
                if page.gaps:
                    yield WatchItem(position, gap_shards=page.gaps)
                # Each change carries the position just after it, so a consumer that stops mid-page resumes
                # at the next change rather than after the page.
                at = ResumePosition.decode(position, self._outbox.shards)
                for change in page.changes:
                    at = at.advanced(change.shard, change.sequence)
                    yield WatchItem(at.encode(), change=change)
                position = page.position
                if len(page.changes) < _PAGE:
                    await self._engine.wait_change(self._watch_poll_s)
                else:
                    await asyncio.sleep(0)  # a long replay lets other calls in between pages
        except InvalidPosition as err:
            raise InvalidMessage(f"invalid position: {err}") from err

    async def close(self) -> None:
        """End every watch (UNAVAILABLE) within one poll interval: a watch never ends by itself and would
        otherwise hold the server for its whole shutdown grace."""
        self._closed = True
        self._open.set()  # a watch still waiting for the store ends too

    async def _page(self, position: bytes) -> OutboxChanges:
        """The next page of changes, its gaps confirmed by reading again.

        On Cassandra a reader can see a shard's new last sequence before the change row written in the same
        logged batch (a batch is atomic, not isolated, across partitions), which looks like a gap; the row
        is visible a moment later. A real gap (changes past their retention) persists, so a gap is reported
        only when it is still there after a few short re-reads.
        """
        page = await self._outbox.changes_after(position, _PAGE, now=self._clock())
        for _ in range(_GAP_CONFIRMATIONS):
            if not page.gaps:
                break
            await asyncio.sleep(_GAP_RECHECK_S)
            page = await self._outbox.changes_after(position, _PAGE, now=self._clock())
        return page

    async def _head(self) -> bytes:
        """The position after every change written so far."""
        return await self._outbox.head(now=self._clock())
