"""SQL text for the SQLite archive, built by small pure functions (so the query plans can be unit-tested).

Query plans (checked with ``EXPLAIN QUERY PLAN``; tests/unit/archivestore/test_archivestore_sqlite_plans.py):

- **topics** — one arm per topic, ``SELECT … WHERE topic = ? AND <range>``, joined with ``UNION ALL`` under an
  outer ``ORDER BY sent, hash LIMIT ?``. SQLite runs this as ``MERGE (UNION ALL)`` of per-topic
  ``SEARCH … USING INDEX envelopes_topic`` co-routines: each arm streams in index order and is read lazily, so
  no arm is sorted and only about ``limit + 1 + arms`` rows are ever produced. (Wrapping each arm as a
  subquery with its own ``ORDER BY … LIMIT`` looks equivalent but makes SQLite sort every arm in a temp
  B-tree; ``topic IN (…) ORDER BY`` sorts the whole range.) Arms say ``INDEXED BY envelopes_topic`` so
  statistics gathered by ``PRAGMA optimize`` can never flip them to a primary-key scan filtered by topic.
- **time scan** — ``SEARCH envelopes USING PRIMARY KEY (sent>? AND sent<?)`` in either direction; the resume
  position is a row-value bound ``(sent, hash) > (?, ?)`` (``<`` backward) from ``ordering.resume_key``.
- **filtered time scan** — the same scan with ``+topic IN (…)`` for a bloom expanding to many topics
  (SQLite tests membership in C, 2-4 times faster than filtering rows in Python); above ``scan_sql_topics``
  topics the scan yields keys filtered in Python and rows are then fetched by key (:data:`BY_KEY_SQL`).
"""

from __future__ import annotations

import functools

from archivestore.types import Direction

__all__ = [
    "BY_KEY_SQL",
    "COLUMNS",
    "VISIBLE",
    "order_by",
    "range_clause",
    "scan_sql",
    "topics_sql",
]

#: Envelope columns in the order :func:`archivestore.sqlite.operations.to_envelope` expects.
COLUMNS = "sent, hash, topic, expiry, raw, message_hash"
#: A row is visible until the second it expires (``expires_at`` NULL = kept forever); one ``?`` = now.
VISIBLE = "(expires_at IS NULL OR expires_at > ?)"


def order_by(direction: Direction) -> str:
    """The ``ORDER BY`` terms of the archive order in ``direction``."""
    return "sent, hash" if direction is Direction.FORWARD else "sent DESC, hash DESC"


def range_clause(direction: Direction, *, resume: bool) -> str:
    """``lower ≤ sent ≤ upper`` [and strictly past the resume key] and visible.

    Parameters, in order: lower, upper, [resume sent, resume hash,] now.
    """
    clause = "sent >= ? AND sent <= ?"
    if resume:
        clause += f" AND (sent, hash) {'>' if direction is Direction.FORWARD else '<'} (?, ?)"
    return f"{clause} AND {VISIBLE}"


@functools.lru_cache(maxsize=512)
def topics_sql(arms: int, direction: Direction, *, resume: bool) -> str:
    """The merged per-topic query for ``arms`` topics; parameters: per arm ``topic`` + range, then limit."""
    if arms < 1:
        raise ValueError("a topics query needs at least one topic")
    where = range_clause(direction, resume=resume)
    arm = f"SELECT {COLUMNS} FROM envelopes INDEXED BY envelopes_topic WHERE topic = ? AND {where}"
    return " UNION ALL ".join([arm] * arms) + f" ORDER BY {order_by(direction)} LIMIT ?"


@functools.lru_cache(maxsize=64)
def scan_sql(
    direction: Direction, *, resume: bool, columns: str = COLUMNS, limited: bool = True, in_topics: int = 0
) -> str:
    """The time-ordered scan over the primary key, optionally keeping only ``in_topics`` topics.

    Parameters: range (:func:`range_clause`), then the topics, then the limit. The filter is written
    ``+topic IN (…)``: the unary ``+`` keeps the planner off ``envelopes_topic`` (an IN over the topic
    index would have to sort the whole range), and SQLite answers the IN from an ephemeral set.
    """
    where = range_clause(direction, resume=resume)
    if in_topics:
        where += f" AND +topic IN ({', '.join('?' * in_topics)})"
    sql = f"SELECT {columns} FROM envelopes WHERE {where} ORDER BY {order_by(direction)}"
    return sql + " LIMIT ?" if limited else sql


#: One visible row by key (``sent, hash, now``): a unique lookup (primary key or the unique hash index).
#: Looked up one key at a time: ``(sent, hash) IN (VALUES …)`` made SQLite scan the whole table.
BY_KEY_SQL = f"SELECT {COLUMNS} FROM envelopes WHERE sent = ? AND hash = ? AND {VISIBLE}"
