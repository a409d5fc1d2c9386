"""Ingesting one batch: validate every envelope, hash its message, write the valid ones, tally the outcome.

The batch's ``received_at`` is validation's "now" (protocol-notes §1.5 with the edge peer's clock), clamped to
the ingest clock when it claims to be more than :data:`RECEIVED_AT_FUTURE_CLAMP_S` ahead of it (ingest.proto).
Valid envelopes go to the :class:`~services.ingest.batcher.Batcher`, which acknowledges them only once the
archive holds them; the returned :class:`~services.ingest.model.BatchOutcome` therefore describes durable
facts.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence

from services.ingest.batcher import Batcher, Item, Outcome
from services.ingest.metrics import IngestMetrics
from services.ingest.model import Accepted, BatchOutcome, Fault, ItemOutcome, Rejection, clip
from services.ingest.validation import Invalid, Rules, validate
from wakucodec.keccak import keccak256
from wakucodec.wakumessage import message_from_v1, message_hash

__all__ = ["MAX_BATCH_ENVELOPES", "RECEIVED_AT_FUTURE_CLAMP_S", "Ingestor"]

#: IngestBatch carries 1 to 10000 envelopes (ingest.proto).
MAX_BATCH_ENVELOPES = 10_000
#: A received_at further ahead of the ingest clock than this is replaced by the ingest clock (ingest.proto).
RECEIVED_AT_FUTURE_CLAMP_S = 10.0
#: Envelopes validated between two yields to the event loop, so one huge batch cannot stall other streams.
_YIELD_EVERY = 256

_log = logging.getLogger(__name__)


class Ingestor:
    """Validates and archives batches of raw envelopes; safe to call from many tasks at once."""

    def __init__(
        self,
        rules: Rules,
        batcher: Batcher[Accepted],
        metrics: IngestMetrics,
        *,
        pubsub_topic: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.rules = rules
        self._batcher = batcher
        self._metrics = metrics
        self._pubsub_topic = pubsub_topic
        self._clock = clock

    def validation_time(self, received_at: float | None) -> int:
        """The UNIX second validation treats as "now" for an envelope received at ``received_at``."""
        now = self._clock()
        if received_at is None or received_at > now + RECEIVED_AT_FUTURE_CLAMP_S:
            received_at = now
        return math.floor(received_at)  # Go: uint32(time.Unix()), whole seconds

    async def ingest(self, raws: Sequence[bytes], received_at: float | None) -> BatchOutcome:
        """Validate and archive ``raws`` (one batch) as received at ``received_at`` (None = now).

        Returns once every valid envelope is durable in the archive (or known to be there). Raises the
        archive's error (:class:`~services.ingest.model.ArchiveUnavailable`, ...) if a write failed, in
        which case nothing of the batch may be acknowledged, or ShuttingDown while draining.
        """
        started = time.perf_counter()
        if len(raws) > MAX_BATCH_ENVELOPES:
            return self.refuse(
                raws, f"batch has {len(raws)} envelopes, at most {MAX_BATCH_ENVELOPES} are allowed"
            )
        now = self.validation_time(received_at)
        metrics = self._metrics
        metrics.received.inc(len(raws))
        outcomes: list[ItemOutcome] = [ItemOutcome.REJECTED] * len(raws)
        hashes: list[bytes] = []
        rejections: list[Rejection] = []
        items: list[Item[Accepted]] = []
        positions: list[int] = []
        faults: Counter[Fault] = Counter()
        for index, raw in enumerate(raws):
            if index and index % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # cooperative yield, not a wait
            verdict = validate(raw, now, self.rules)
            if isinstance(verdict, Invalid):
                hashes.append(verdict.hash)
                faults[verdict.fault] += 1
                rejections.append(Rejection(index, verdict.hash, verdict.fault, verdict.detail))
                continue
            env = verdict.envelope
            hashes.append(env.hash)
            msg_hash = message_hash(self._pubsub_topic, message_from_v1(env.topic, env.data, env.sent))
            items.append(Item(env.hash, len(env.raw), Accepted(env, verdict.pow, msg_hash)))
            positions.append(index)
        # Counted per batch, not per envelope: each prometheus update takes a lock.
        metrics.validated.inc(len(raws) - faults[Fault.MALFORMED])  # status-go: every envelope add() saw
        for fault, count in faults.items():
            metrics.reject(fault, count)
        results = await self._batcher.submit(items) if items else []
        refused: list[Rejection] = []
        hits = inserted = 0
        for index, item, result in zip(positions, items, results, strict=True):
            if result.outcome is Outcome.CACHED:
                hits += 1
                outcomes[index] = ItemOutcome.DUPLICATE
                continue
            metrics.size.observe(item.payload.envelope.size)
            if result.outcome is Outcome.INSERTED:
                inserted += 1
                outcomes[index] = ItemOutcome.ACCEPTED
            elif result.outcome is Outcome.DUPLICATE:
                outcomes[index] = ItemOutcome.DUPLICATE
            elif result.outcome is Outcome.EXPIRED:
                detail = clip(f"not archived: {result.detail}")
                refused.append(Rejection(index, item.key, Fault.PAST_RETENTION, detail))
            else:
                detail = clip(f"archive refused it: {result.detail}")
                refused.append(Rejection(index, item.key, Fault.ARCHIVE_REFUSED, detail))
        metrics.cache_hit.inc(hits)
        metrics.cache_miss.inc(len(items) - hits)
        metrics.archived.inc(inserted)
        if refused:
            for fault in {r.fault for r in refused}:
                metrics.reject(fault, sum(1 for r in refused if r.fault is fault))
            rejections = sorted([*rejections, *refused], key=lambda r: r.index)
        metrics.ack_seconds.observe(time.perf_counter() - started)
        return BatchOutcome(tuple(outcomes), tuple(rejections), tuple(hashes))

    def refuse(self, raws: Sequence[bytes], detail: str) -> BatchOutcome:
        """Reject every envelope of a batch that breaks the API itself (e.g. no received_at), as MALFORMED."""
        self._metrics.received.inc(len(raws))
        hashes = tuple(keccak256(raw) for raw in raws)
        self._metrics.reject(Fault.MALFORMED, len(raws))
        rejections = tuple(Rejection(i, h, Fault.MALFORMED, clip(detail)) for i, h in enumerate(hashes))
        _log.debug("refused a batch of %d envelopes: %s", len(raws), detail)
        return BatchOutcome((ItemOutcome.REJECTED,) * len(raws), rejections, hashes)

    async def close(self) -> None:
        """Stop taking envelopes and write out everything queued (graceful shutdown, after the drain)."""
        await self._batcher.close()
