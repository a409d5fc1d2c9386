"""Mailserver history semantics over an abstract archive (protocol-notes §4.2-§4.6, docs/archive.md).

Pure domain logic: no gRPC, no protos, no database. :meth:`HistoryService.prepare` validates and resolves a
request (status-go's defaults and error texts via :meth:`wakucodec.historyrequest.HistoryRequest.normalize`,
our cap instead of status-go's refusal, the cursor); :meth:`HistoryService.run` reads the archive in chunks
and yields byte-budgeted batches as each chunk arrives, then one completion.

Paging: the first archive read asks for ``archive_page`` envelopes (by default the whole limit: one read per
query); with a smaller setting the client receives its first batch after a short read, and the rest of the
limit is requested in one read while the first chunk's batches are being sent (one chunk of read-ahead,
never more). The archive may end a read early at its byte budget; reading continues after the last one.
Chunks travel as columns (:class:`ArchivePage`). A batch never spans two archive chunks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import NamedTuple, Protocol

from archivestore.ordering import resume_key
from archivestore.types import Direction, Position
from meshcore.errors import Internal, InvalidArgument
from services.history.bundling import batch_ends, rlp_list_size
from services.history.cursor import CursorCodec, query_fingerprint
from wakucodec.constants import MAX_QUERY_LIMIT, MAX_TOPIC_INTEREST
from wakucodec.errors import InvalidRequest
from wakucodec.historyrequest import HistoryRequest
from wakucodec.responses import split_sized

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_LOOKUP_HASHES",
    "ZERO_HASH",
    "ArchivePage",
    "ArchivePort",
    "ArchiveRequest",
    "ArchivedEnvelope",
    "Batch",
    "HistoryQuery",
    "HistoryService",
    "HistorySettings",
    "InvalidQuery",
    "LookupResult",
    "PreparedQuery",
    "QueryCompletion",
]

ZERO_HASH = bytes(32)
#: HistoryQueryRequest.max_batch_bytes upper bound (history.proto).
MAX_BATCH_BYTES = 64 * 1024 * 1024
#: LookupRequest / ContainsEnvelopesRequest: at most 1000 hashes in total.
MAX_LOOKUP_HASHES = 1000
_HASH_LENGTH = 32

# ErrorReason names (common.proto) carried in InvalidQuery.details["reason"] for logs and the edge peer.
INVALID_RANGE = "INVALID_RANGE"
EMPTY_FILTER = "EMPTY_FILTER"
LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
INVALID_FIELD = "INVALID_FIELD"
_REASON_BY_MESSAGE = {
    "query range is invalid: lower > upper": INVALID_RANGE,
    "bloom filter and topics is empty": EMPTY_FILTER,
    "limit exceeds the maximum allowed value": LIMIT_EXCEEDED,
}


class InvalidQuery(InvalidArgument):
    """The request breaks a mailserver rule; ``message`` is status-go's text where status-go has one."""

    def __init__(self, message: str, reason: str, **details: object) -> None:
        super().__init__(message, {"reason": reason, **details})
        self.reason = reason


# ---------------------------------------------------------------------------------------------- the port


class ArchivedEnvelope(NamedTuple):
    """One envelope from the archive: its ordering key and its raw RLP, byte-identical to what was stored."""

    sent: int
    hash: bytes
    raw: bytes


@dataclass(frozen=True, slots=True)
class ArchiveRequest:
    """One archive range query (ArchiveService.QueryEnvelopes): inclusive bounds, exclusive ``after``."""

    lower: int
    upper: int
    topics: tuple[bytes, ...]
    bloom: bytes | None
    limit: int
    direction: Direction
    #: Resume point with a full 32-byte hash (a cursor's 16-byte prefix padded by ``resume_key``).
    after: Position | None = None


