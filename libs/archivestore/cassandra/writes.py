"""``put`` on Cassandra: a batch of envelopes becomes idempotent upserts (docs/archive.md).

Per envelope: one row in ``envelopes_by_time``, one in ``envelopes_by_topic``, one ``envelope_keys`` row per
hash (envelope, and message when known), plus the bucket and day/topic catalogues once per distinct entry in
the batch. Every row is written ``USING TTL`` from the retention policy; nothing is read to decide what to
write. Rows of one partition go in UNLOGGED batches, one mutation each: Cassandra applies them as one
commit log entry and one memtable update, and does not count them against its batch size thresholds,
which apply to batches spanning several partitions (CASSANDRA-10876). Key rows, one partition each, are
batched by replica set (``group_by_replicas``), at most 10 per batch.

Statements go in two phases: data and catalogue rows first, key rows only after all of those were
acknowledged. A key row therefore implies its data rows are durable, which makes ``contains`` (used to skip
re-ingest) and DUPLICATE labelling safe even after a batch failed half-way and is retried.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from cassandra.query import UNSET_VALUE, Statement

from archivestore.cassandra.layout import DAY_S, ShardPlan, day_of
from archivestore.cassandra.schema import MAX_TTL_S
from archivestore.cassandra.statements import Prepared
from archivestore.retention import RetentionPolicy
from archivestore.types import PutItem, PutOutcome
from archivestore.visibility import FOREVER
from dbkit.cassandra.bridge import group_by_replicas, unlogged_batch

KIND_ENVELOPE = "envelope"
KIND_MESSAGE = "message"
#: Rough per-row overhead of a batch mutation beyond the blob bytes (keys, timestamps, cell headers).
ROW_OVERHEAD = 64
#: Default bound of a same-partition batch: far below the maximum mutation size, large enough that a put of
#: 500 envelopes is a few statements per partition (Cassandra CPU per envelope −20 %, client −25 % against
#: 4.8 KiB batches; docs/archive.md "Cassandra adapter").
DEFAULT_WRITE_BATCH_BYTES = 256 * 1024


def cql_ttl(ttl: int | None) -> int:
    """The CQL TTL for a retention TTL: 0 (none) for keep-forever or beyond Cassandra's 20-year maximum
    (reads still hide the row after ``expires_at``)."""
    if ttl is None or ttl > MAX_TTL_S:
        return 0
    return ttl


@dataclass
class PutPlan:
    """What one ``put`` writes: provisional outcomes and the statements of both phases."""

    outcomes: list[PutOutcome]
    data: list[Statement] = field(default_factory=list)
    keys: list[Statement] = field(default_factory=list)
    written: list[int] = field(default_factory=list)  # indexes of items that are written


class _Grouper:
    """Collects bound statements per partition, then packs each partition's into UNLOGGED batches.

    A batch closes before its estimated size passes ``target_bytes`` (each batch is one partition, so one
    mutation: keep it far below the maximum mutation size); ``target_bytes = 0`` sends every row alone.
    """

    def __init__(self, target_bytes: int) -> None:
        self.target = target_bytes
        self.groups: dict[tuple[object, ...], list[tuple[int, Statement]]] = {}

    def add(self, partition: tuple[object, ...], size: int, stmt: Statement) -> None:
        self.groups.setdefault(partition, []).append((size, stmt))

    def statements(self) -> list[Statement]:
        out: list[Statement] = []
        for rows in self.groups.values():
            if self.target <= 0:
                out.extend(s for _, s in rows)
                continue
            chunk: list[Statement] = []
            size = 0
            for n, stmt in rows:
                if chunk and size + n > self.target:
                    out.append(unlogged_batch(chunk))
                    chunk, size = [], 0
                chunk.append(stmt)
                size += n
            if chunk:
                out.append(unlogged_batch(chunk))
        return out


def plan_put(
    items: Sequence[PutItem],
    *,
    now: int,
    q: Prepared,
    retention: RetentionPolicy,
    time_plan: ShardPlan,
    topic_plan: ShardPlan,
    bucket_seconds: int,
    batch_bytes: int,
    ttl_slack_s: int = 0,
    key_batch: int = 1,
    replicas_of: Callable[[Statement], Hashable] | None = None,
) -> PutPlan:
    """Bind every statement for ``items``; EXPIRED and in-batch repeats are decided here, without reads."""
    plan = PutPlan(outcomes=[])
    seen: set[bytes] = set()
    time_rows = _Grouper(batch_bytes)
    topic_rows = _Grouper(batch_bytes)
    catalogue = _Grouper(batch_bytes)
    buckets: dict[tuple[int, int], int] = {}
    topic_days: dict[tuple[int, bytes, int], int] = {}
    for index, item in enumerate(items):
        env = item.envelope
        keep = retention.retention_for(env.topic, item.retention_s)
        ttl = None if keep is None else env.sent + keep - now
        if ttl is not None and ttl <= 0:
            plan.outcomes.append(PutOutcome.EXPIRED)
            continue
        if env.hash in seen:
            plan.outcomes.append(PutOutcome.DUPLICATE)
            continue
        seen.add(env.hash)
        plan.outcomes.append(PutOutcome.INSERTED)
        plan.written.append(index)
        expires_at = FOREVER if keep is None else env.sent + keep
        row_ttl = cql_ttl(None if ttl is None else ttl + ttl_slack_s)
        msg = env.message_hash if env.message_hash is not None else UNSET_VALUE
        raw_len = len(env.raw)
        size = raw_len + len(env.topic) + 2 * len(env.hash) + ROW_OVERHEAD
        bucket = env.sent // bucket_seconds
        shard = time_plan.shard_for(bucket, env.hash)
        row = (env.sent, env.hash, env.topic, env.expiry, env.raw, msg, expires_at, raw_len, row_ttl)
        time_rows.add((bucket, shard), size, q.ins_time.bind((bucket, shard, *row)))
        day = day_of(env.sent)
        shard = topic_plan.shard_for(day, env.hash)
        trow = (env.sent, env.hash, env.expiry, env.raw, msg, expires_at, raw_len, row_ttl)
        topic_rows.add((env.topic, day, shard), size, q.ins_topic.bind((env.topic, day, shard, *trow)))
        key_row = (env.sent, env.hash, KIND_ENVELOPE, env.topic, expires_at, row_ttl)
        plan.keys.append(q.ins_key.bind((env.hash, *key_row)))
        if env.message_hash is not None:
            key_row = (env.sent, env.hash, KIND_MESSAGE, env.topic, expires_at, row_ttl)
            plan.keys.append(q.ins_key.bind((env.message_hash, *key_row)))
        # Catalogue entries outlive every row of their day: keep_until is the day's end plus this retention.
        keep_until = FOREVER if keep is None else (day + 1) * DAY_S + keep
        topic_days[(day, env.topic, keep_until)] = 0
        buckets[(bucket, FOREVER if keep is None else (bucket + 1) * bucket_seconds + keep)] = 0
    for bucket, keep_until in buckets:
        ttl_c = 0 if keep_until == FOREVER else cql_ttl(keep_until - now + ttl_slack_s)
        catalogue.add(("buckets",), 32, q.ins_bucket.bind((bucket, keep_until, ttl_c)))
    for day, topic, keep_until in topic_days:
        ttl_c = 0 if keep_until == FOREVER else cql_ttl(keep_until - now + ttl_slack_s)
        catalogue.add(("topics", day), 32, q.ins_topic_day.bind((day, topic, keep_until, ttl_c)))
    plan.data = [*time_rows.statements(), *topic_rows.statements(), *catalogue.statements()]
    plan.keys = group_by_replicas(plan.keys, key_batch, replicas_of)
    return plan


def label_duplicates(plan: PutPlan, items: Sequence[PutItem], stored: set[bytes]) -> list[PutOutcome]:
    """Final outcomes: items whose envelope key already existed before this put are DUPLICATE."""
    out = list(plan.outcomes)
    for index in plan.written:
        if items[index].envelope.hash in stored:
            out[index] = PutOutcome.DUPLICATE
    return out
