"""Ingesting a batch: received_at as "now", mixed outcomes, message hashes, metrics (in-memory sink)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from prometheus_client import CollectorRegistry

from services.ingest.batcher import Batcher, Outcome, Result
from services.ingest.logic import MAX_BATCH_ENVELOPES, Ingestor
from services.ingest.metrics import IngestMetrics
from services.ingest.model import Accepted, Fault, ItemOutcome
from services.ingest.validation import Rules
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.keccak import keccak256
from wakucodec.wakumessage import DEFAULT_PUBSUB_TOPIC, message_from_v1, message_hash

CLOCK = 1_700_000_000.0
TOPIC = bytes.fromhex("01020304")


class MemoryArchive:
    """The batcher's sink: stores by hash; hashes in ``refuse`` come back INVALID, in ``expire`` EXPIRED."""

    def __init__(self) -> None:
        self.items: dict[bytes, Accepted] = {}
        self.refuse: set[bytes] = set()
        self.expire: set[bytes] = set()
        self.writes = 0

    async def put(self, items: Sequence[Accepted]) -> list[Result]:
        self.writes += 1
        out = []
        for item in items:
            key = item.envelope.hash
            if key in self.refuse:
                out.append(Result(Outcome.INVALID, "hash does not match"))
            elif key in self.expire:
                out.append(Result(Outcome.EXPIRED, "sent time + retention is already past"))
            elif key in self.items:
                out.append(Result(Outcome.DUPLICATE))
            else:
                self.items[key] = item
                out.append(Result(Outcome.INSERTED))
        return out


def env(sent: float = CLOCK, *, data: bytes = b"payload", ttl: int = 120, topic: bytes = TOPIC) -> Envelope:
    return make_envelope(expiry=int(sent) + ttl, ttl=ttl, topic=topic, data=data)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def archive() -> MemoryArchive:
    return MemoryArchive()


@pytest.fixture
async def ingestor(registry: CollectorRegistry, archive: MemoryArchive) -> AsyncIterator[Ingestor]:
    metrics = IngestMetrics(registry)
    batcher: Batcher[Accepted] = Batcher(
        archive.put,
        max_items=100,
        max_bytes=1 << 20,
        max_delay_s=0,
        max_pending_items=1000,
        max_pending_bytes=1 << 24,
        seen_cache_size=1000,
        observer=metrics,
    )
    batcher.start()
    ingestor = Ingestor(
        Rules(min_pow=0.0, topic_allowlist=frozenset()),
        batcher,
        metrics,
        pubsub_topic=DEFAULT_PUBSUB_TOPIC,
        clock=lambda: CLOCK,
    )
    yield ingestor
    await asyncio.wait_for(ingestor.close(), 5)


async def test_mixed_batch_outcomes_in_order(ingestor: Ingestor, archive: MemoryArchive) -> None:
    good, other = env(data=b"one"), env(data=b"two")
    future = env(CLOCK + 60)
    old = env(CLOCK - 1000, ttl=60)
    batch = [good.raw, future.raw, b"\xc0garbage", good.raw, old.raw, other.raw]
    outcome = await ingestor.ingest(batch, CLOCK)
    assert outcome.outcomes == (
        ItemOutcome.ACCEPTED,
        ItemOutcome.REJECTED,
        ItemOutcome.REJECTED,
        ItemOutcome.DUPLICATE,  # repeated earlier in the same batch
        ItemOutcome.REJECTED,
        ItemOutcome.ACCEPTED,
    )
    assert [(r.index, r.fault) for r in outcome.rejections] == [
        (1, Fault.IN_FUTURE),
        (2, Fault.MALFORMED),
        (4, Fault.VERY_OLD),
    ]
    assert outcome.rejections[1].hash == keccak256(b"\xc0garbage")
    assert outcome.accepted + outcome.duplicates + len(outcome.rejections) == len(batch)
    assert outcome.hashes == tuple(keccak256(raw) for raw in batch)
    assert set(archive.items) == {good.hash, other.hash}


async def test_message_hash_follows_the_v1_mapping(ingestor: Ingestor, archive: MemoryArchive) -> None:
    envelope = env(data=b"hello")
    await ingestor.ingest([envelope.raw], None)
    stored = archive.items[envelope.hash]
    expected = message_hash(DEFAULT_PUBSUB_TOPIC, message_from_v1(TOPIC, b"hello", envelope.sent))
    assert stored.message_hash == expected
    assert stored.envelope.raw == envelope.raw


async def test_received_at_is_now_for_validation(ingestor: Ingestor) -> None:
    # Received an hour ago, when it was fresh: still valid although it has expired on the ingest clock.
    received = CLOCK - 3600
    envelope = env(received, ttl=60)
    assert (await ingestor.ingest([envelope.raw], received)).outcomes == (ItemOutcome.ACCEPTED,)
    # The same envelope judged at the ingest clock would be very old.
    assert (await ingestor.ingest([env(received, ttl=61).raw], None)).rejections[0].fault is Fault.VERY_OLD