@dataclass(frozen=True, slots=True)
class ArchivePage:
    """One archive chunk in the requested order, as columns (archive.proto ``PackedEnvelopes``).

    Envelope ``i`` is ``rlp[sum(sizes[:i]) : sum(sizes[:i + 1])]``, sent at ``sent[i]``, with hash
    ``hashes[32 * i : 32 * i + 32]``; ``has_more`` says whether more match after the last one (checked, not
    guessed). Columns rather than an object per envelope: a chunk of a thousand envelopes crosses this port
    as a handful of Python objects (the history hot path, docs/benchmarks.md). Inconsistent columns are an
    :class:`~meshcore.errors.Internal` error.
    """

    rlp: bytes
    sizes: Sequence[int]
    sent: Sequence[int]
    hashes: bytes
    has_more: bool

    def __post_init__(self) -> None:
        count = len(self.sizes)
        if (
            len(self.sent) != count
            or len(self.hashes) != _HASH_LENGTH * count
            or sum(self.sizes) != len(self.rlp)
        ):
            raise Internal(
                f"the archive returned inconsistent columns: {count} sizes, {len(self.sent)} sent times, "
                f"{len(self.hashes)} hash bytes, {len(self.rlp)} RLP bytes for {sum(self.sizes)}"
            )

    @classmethod
    def of(cls, envelopes: Sequence[ArchivedEnvelope], *, has_more: bool) -> ArchivePage:
        """The columns of ``envelopes`` (for fakes and tests)."""
        return cls(
            rlp=b"".join(e.raw for e in envelopes),
            sizes=[len(e.raw) for e in envelopes],
            sent=[e.sent for e in envelopes],
            hashes=b"".join(e.hash for e in envelopes),
            has_more=has_more,
        )

    def __len__(self) -> int:
        return len(self.sizes)

    def position(self, index: int) -> Position:
        """The ordering key of envelope ``index``."""
        offset = _HASH_LENGTH * index
        return Position(self.sent[index], self.hashes[offset : offset + _HASH_LENGTH])


@dataclass(frozen=True, slots=True)
class LookupResult:
    """Which of the asked hashes are archived, in request order, without duplicates."""

    envelope_hashes: list[bytes] = field(default_factory=list)
    message_hashes: list[bytes] = field(default_factory=list)


class ArchivePort(Protocol):
    """What history needs from the archive; ``clients.ArchiveReader`` implements it over gRPC.

    Failures surface as :mod:`meshcore.errors` categories (``Unavailable`` when the archive is down).
    """

    async def query(self, request: ArchiveRequest) -> ArchivePage:
        """Run one range query."""
        ...

    async def contains(
        self, envelope_hashes: Sequence[bytes], message_hashes: Sequence[bytes]
    ) -> LookupResult:
        """Batch existence check."""
        ...


# ---------------------------------------------------------------------------------------------- domain


@dataclass(frozen=True, slots=True)
class HistorySettings:
    """The service's knobs (from config)."""

    default_limit: int = MAX_QUERY_LIMIT
    max_limit: int = MAX_QUERY_LIMIT
    archive_page: int = 1000
    max_batch_bytes: int = 1024 * 1024
    #: Budgets above this are lowered to it so a batch always fits one gRPC message.
    batch_bytes_ceiling: int = MAX_BATCH_BYTES
    default_direction: Direction = Direction.FORWARD

    def __post_init__(self) -> None:
        if not 1 <= self.default_limit <= self.max_limit <= MAX_QUERY_LIMIT:
            raise ValueError("need 1 <= default_limit <= max_limit <= 1000")
        if self.archive_page < 1 or self.max_batch_bytes < 1 or self.batch_bytes_ceiling < 1:
            raise ValueError("archive_page, max_batch_bytes and batch_bytes_ceiling must be >= 1")


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """A mailserver request as received (HistoryQueryRequest without the proto)."""

    lower: int = 0
    upper: int = 0
    bloom: bytes | None = None
    topics: tuple[bytes, ...] = ()
    limit: int = 0
    cursor: bytes = b""
    #: None = the configured default.
    direction: Direction | None = None
    max_batch_bytes: int = 0
    max_batch_envelopes: int = 0


