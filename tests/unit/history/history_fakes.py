"""An in-memory ArchivePort with the archive's query semantics, and envelope builders for history tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from archivestore.types import Direction
from services.history.logic import ArchivedEnvelope, ArchivePage, ArchiveRequest, LookupResult
from wakucodec.bloom import bloom_match, topic_to_bloom
from wakucodec.envelope import make_envelope

NOW = 1_700_000_000
TOPIC_A = bytes.fromhex("01020304")
TOPIC_B = bytes.fromhex("0a0b0c0d")
TOPIC_C = bytes.fromhex("deadbeef")


@dataclass(frozen=True, slots=True)
class FakeEnvelope:
    """What the fake stores per envelope."""

    sent: int
    hash: bytes
    topic: bytes
    raw: bytes
    message_hash: bytes | None = None

    def archived(self) -> ArchivedEnvelope:
        return ArchivedEnvelope(self.sent, self.hash, self.raw)


def envelope(
    sent: int, topic: bytes = TOPIC_A, data: bytes = b"", nonce: int = 0, ttl: int = 50
) -> FakeEnvelope:
    """A real envelope (keccak hash, canonical RLP) sent at ``sent``."""
    env = make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data, nonce=nonce)
    return FakeEnvelope(env.sent, env.hash, env.topic, env.raw)


def envelopes(sents: Iterable[int], topic: bytes = TOPIC_A, data: bytes = b"") -> list[FakeEnvelope]:
    """One envelope per sent time (nonce = index, so equal sent times still differ)."""
    return [envelope(s, topic, data, nonce=i) for i, s in enumerate(sents)]


def ordered(items: Iterable[FakeEnvelope], direction: Direction = Direction.FORWARD) -> list[FakeEnvelope]:
    """``items`` in the archive's order for ``direction``."""
    return sorted(items, key=lambda e: (e.sent, e.hash), reverse=direction is Direction.BACKWARD)


@dataclass
class FakeArchive:
    """ArchivePort over a list: inclusive bounds, topics beat bloom, exclusive ``after``, checked has_more.

    ``gate``: when set, every query from the ``gate_from``-th call on waits for it (to observe streaming).
    ``fail_from``: from that call on, queries raise ``error``.
    ``max_per_call``: at most this many envelopes per query, with ``has_more`` (the archive's byte budget).
    """

    items: list[FakeEnvelope] = field(default_factory=list)
    calls: list[ArchiveRequest] = field(default_factory=list)
    gate: asyncio.Event | None = None
    gate_from: int = 1
    fail_from: int | None = None
    error: Exception | None = None
    max_per_call: int | None = None
    contains_calls: list[tuple[list[bytes], list[bytes]]] = field(default_factory=list)

    def add(self, items: Iterable[FakeEnvelope]) -> None:
        self.items.extend(items)

    def matching(self, request: ArchiveRequest) -> list[FakeEnvelope]:
        """Every match for ``request`` ignoring ``after`` and ``limit``, in order."""
        found = []
        for e in self.items:
            if not request.lower <= e.sent <= request.upper:
                continue
            if request.topics:
                if e.topic not in request.topics:
                    continue
            elif not bloom_match(request.bloom, topic_to_bloom(e.topic)):
                continue
            found.append(e)
        return ordered(found, request.direction)

    async def query(self, request: ArchiveRequest) -> ArchivePage:
        index = len(self.calls)
        self.calls.append(request)
        if self.gate is not None and index >= self.gate_from:
            await self.gate.wait()
        if self.fail_from is not None and index >= self.fail_from:
            assert self.error is not None
            raise self.error
        assert len(request.after.hash) == 32 if request.after is not None else True
        rows = self.matching(request)
        if request.after is not None:
            key = (request.after.sent, request.after.hash)
            forward = request.direction is Direction.FORWARD
            rows = [e for e in rows if ((e.sent, e.hash) > key if forward else (e.sent, e.hash) < key)]
        cap = min(request.limit, self.max_per_call or request.limit)
        return ArchivePage.of([e.archived() for e in rows[:cap]], has_more=len(rows) > cap)

    async def contains(
        self, envelope_hashes: Sequence[bytes], message_hashes: Sequence[bytes]
    ) -> LookupResult:
        self.contains_calls.append((list(envelope_hashes), list(message_hashes)))
        stored = {e.hash for e in self.items}
        messages = {e.message_hash for e in self.items if e.message_hash}
        return LookupResult(
            [h for h in envelope_hashes if h in stored], [h for h in message_hashes if h in messages]
        )