def test_received_at_far_ahead_is_clamped_to_the_ingest_clock(ingestor: Ingestor) -> None:
    assert ingestor.validation_time(CLOCK + 10) == int(CLOCK + 10)  # within the clamp: trusted
    assert ingestor.validation_time(CLOCK + 11) == int(CLOCK)
    assert ingestor.validation_time(None) == int(CLOCK)
    assert ingestor.validation_time(CLOCK - 0.5) == int(CLOCK) - 1  # floor, like Go's Unix()


async def test_archive_duplicates_and_cache_hits(ingestor: Ingestor, archive: MemoryArchive) -> None:
    envelope = env()
    first = await ingestor.ingest([envelope.raw], CLOCK)
    again = await ingestor.ingest([envelope.raw], CLOCK)
    assert first.outcomes == (ItemOutcome.ACCEPTED,)
    assert again.outcomes == (ItemOutcome.DUPLICATE,)
    assert archive.writes == 1  # the second one never reached the archive


async def test_archive_refusal_is_a_rejection(ingestor: Ingestor, archive: MemoryArchive) -> None:
    envelope = env()
    archive.refuse.add(envelope.hash)
    outcome = await ingestor.ingest([env(data=b"ok").raw, envelope.raw], CLOCK)
    assert outcome.outcomes == (ItemOutcome.ACCEPTED, ItemOutcome.REJECTED)
    (rejection,) = outcome.rejections
    assert (rejection.index, rejection.fault, rejection.hash) == (1, Fault.ARCHIVE_REFUSED, envelope.hash)
    assert rejection.detail == "archive refused it: hash does not match"


async def test_archive_retention_expiry_is_its_own_rejection_reason(
    ingestor: Ingestor, archive: MemoryArchive, registry: CollectorRegistry
) -> None:
    refused, expired = env(data=b"refused"), env(data=b"expired")
    archive.refuse.add(refused.hash)
    archive.expire.add(expired.hash)
    outcome = await ingestor.ingest([expired.raw, refused.raw, expired.raw], CLOCK)
    assert outcome.outcomes == (ItemOutcome.REJECTED,) * 3
    faults = [(r.index, r.fault) for r in outcome.rejections]
    assert faults == [(0, Fault.PAST_RETENTION), (1, Fault.ARCHIVE_REFUSED), (2, Fault.PAST_RETENTION)]
    assert outcome.rejections[0].detail == "not archived: sent time + retention is already past"
    assert sample(registry, "waku_envelopes_rejected_total", reason="past_retention") == 2
    assert sample(registry, "waku_envelopes_rejected_total", reason="archive_refused") == 1
    # Not remembered as stored: a later copy is asked about again.
    assert (await ingestor.ingest([expired.raw], CLOCK)).rejections[0].fault is Fault.PAST_RETENTION


async def test_oversized_batches_are_refused_whole(ingestor: Ingestor, archive: MemoryArchive) -> None:
    raws = [b"\x01"] * (MAX_BATCH_ENVELOPES + 1)
    outcome = await ingestor.ingest(raws, CLOCK)
    assert len(outcome.rejections) == len(raws)
    assert {r.fault for r in outcome.rejections} == {Fault.MALFORMED}
    assert "at most 10000" in outcome.rejections[0].detail
    assert archive.writes == 0


async def test_metrics_follow_status_go_names(
    ingestor: Ingestor, registry: CollectorRegistry, archive: MemoryArchive
) -> None:
    good = env(data=b"x" * 100)
    batch = [good.raw, good.raw, env(CLOCK + 60).raw, env(CLOCK - 70, ttl=60).raw, b"junk"]
    await ingestor.ingest(batch, CLOCK)
    assert sample(registry, "waku_envelopes_received_total") == 5
    assert sample(registry, "waku_envelopes_validated_total") == 4  # the junk never decoded
    assert sample(registry, "waku_envelopes_rejected_total", reason="in_future") == 1
    assert sample(registry, "waku_envelopes_rejected_total", reason="expired") == 1
    assert sample(registry, "waku_envelopes_rejected_total", reason="malformed") == 1
    assert sample(registry, "waku_envelopes_cache_failures_total", type="in_future") == 1
    assert sample(registry, "waku_envelopes_cache_failures_total", type="expired") == 1
    assert registry.get_sample_value("waku_envelopes_cache_failures_total", {"type": "malformed"}) is None
    assert sample(registry, "waku_envelopes_cached_total", cache="miss") == 1
    assert sample(registry, "waku_envelopes_cached_total", cache="hit") == 1
    assert sample(registry, "waku_envelopes_size_bytes_count") == 1
    assert sample(registry, "waku_envelopes_size_bytes_sum") == 120  # 20 + len(Data)
    assert sample(registry, "mailserver_envelopes_total") == 1
    assert sample(registry, "ingest_archive_write_envelopes_count") == 1
    assert sample(registry, "ingest_pending_envelopes") == 0
    # Every reason exists from the start, at 0.
    assert sample(registry, "waku_envelopes_rejected_total", reason="topic_not_allowed") == 0