@dataclass(frozen=True, slots=True)
class PreparedQuery:
    """A validated, resolved query, ready to :meth:`HistoryService.run`."""

    lower: int
    #: Resolved upper bound (``upper = 0`` became now + 60).
    upper: int
    topics: tuple[bytes, ...]
    #: None when topics are given (they override the bloom).
    bloom: bytes | None
    limit: int
    direction: Direction
    #: Exclusive resume point from the cursor (32-byte hash, padded per ``resume_key``), None = range end.
    after: Position | None
    fingerprint: bytes
    max_batch_bytes: int
    max_batch_envelopes: int

    @property
    def by_topics(self) -> bool:
        """True when filtering by exact topics, False for a bloom query."""
        return bool(self.topics)

    @property
    def resumed(self) -> bool:
        """True when the request continued from a cursor."""
        return self.after is not None


@dataclass(frozen=True, slots=True)
class Batch:
    """Raw envelopes for one 0x7f packet, in delivery order: concatenated (``rlp``), with their ``sizes``."""

    rlp: bytes
    sizes: Sequence[int]

    @classmethod
    def of(cls, envelopes: Sequence[bytes]) -> Batch:
        """The batch of these envelopes."""
        return cls(b"".join(envelopes), [len(e) for e in envelopes])

    @property
    def envelopes(self) -> list[bytes]:
        """The envelopes one by one (splits ``rlp``; not on the hot path)."""
        return split_sized(self.rlp, self.sizes)

    @property
    def size_bytes(self) -> int:
        """Size of the batch as one RLP list (the 0x7f payload)."""
        return rlp_list_size(len(self.rlp))


@dataclass(frozen=True, slots=True)
class QueryCompletion:
    """The end of a successful query (HistoryComplete)."""

    #: 36-byte cursor, or b"" when nothing matching remains after the last delivered envelope.
    next_cursor: bytes
    #: Hash of the last delivered envelope; 32 zero bytes when nothing was delivered.
    last_envelope_hash: bytes
    delivered: int


