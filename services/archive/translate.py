"""proto ⇄ domain for ArchiveService: requests into archivestore / logic types, answers back into messages.

Every function validates what it reads (INVALID_ARGUMENT naming the field, :mod:`~services.archive.errors`)
and does nothing else: no store, no metrics. The servicer calls these around the logic modules
(:mod:`~services.archive.writes`, :mod:`~services.archive.maintenance`, :mod:`~services.archive.paging`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.duration_pb2 import Duration

from archivestore.types import BucketInfo, Direction, Position, Query, StoredEnvelope
from mailmesh.archive.v1 import archive_pb2 as pb
from mailmesh.common.v1 import common_pb2
from services.archive import maintenance as mt
from services.archive.errors import ArchiveCorrupt, InvalidField, LimitExceeded
from services.archive.paging import PackedColumns
from services.archive.validation import (
    check_bloom,
    check_count,
    check_envelope,
    check_position_hash,
    check_range,
    check_topic,
)
from services.archive.writes import Accepted, Candidate, Refused, WriteOutcome
from wakucodec.bloom import FULL_BLOOM
from wakucodec.constants import MAX_QUERY_LIMIT, MAX_TOPIC_INTEREST, UINT32_MAX
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError
from wakucodec.pow import calculate_pow

__all__ = [
    "OUTCOMES",
    "TABLES",
    "TABLE_ENUMS",
    "VIEWS",
    "bucket_key",
    "bucket_message",
    "candidate_of",
    "enum_value",
    "envelope_message",
    "packed_envelopes",
    "query_of",
    "seconds_of",
    "time_range",
    "wanted_plan",
]

T = TypeVar("T")
MAX_SHARDS = 1024
MAX_UPDATED_BY = 256
TABLES = {pb.BUCKET_TABLE_TIME: mt.TIME_TABLE, pb.BUCKET_TABLE_TOPIC: mt.TOPIC_TABLE}
TABLE_ENUMS = {name: value for value, name in TABLES.items()}
OUTCOMES = {
    WriteOutcome.INSERTED: pb.PUT_OUTCOME_INSERTED,
    WriteOutcome.DUPLICATE: pb.PUT_OUTCOME_DUPLICATE,
    WriteOutcome.INVALID: pb.PUT_OUTCOME_INVALID,
    WriteOutcome.EXPIRED: pb.PUT_OUTCOME_EXPIRED,
}
_DIRECTIONS = {
    common_pb2.DIRECTION_UNSPECIFIED: Direction.FORWARD,
    common_pb2.DIRECTION_FORWARD: Direction.FORWARD,
    common_pb2.DIRECTION_BACKWARD: Direction.BACKWARD,
}
VIEWS = {
    pb.ENVELOPE_VIEW_UNSPECIFIED: "full",
    pb.ENVELOPE_VIEW_FULL: "full",
    pb.ENVELOPE_VIEW_NO_DATA: "no_data",
    pb.ENVELOPE_VIEW_KEYS: "keys",
    pb.ENVELOPE_VIEW_PACKED: "packed",
}


def enum_value(field: str, value: int, known: Mapping[Any, T]) -> T:
    """``known[value]``; INVALID_ARGUMENT naming ``field`` for a value this version does not know."""
    if value not in known:
        raise InvalidField(field, f"unknown value {value}")
    return known[value]


def seconds_of(field: str, d: Duration) -> int:
    """A positive Duration as whole seconds (a fraction rounds up)."""
    if d.seconds < 0 or d.nanos < 0 or (d.seconds == 0 and d.nanos == 0):
        raise InvalidField(field, "must be > 0")
    return d.seconds + (1 if d.nanos else 0)


def time_range(field: str, present: bool, r: common_pb2.TimeRange) -> tuple[int, int]:
    """An optional TimeRange; unset means every uint32 sent time."""
    return check_range(field, r.lower, r.upper) if present else (0, UINT32_MAX)


def envelope_message(stored: StoredEnvelope, *, view: str = "full") -> common_pb2.Envelope:
    """The proto Envelope of a stored one.

    ``full`` / ``no_data``: every field derived from its RLP, checked against its key. ``keys``: only the key
    columns and the raw RLP, which were verified when archived — no decode, no Keccak, no PoW (the hot path of
    history queries spent most of its CPU here). ``packed`` is a query-only view: one envelope gets ``keys``.
    """
    if view in ("keys", "packed"):
        return common_pb2.Envelope(
            rlp=stored.raw,
            hash=stored.hash,
            expiry=stored.expiry,
            ttl=(stored.expiry - stored.sent) & 0xFFFFFFFF,
            topic=stored.topic,
            sent=stored.sent,
        )
    with_data = view == "full"
    try:
        env = decode_envelope(stored.raw, max_size=len(stored.raw))
    except CodecError as err:
        raise ArchiveCorrupt(f"stored envelope 0x{stored.hash.hex()} does not decode: {err}") from err
    if (env.hash, env.topic, env.expiry, env.expiry - env.ttl) != (
        stored.hash,
        stored.topic,
        stored.expiry,
        stored.sent,
    ):
        raise ArchiveCorrupt(f"stored envelope 0x{stored.hash.hex()} no longer matches its key")
    return common_pb2.Envelope(
        rlp=stored.raw,
        hash=stored.hash,
        expiry=env.expiry,
        ttl=env.ttl,
        topic=env.topic,
        data=env.data if with_data else b"",
        nonce=env.nonce,
        sent=stored.sent,
        pow=calculate_pow(env),
    )


def packed_envelopes(page: PackedColumns) -> pb.PackedEnvelopes:
    """The PackedEnvelopes message of a packed page: one join or list per column."""
    return pb.PackedEnvelopes(
        rlp=b"".join(page.raws), rlp_sizes=page.sizes, sent=page.sents, hashes=b"".join(page.hashes)
    )


def query_of(request: pb.QueryEnvelopesRequest) -> tuple[Query, str]:
    """The store query a QueryEnvelopes request asks for, and its filter kind (topics / bloom / all)."""
    if not request.HasField("range"):
        raise InvalidField("range", "required")
    lower, upper = check_range("range", request.range.lower, request.range.upper)
    check_count("topics", len(request.topics), 0, MAX_TOPIC_INTEREST, "topics")
    topics = frozenset(check_topic(f"topics[{i}]", t) for i, t in enumerate(request.topics))
    bloom = check_bloom("bloom", request.bloom)
    if not 1 <= request.limit <= MAX_QUERY_LIMIT:
        raise LimitExceeded("limit", f"must be 1 to {MAX_QUERY_LIMIT}, got {request.limit}")
    after = None
    if request.HasField("after"):
        after = Position(request.after.sent, check_position_hash("after.hash", request.after.hash))
    direction = enum_value("direction", request.direction, _DIRECTIONS)
    kind = "topics" if topics else "bloom" if bloom else "all"
    query = Query(
        lower=lower,
        upper=upper,
        limit=request.limit,
        topics=topics,
        bloom=None if topics else (bloom or FULL_BLOOM),  # no topics, no bloom: everything (API)
        after=after,
        direction=direction,
    )
    return query, kind


def bucket_message(layout: mt.Layout, info: BucketInfo) -> pb.BucketInfo:
    """The BucketInfo message of a partition."""
    return pb.BucketInfo(
        key=pb.BucketKey(
            table=TABLE_ENUMS[info.table],
            bucket_start=layout.start_of(info.table, info.bucket),
            shard=info.shard,
            topic=info.topic or b"",
        ),
        width=Duration(seconds=layout.width(info.table)),
        row_count=info.rows,
        byte_estimate=info.size_bytes,
        estimated=False,
    )


def bucket_key(layout: mt.Layout, field: str, key: pb.BucketKey) -> BucketInfo:
    """The partition a BucketKey names (sizes left at 0)."""
    if key.table not in TABLES:
        raise InvalidField(f"{field}.table", "must be BUCKET_TABLE_TIME or BUCKET_TABLE_TOPIC")
    table = TABLES[key.table]
    bucket = layout.bucket_at(table, key.bucket_start, f"{field}.bucket_start")
    if table == mt.TIME_TABLE and key.topic:
        raise InvalidField(f"{field}.topic", "must be empty for BUCKET_TABLE_TIME")
    topic = check_topic(f"{field}.topic", key.topic) if table == mt.TOPIC_TABLE else None
    return BucketInfo(table, bucket, key.shard, 0, 0, topic)


def wanted_plan(layout: mt.Layout, defaults: Mapping[str, int], plan: pb.ShardPlan) -> list[mt.WantedEntry]:
    """The entries a PutShardPlan request asks for; widths and defaults must be echoed unchanged."""
    for name, table in (("time_bucket_width", mt.TIME_TABLE), ("topic_bucket_width", mt.TOPIC_TABLE)):
        width: Duration = getattr(plan, name)
        if (width.seconds, width.nanos) != (layout.width(table), 0):
            raise InvalidField(f"plan.{name}", f"is fixed at {layout.width(table)}s by the schema; echo it")
    for name, table in (("default_time_shards", mt.TIME_TABLE), ("default_topic_shards", mt.TOPIC_TABLE)):
        if getattr(plan, name) != defaults[table]:
            raise InvalidField(
                f"plan.{name}", f"is fixed at {defaults[table]} by ARCHIVE_DEFAULT_SHARDS; echo it"
            )
    if len(plan.updated_by.encode()) > MAX_UPDATED_BY:
        raise InvalidField("plan.updated_by", f"must be at most {MAX_UPDATED_BY} bytes")
    wanted = []
    for i, e in enumerate(plan.entries):
        field = f"plan.entries[{i}]"
        if e.table not in TABLES:
            raise InvalidField(f"{field}.table", "must be BUCKET_TABLE_TIME or BUCKET_TABLE_TOPIC")
        if e.topic:
            raise InvalidField(
                f"{field}.topic",
                "per-topic entries are not supported: a topic-table bucket (one day) is sharded "
                "alike for every topic; leave topic empty",
            )
        if not 1 <= e.shards <= MAX_SHARDS:
            raise InvalidField(f"{field}.shards", f"must be 1 to {MAX_SHARDS}, got {e.shards}")
        table = TABLES[e.table]
        bucket = layout.bucket_at(table, e.bucket_start, f"{field}.bucket_start")
        wanted.append(mt.WantedEntry(table, bucket, e.shards, field))
    return wanted


def candidate_of(item: pb.PutItem, *, max_envelope_bytes: int) -> Candidate:
    """A PutItem through the integrity gate: the row to store, or why it is refused (never raises)."""
    checked = check_envelope(item.rlp, item.hash, item.message_hash, max_size=max_envelope_bytes)
    if isinstance(checked, str):
        return Refused(item.hash, checked)
    retention: int | None = None
    if item.HasField("retention"):
        try:
            retention = seconds_of("retention", item.retention)
        except InvalidField as err:
            return Refused(item.hash, err.message)
    return Accepted(checked.envelope, checked.size, retention)
