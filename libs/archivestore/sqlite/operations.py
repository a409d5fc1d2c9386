"""Blocking operations on one sqlite3 connection; :mod:`archivestore.sqlite` runs them on its worker threads.

Every function here takes the connection it may use and does its work in one transaction: writers use
``BEGIN IMMEDIATE`` (take the write lock up front, no lock upgrade deadlocks); readers use a deferred
``BEGIN`` so all statements of one read see the same WAL snapshot (bloom expansion and the scan, or the two
phases of a filtered scan, cannot disagree).
"""

from __future__ import annotations

import heapq
import itertools
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from archivestore.sqlite.statements import BY_KEY_SQL, COLUMNS, VISIBLE, scan_sql, topics_sql
from archivestore.types import Direction, StoredEnvelope
from wakucodec.bloom import bloom_match, topic_to_bloom

__all__ = [
    "InsertRow",
    "QueryPlan",
    "Row",
    "contains",
    "get",
    "insert_batch",
    "query",
    "read_txn",
    "to_envelope",
    "write_txn",
]

#: (sent, hash, topic, expiry, raw, message_hash) — the order of statements.COLUMNS.
Row = tuple[int, bytes, bytes, int, bytes, bytes | None]
#: (sent, hash, topic, expiry, expires_at, message_hash, raw) — the envelopes table's column order.
InsertRow = tuple[int, bytes, bytes, int, int | None, bytes | None, bytes]