class HistoryService:
    """Runs history queries and lookups against an :class:`ArchivePort`."""

    def __init__(
        self,
        archive: ArchivePort,
        cursors: CursorCodec,
        settings: HistorySettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_served: Callable[[bytes], None] | None = None,
    ) -> None:
        self._archive = archive
        self._cursors = cursors
        self.settings = settings or HistorySettings()
        self._clock = clock
        self._on_served = on_served
        """Called with the packed hashes of each archive chunk once its batches were delivered."""

    # ------------------------------------------------------------------------------------------ queries

    def prepare(self, query: HistoryQuery) -> PreparedQuery:
        """Validate and resolve ``query``; raises :class:`InvalidQuery` or a cursor error, nothing else."""
        settings = self.settings
        if len(query.topics) > MAX_TOPIC_INTEREST:
            raise InvalidQuery(
                f"too many topics: {len(query.topics)}, at most {MAX_TOPIC_INTEREST}",
                INVALID_FIELD,
                field="topics",
            )
        if query.max_batch_bytes > MAX_BATCH_BYTES:
            raise InvalidQuery(
                f"max_batch_bytes must be at most {MAX_BATCH_BYTES}, got {query.max_batch_bytes}",
                INVALID_FIELD,
                field="max_batch_bytes",
            )
        try:
            request = HistoryRequest(
                lower=query.lower,
                upper=query.upper,
                bloom=query.bloom,
                topics=query.topics,
                limit=query.limit or settings.default_limit,
                cursor=query.cursor,
            ).normalize(int(self._clock()))
        except InvalidRequest as err:
            raise InvalidQuery(err.message, _REASON_BY_MESSAGE.get(err.message, INVALID_FIELD)) from err
        direction = query.direction or settings.default_direction
        topics = tuple(sorted(set(request.topics)))
        # Bound to what the client asked (upper 0 stays 0), not the resolved now + 60: cursor.py docstring.
        fingerprint = query_fingerprint(request.lower, query.upper, topics, request.bloom)
        after = None
        if request.cursor:
            position = self._cursors.decode(
                request.cursor, direction, fingerprint, lower=request.lower, upper=request.upper
            )
            sent, full_hash = resume_key(Position(position.sent, position.hash_prefix), direction)
            after = Position(sent, full_hash)
        budget = query.max_batch_bytes or settings.max_batch_bytes
        return PreparedQuery(
            lower=request.lower,
            upper=request.upper,
            topics=topics,
            bloom=request.bloom,
            limit=min(request.limit, settings.max_limit),
            direction=direction,
            after=after,
            fingerprint=fingerprint,
            max_batch_bytes=min(budget, settings.batch_bytes_ceiling),
            max_batch_envelopes=query.max_batch_envelopes,
        )

    async def run(self, query: PreparedQuery) -> AsyncGenerator[Batch | QueryCompletion, None]:
        """Stream ``query``: batches as archive chunks arrive, then exactly one :class:`QueryCompletion`.

        An archive failure propagates (after any batches already yielded) as the port raised it.
        """
        remaining = query.limit
        delivered = 0
        last: Position | None = None
        more = False
        pending: asyncio.Future[ArchivePage] | None = asyncio.ensure_future(
            self._archive.query(self._chunk(query, query.after, min(self.settings.archive_page, remaining)))
        )
        try:
            while pending is not None:
                page = await pending
                pending = None
                taken = min(len(page), remaining)
                more = page.has_more or len(page) > taken
                remaining -= taken
                if taken:
                    last = page.position(taken - 1)
                    if remaining > 0 and more:
                        # The rest in one read: the first batch already left after the small first chunk.
                        pending = asyncio.ensure_future(
                            self._archive.query(self._chunk(query, last, remaining))
                        )
                elif more:
                    raise Internal("the archive reported more envelopes but returned none")
                sizes = list(page.sizes[:taken])
                offsets = [0, *accumulate(sizes)]
                start = 0
                for end in batch_ends(sizes, query.max_batch_bytes, query.max_batch_envelopes):
                    yield Batch(page.rlp[offsets[start] : offsets[end]], sizes[start:end])
                    start = end
                delivered += taken
                if taken and self._on_served is not None:  # served: their records are stored (served.py)
                    self._on_served(page.hashes[: _HASH_LENGTH * taken])
        finally:
            if pending is not None:
                _discard(pending)
        next_cursor = b""
        if more and last is not None:
            next_cursor = self._cursors.encode(last.sent, last.hash, query.direction, query.fingerprint)
        yield QueryCompletion(next_cursor, last.hash if last is not None else ZERO_HASH, delivered)

    def _chunk(self, query: PreparedQuery, after: Position | None, limit: int) -> ArchiveRequest:
        return ArchiveRequest(
            lower=query.lower,
            upper=query.upper,
            topics=query.topics,
            bloom=query.bloom,
            limit=limit,
            direction=query.direction,
            after=after,
        )

    # ------------------------------------------------------------------------------------------ lookup

    async def lookup(self, envelope_hashes: Sequence[bytes], message_hashes: Sequence[bytes]) -> LookupResult:
        """Which of the hashes are archived (at most 1000 hashes, 32 bytes each), in request order."""
        total = len(envelope_hashes) + len(message_hashes)
        if total > MAX_LOOKUP_HASHES:
            raise InvalidQuery(
                f"too many hashes: {total}, at most {MAX_LOOKUP_HASHES}", LIMIT_EXCEEDED, count=total
            )
        for name, hashes in (("envelope_hashes", envelope_hashes), ("message_hashes", message_hashes)):
            for h in hashes:
                if len(h) != _HASH_LENGTH:
                    raise InvalidQuery(
                        f"{name}: every hash must be {_HASH_LENGTH} bytes, got {len(h)}",
                        INVALID_FIELD,
                        field=name,
                    )
        envelopes, messages = _distinct(envelope_hashes), _distinct(message_hashes)
        if not envelopes and not messages:
            return LookupResult()
        found = await self._archive.contains(envelopes, messages)
        stored_envelopes, stored_messages = set(found.envelope_hashes), set(found.message_hashes)
        return LookupResult(
            [h for h in envelopes if h in stored_envelopes], [h for h in messages if h in stored_messages]
        )


def _distinct(hashes: Sequence[bytes]) -> list[bytes]:
    return list(dict.fromkeys(bytes(h) for h in hashes))


def _discard(future: asyncio.Future[ArchivePage]) -> None:
    """Cancel a read-ahead nobody will consume, and retrieve its outcome so it is never reported as lost."""
    future.cancel()
    future.add_done_callback(lambda f: None if f.cancelled() else f.exception())
