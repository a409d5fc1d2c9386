"""The SQLite adapter's SQL text and the query plans SQLite picks for it (EXPLAIN QUERY PLAN).

Plans are checked on a populated, ANALYZEd database, so statistics (which ``PRAGMA optimize`` gathers
in production) cannot silently turn an index range into a sort of the whole range.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator

import pytest

from archivestore.sqlite.schema import migrate
from archivestore.sqlite.statements import BY_KEY_SQL, VISIBLE, order_by, range_clause, scan_sql, topics_sql
from archivestore.types import Direction

FWD, BWD = Direction.FORWARD, Direction.BACKWARD


@pytest.fixture(scope="module")
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn, now=0)
    conn.execute("BEGIN")
    for i in range(3000):
        h = hashlib.sha256(i.to_bytes(4, "big")).digest()
        topic = bytes([0, 0, 0, 0 if i % 50 else i % 7])  # one dominant topic, a few rare ones
        expires = None if i % 3 else 10**10
        conn.execute(
            "INSERT INTO envelopes VALUES (?, ?, ?, ?, ?, ?, ?)",
            (1000 + i // 4, h, topic, 0, expires, h if i % 5 == 0 else None, b"x" * 100),
        )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    yield conn
    conn.close()


def plan(conn: sqlite3.Connection, sql: str) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, [None] * sql.count("?"))]


def test_range_clause_text() -> None:
    assert range_clause(FWD, resume=False) == f"sent >= ? AND sent <= ? AND {VISIBLE}"
    assert (
        range_clause(FWD, resume=True) == f"sent >= ? AND sent <= ? AND (sent, hash) > (?, ?) AND {VISIBLE}"
    )
    assert "(sent, hash) < (?, ?)" in range_clause(BWD, resume=True)
    assert order_by(FWD) == "sent, hash" and order_by(BWD) == "sent DESC, hash DESC"


@pytest.mark.parametrize("direction", [FWD, BWD])
@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("arms", [1, 2, 5, 64])
def test_topics_query_merges_index_ranges_without_sorting(
    db: sqlite3.Connection, direction: Direction, resume: bool, arms: int
) -> None:
    sql = topics_sql(arms, direction, resume=resume)
    steps = plan(db, sql)
    searches = [s for s in steps if s.startswith("SEARCH")]
    assert len(searches) == arms
    assert all(
        s.startswith("SEARCH envelopes USING INDEX envelopes_topic (topic=? AND sent>? AND sent<?)")
        for s in searches
    )
    assert not any("TEMP B-TREE" in s for s in steps), steps
    assert ("MERGE (UNION ALL)" in steps) == (arms > 1)
    assert sql.count("?") == arms * (4 + 2 * resume) + 1  # per arm: topic, lower, upper, [resume], now


def test_topics_query_needs_a_topic() -> None:
    with pytest.raises(ValueError):
        topics_sql(0, FWD, resume=False)


@pytest.mark.parametrize("direction", [FWD, BWD])
@pytest.mark.parametrize("in_topics", [0, 3])
def test_time_scan_walks_the_primary_key(
    db: sqlite3.Connection, direction: Direction, in_topics: int
) -> None:
    for resume in (False, True):
        steps = plan(db, scan_sql(direction, resume=resume, in_topics=in_topics))
        assert steps[0] == "SEARCH envelopes USING PRIMARY KEY (sent>? AND sent<?)", steps
        assert not any("TEMP B-TREE" in s or "envelopes_topic" in s for s in steps), steps


def test_filtered_scan_text() -> None:
    sql = scan_sql(FWD, resume=False, in_topics=2, columns="sent, hash", limited=False)
    assert sql.endswith("AND +topic IN (?, ?) ORDER BY sent, hash")


def test_lookups_use_their_indexes(db: sqlite3.Connection) -> None:
    # a unique lookup either way (the planner may prefer the unique hash index once ANALYZEd)
    assert plan(db, BY_KEY_SQL)[0] in (
        "SEARCH envelopes USING PRIMARY KEY (sent=? AND hash=?)",
        "SEARCH envelopes USING INDEX envelopes_hash (hash=?)",
    )
    assert plan(db, f"SELECT sent FROM envelopes WHERE hash = ? AND {VISIBLE}") == [
        "SEARCH envelopes USING INDEX envelopes_hash (hash=?)"
    ]
    assert plan(db, f"SELECT sent FROM envelopes WHERE message_hash IN (?, ?) AND {VISIBLE}") == [
        "SEARCH envelopes USING INDEX envelopes_message_hash (message_hash=?)"
    ]
    purge = plan(db, "SELECT sent, hash FROM envelopes WHERE expires_at <= ? LIMIT ?")
    assert purge == ["SEARCH envelopes USING COVERING INDEX envelopes_expires_at (expires_at<?)"]


def test_topics_query_returns_merged_order(db: sqlite3.Connection) -> None:
    topics = [bytes([0, 0, 0, t]) for t in (0, 1, 3)]
    for direction in (FWD, BWD):
        params: list[object] = []
        for t in topics:
            params += [t, 1000, 1400, 0]
        rows = db.execute(topics_sql(3, direction, resume=False), [*params, 200]).fetchall()
        keys = [(r[0], r[1]) for r in rows]
        assert len(rows) == 200 and keys == sorted(keys, reverse=direction is BWD)
        assert {r[2] for r in rows} <= set(topics)