_INSERT = (
    "INSERT INTO envelopes (sent, hash, topic, expiry, expires_at, message_hash, raw)"
    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_CATALOGUE = (
    "INSERT INTO topics (topic, first_sent, last_sent) VALUES (?, ?, ?) ON CONFLICT (topic) DO UPDATE SET"
    " first_sent = min(first_sent, excluded.first_sent), last_sent = max(last_sent, excluded.last_sent)"
)
_CHUNK = 500  # keys per IN (…) statement, well under SQLITE_MAX_VARIABLE_NUMBER


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """A validated query as the reader thread runs it (bounds resolved, resume key padded)."""

    lower: int
    upper: int
    fetch: int  # limit + 1: the extra row only tells has_more
    direction: Direction
    now: int
    resume: tuple[int, bytes] | None
    topics: tuple[bytes, ...]  # sorted; empty → bloom
    bloom: bytes | None  # None with no topics = every topic (full bloom)
    bloom_expansion: int
    max_arms: int
    scan_sql_topics: int  # filtered scans test up to this many topics in SQL, more in Python


def to_envelope(row: Row) -> StoredEnvelope:
    """Build the stored envelope from a row in :data:`~archivestore.sqlite.statements.COLUMNS` order."""
    return StoredEnvelope(row[0], row[1], row[2], row[3], row[4], row[5])


@contextmanager
def write_txn(conn: sqlite3.Connection) -> Iterator[sqlite3.Cursor]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (rolled back on any exception); yields a cursor."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn.cursor()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextmanager
def read_txn(conn: sqlite3.Connection) -> Iterator[None]:
    """A deferred read transaction: every statement inside sees one WAL snapshot."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def insert_batch(conn: sqlite3.Connection, rows: Sequence[InsertRow]) -> list[bool]:
    """Insert rows in order in one transaction; per row, whether it was new (False = same hash stored).

    ``ON CONFLICT DO NOTHING`` covers both the primary key and the unique hash index; ``rowcount`` (SQLite
    ``changes()``) is 0 for a skipped row, so a hash repeated inside the batch reports new once, then not.
    Returns only after COMMIT, i.e. after the WAL fsync (``synchronous=FULL``).
    """
    inserted: list[bool] = []
    ranges: dict[bytes, tuple[int, int]] = {}
    with write_txn(conn) as cur:
        for row in rows:
            cur.execute(_INSERT, row)
            new = cur.rowcount == 1
            inserted.append(new)
            if new:
                sent, topic = row[0], row[2]
                first, last = ranges.get(topic, (sent, sent))
                ranges[topic] = (min(first, sent), max(last, sent))
        if ranges:
            cur.executemany(_CATALOGUE, [(t, a, b) for t, (a, b) in ranges.items()])
    return inserted


def query(conn: sqlite3.Connection, plan: QueryPlan) -> list[Row]:
    """Up to ``plan.fetch`` visible rows in order (see sqlite.statements for the plans)."""
    with read_txn(conn):
        if plan.topics:
            return _merge_topics(conn, plan, plan.topics)
        if plan.bloom is None:
            return _scan(conn, plan, None)
        matched = _expand_bloom(conn, plan.bloom, plan.lower, plan.upper)
        if not matched:
            return []
        if len(matched) <= plan.bloom_expansion:
            return _merge_topics(conn, plan, tuple(sorted(matched)))
        return _scan(conn, plan, matched)


def _range_params(plan: QueryPlan) -> list[object]:
    params: list[object] = [plan.lower, plan.upper]
    if plan.resume is not None:
        params.extend(plan.resume)
    params.append(plan.now)
    return params


def _row_key(row: Row) -> tuple[int, bytes]:
    return row[0], row[1]


def _merge_topics(conn: sqlite3.Connection, plan: QueryPlan, topics: tuple[bytes, ...]) -> list[Row]:
    """Merge per-topic index ranges: in SQL up to ``max_arms`` topics, across groups with heapq (lazily)."""
    resume = plan.resume is not None
    rng = _range_params(plan)
    cursors: list[sqlite3.Cursor] = []
    try:
        for start in range(0, len(topics), plan.max_arms):
            group = topics[start : start + plan.max_arms]
            params: list[object] = []
            for topic in group:
                params.append(topic)
                params.extend(rng)
            params.append(plan.fetch)
            cursors.append(conn.execute(topics_sql(len(group), plan.direction, resume=resume), params))
        if len(cursors) == 1:
            return list(cursors[0].fetchall())
        backward = plan.direction is Direction.BACKWARD
        merged: Iterable[Row] = heapq.merge(*cursors, key=_row_key, reverse=backward)
        return list(itertools.islice(merged, plan.fetch))
    finally:
        for cur in cursors:
            cur.close()


def _expand_bloom(conn: sqlite3.Connection, bloom: bytes, lower: int, upper: int) -> frozenset[bytes]:
    """Catalogued topics with rows possibly in [lower, upper] whose Go bloom matches ``bloom``."""
    rows = conn.execute("SELECT topic FROM topics WHERE first_sent <= ? AND last_sent >= ?", (upper, lower))
    return frozenset(t for (t,) in rows if bloom_match(bloom, topic_to_bloom(t)))


def _scan(conn: sqlite3.Connection, plan: QueryPlan, topics: frozenset[bytes] | None) -> list[Row]:
    """Time-ordered scan: unfiltered, filtered in SQL, or (huge topic sets) filtered in Python.

    The Python filter reads only ``(sent, hash, topic)`` while scanning and fetches whole rows for the
    ``fetch`` matches afterwards, so envelope bytes of non-matching rows never become Python objects.
    """
    resume = plan.resume is not None
    if topics is None or len(topics) <= plan.scan_sql_topics:
        wanted = sorted(topics or ())
        sql = scan_sql(plan.direction, resume=resume, in_topics=len(wanted))
        return list(conn.execute(sql, [*_range_params(plan), *wanted, plan.fetch]).fetchall())
    cur = conn.execute(
        scan_sql(plan.direction, resume=resume, columns="sent, hash, topic", limited=False),
        _range_params(plan),
    )
    keys: list[tuple[int, bytes]] = []
    try:
        while len(keys) < plan.fetch:
            batch = cur.fetchmany(512)
            if not batch:
                break
            keys.extend((sent, h) for sent, h, topic in batch if topic in topics)
    finally:
        cur.close()
    rows: list[Row] = []
    for sent, h in keys[: plan.fetch]:
        row = conn.execute(BY_KEY_SQL, (sent, h, plan.now)).fetchone()
        if row is not None:  # same snapshot: always found
            rows.append(row)
    return rows


def get(
    conn: sqlite3.Connection, *, envelope_hash: bytes | None, message_hash: bytes | None, now: int
) -> Row | None:
    """The visible row with this envelope hash, or the first (in order) with this message hash."""
    with read_txn(conn):
        if envelope_hash is not None:
            cur = conn.execute(
                f"SELECT {COLUMNS} FROM envelopes WHERE hash = ? AND {VISIBLE}", (envelope_hash, now)
            )
        else:
            cur = conn.execute(
                f"SELECT {COLUMNS} FROM envelopes WHERE message_hash = ? AND {VISIBLE}"
                " ORDER BY sent, hash LIMIT 1",
                (message_hash, now),
            )
        row: Row | None = cur.fetchone()
        cur.close()
        return row


def contains(conn: sqlite3.Connection, hashes: Sequence[bytes], *, now: int) -> set[bytes]:
    """The subset of ``hashes`` stored and visible, as envelope hashes or message hashes."""
    present: set[bytes] = set()
    unique = list(dict.fromkeys(hashes))
    with read_txn(conn):
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            for column in ("hash", "message_hash"):
                sql = f"SELECT {column} FROM envelopes WHERE {column} IN ({marks}) AND {VISIBLE}"
                present.update(h for (h,) in conn.execute(sql, [*chunk, now]))
    return present
