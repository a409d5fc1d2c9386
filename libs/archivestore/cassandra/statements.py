"""Every CQL statement the adapter runs, prepared once at ``open()`` and marked idempotent.

Range reads use multi-column clustering slices ``(sent, hash) > (?, ?) AND (sent, hash) < (?, ?)`` with
exclusive bounds: ``(lower - 1, ff…ff)`` means "from ``lower`` inclusive", ``(upper + 1, 00…00)`` "to
``upper`` inclusive", and a resume position is bound directly (Cassandra rejects mixing single- and
multi-column slices).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from cassandra.cluster import Session
from cassandra.query import PreparedStatement

from archivestore.cassandra.schema import (
    BUCKETS_TABLE,
    ERASURES_TABLE,
    KEYS_TABLE,
    PLAN_TABLE,
    TIME_TABLE,
    TOPIC_TABLE,
    TOPICS_BY_DAY,
)

#: Columns of a time-table read; the row's write time decides whether an erasure hides it.
TIME_COLS = "sent, hash, topic, expiry, raw, message_hash, expires_at, WRITETIME(raw)"
TOPIC_COLS = "sent, hash, expiry, raw, message_hash, expires_at, WRITETIME(raw)"
#: Lean columns for the packed history view when no erasure covers the range (so no write time is needed):
#: what a page carries (sent, hash, raw) and what retention hides by (expires_at). Every value of every row
#: is encoded by the node and decoded by the driver one by one; 4 (5) values a row instead of 7 (8).
TIME_LEAN = "sent, hash, topic, raw, expires_at"
TOPIC_LEAN = "sent, hash, raw, expires_at"
#: Small columns for maintenance scans (counting, listing): no raw bytes.
TIME_META = "sent, hash, topic, expires_at, size, WRITETIME(raw)"
TOPIC_META = "sent, hash, expires_at, size, WRITETIME(raw)"
INS_TIME = "bucket, shard, sent, hash, topic, expiry, raw, message_hash, expires_at, size"
INS_TOPIC = "topic, day, shard, sent, hash, expiry, raw, message_hash, expires_at, size"
SLICE = "(sent, hash) > (?, ?) AND (sent, hash) < (?, ?)"
TIME_PK = "bucket = ? AND shard = ?"
TOPIC_PK = "topic = ? AND day = ? AND shard = ?"
DESC = " ORDER BY sent DESC, hash DESC"
KEY_COLS = "key, sent, envelope_hash, kind, topic, expires_at, WRITETIME(kind)"
ERASURE_COLS = "applied_at, seq, lo, hi, topic, except_topics, modulus, remainder"


def _cql(ks: str) -> dict[str, str]:
    t, p, k = f"{ks}.{TIME_TABLE}", f"{ks}.{TOPIC_TABLE}", f"{ks}.{KEYS_TABLE}"
    e = f"{ks}.{ERASURES_TABLE}"
    tbd, bkt, plan = f"{ks}.{TOPICS_BY_DAY}", f"{ks}.{BUCKETS_TABLE}", f"{ks}.{PLAN_TABLE}"
    return {
        # ---- writes (upserts of immutable content; TTL 0 = none)
        "ins_time": f"INSERT INTO {t} ({INS_TIME}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        "ins_topic": f"INSERT INTO {p} ({INS_TOPIC}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TTL ?",
        "ins_key": f"INSERT INTO {k} (key, sent, envelope_hash, kind, topic, expires_at) "
        "VALUES (?, ?, ?, ?, ?, ?) USING TTL ?",
        "ins_topic_day": f"INSERT INTO {tbd} (day, topic, keep_until) VALUES (?, ?, ?) USING TTL ?",
        "ins_bucket": f"INSERT INTO {bkt} (scope, bucket, keep_until) VALUES (0, ?, ?) USING TTL ?",
        "ins_plan": f"INSERT INTO {plan} (table_name, bucket, generation, shards) VALUES (?, ?, ?, ?)",
        "ins_erasure": f"INSERT INTO {e} (scope, {ERASURE_COLS}) VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?) "
        "USING TTL ?",
        # ---- point reads
        "sel_keys": f"SELECT {KEY_COLS} FROM {k} WHERE key IN ?",
        "sel_time_row": f"SELECT {TIME_COLS} FROM {t} WHERE {TIME_PK} AND sent = ? AND hash = ?",
        # ---- range reads (forward / backward)
        "sel_time_fwd": f"SELECT {TIME_COLS} FROM {t} WHERE {TIME_PK} AND {SLICE}",
        "sel_time_bwd": f"SELECT {TIME_COLS} FROM {t} WHERE {TIME_PK} AND {SLICE}{DESC}",
        "sel_topic_fwd": f"SELECT {TOPIC_COLS} FROM {p} WHERE {TOPIC_PK} AND {SLICE}",
        "sel_topic_bwd": f"SELECT {TOPIC_COLS} FROM {p} WHERE {TOPIC_PK} AND {SLICE}{DESC}",
        "lean_time_fwd": f"SELECT {TIME_LEAN} FROM {t} WHERE {TIME_PK} AND {SLICE}",
        "lean_time_bwd": f"SELECT {TIME_LEAN} FROM {t} WHERE {TIME_PK} AND {SLICE}{DESC}",
        "lean_topic_fwd": f"SELECT {TOPIC_LEAN} FROM {p} WHERE {TOPIC_PK} AND {SLICE}",
        "lean_topic_bwd": f"SELECT {TOPIC_LEAN} FROM {p} WHERE {TOPIC_PK} AND {SLICE}{DESC}",
        "meta_time": f"SELECT {TIME_META} FROM {t} WHERE {TIME_PK} AND {SLICE}",
        "meta_topic": f"SELECT {TOPIC_META} FROM {p} WHERE {TOPIC_PK} AND {SLICE}",
        # ---- catalogues, plan, erasures
        "sel_buckets": f"SELECT bucket, keep_until FROM {bkt} "
        "WHERE scope = 0 AND bucket >= ? AND bucket <= ?",
        "sel_topics_day": f"SELECT topic, keep_until FROM {tbd} WHERE day = ?",
        "sel_topics_day_in": f"SELECT topic, keep_until FROM {tbd} WHERE day = ? AND topic IN ?",
        "sel_plan": f"SELECT bucket, generation, shards FROM {plan} "
        "WHERE table_name = ? AND bucket >= ? AND bucket <= ?",
        "sel_erasures": f"SELECT {ERASURE_COLS} FROM {e} WHERE scope = 0",
        # ---- maintenance: server-side counts (ALLOW FILTERING stays inside one partition)
        "count_time": f"SELECT COUNT(*) FROM {t} WHERE {TIME_PK} AND {SLICE} AND expires_at > ? "
        "ALLOW FILTERING",
        "size_time": f"SELECT COUNT(*), SUM(size) FROM {t} WHERE {TIME_PK}",
        "size_topic": f"SELECT COUNT(*), SUM(size) FROM {p} WHERE {TOPIC_PK}",
        # ---- maintenance: whole-partition deletes (and catalogue/erasure bookkeeping)
        "del_time": f"DELETE FROM {t} WHERE {TIME_PK}",
        "del_topic": f"DELETE FROM {p} WHERE {TOPIC_PK}",
        "del_topics_day": f"DELETE FROM {tbd} WHERE day = ?",
        "del_bucket": f"DELETE FROM {bkt} WHERE scope = 0 AND bucket = ?",
        "del_erasure": f"DELETE FROM {e} WHERE scope = 0 AND applied_at = ? AND seq = ?",
    }


@dataclass
class Prepared:
    """The prepared statements (one attribute per statement name in ``_cql``)."""

    ins_time: PreparedStatement
    ins_topic: PreparedStatement
    ins_key: PreparedStatement
    ins_topic_day: PreparedStatement
    ins_bucket: PreparedStatement
    ins_plan: PreparedStatement
    ins_erasure: PreparedStatement
    sel_keys: PreparedStatement
    sel_time_row: PreparedStatement
    sel_time_fwd: PreparedStatement
    sel_time_bwd: PreparedStatement
    sel_topic_fwd: PreparedStatement
    sel_topic_bwd: PreparedStatement
    lean_time_fwd: PreparedStatement
    lean_time_bwd: PreparedStatement
    lean_topic_fwd: PreparedStatement
    lean_topic_bwd: PreparedStatement
    meta_time: PreparedStatement
    meta_topic: PreparedStatement
    sel_buckets: PreparedStatement
    sel_topics_day: PreparedStatement
    sel_topics_day_in: PreparedStatement
    sel_plan: PreparedStatement
    sel_erasures: PreparedStatement
    count_time: PreparedStatement
    size_time: PreparedStatement
    size_topic: PreparedStatement
    del_time: PreparedStatement
    del_topic: PreparedStatement
    del_topics_day: PreparedStatement
    del_bucket: PreparedStatement
    del_erasure: PreparedStatement

    @classmethod
    def prepare(cls, session: Session, keyspace: str) -> Prepared:
        """Prepare every statement (blocking; called from ``open()``'s worker thread)."""
        texts = _cql(keyspace)
        out: dict[str, PreparedStatement] = {}
        for f in fields(cls):
            stmt = session.prepare(texts[f.name])
            # Upserts of immutable content, partition deletes and reads may all be retried safely.
            stmt.is_idempotent = True
            out[f.name] = stmt
        return cls(**out)
