"""Reading change streams back: gaps in the event log, and merging the outbox's per-shard change logs.

A gap is reported, never papered over — and never believed when it is not one. Both logs are chains: every
entry names its predecessor (an event its ``prev`` sequence; an outbox change the sequence before it, since
shards number densely), and the log's head row (``event_heads``, ``outbox_shards``) names the last entry.
A reader delivers the chain from its resume point for as long as it is unbroken. At a break the missing
entry is either

- **gone**: written longer ago than the retention window, so everything before it is gone too — a
  :class:`~msgstore.types.Gap` (reported once nothing before the break is left to deliver), or
- **still being written**: on Cassandra a LOGGED batch is atomic but not isolated across partitions
  (Apache Cassandra documentation, "BATCH": "no batch isolation"), so a reader can see a log's new head row,
  or an entry of a later partition, before an entry written by the same batch. The reader stops before the
  break and finds the entry on its next read.

Which of the two is told by *when* the missing entry was written: each entry carries its predecessor's
time (``prev_at``) and the head row its last entry's (``last_at``); an entry older than the window is gone.
A backend whose readers see whole transactions (SQLite) passes no times (None): there a missing entry can
only be gone.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from msgstore.sharding import ResumePosition
from msgstore.types import Event, Gap, OutboxChange, OutboxChanges

__all__ = ["EventRow", "event_page", "gone", "merge_changes"]

#: A retained event as read: the event, its predecessor's sequence and that predecessor's time (None =
#: unknown: the backend shows only whole commits).
EventRow = tuple[Event, int, float | None]


def gone(written_at: float | None, cutoff: float) -> bool:
    """Whether an entry written at ``written_at`` is past the window that ends at ``cutoff``.

    None (the backend does not record it, or a row older than the column) counts as gone: such a backend
    shows only whole commits, so a missing entry cannot be one still being written.
    """
    return written_at is None or written_at <= cutoff


def event_page(
    after: int,
    rows: Sequence[EventRow],
    last_event: int,
    *,
    last_at: float | None = None,
    cutoff: float = -math.inf,
) -> list[Event] | Gap:
    """The answer to "events after ``after``".

    ``rows``: the retained events with sequence > ``after`` in order; ``last_event``/``last_at``: the last
    event ever written and when (read *before* the rows); ``cutoff``: the start of the retention window.
    ``after`` may be a revision rather than an event (a change that emitted none), so the first event's
    predecessor only has to be at or below it.
    """
    out: list[Event] = []
    at = after
    for event, prev, prev_at in rows:
        if prev > at:  # the event ``prev`` is missing between ``at`` and ``event``
            if out or not gone(prev_at, cutoff):
                return out  # deliver the unbroken part; the next read continues (or reports the gap)
            return Gap(event.sequence)
        out.append(event)
        at = event.sequence
    if not rows and last_event > after:
        return Gap(last_event + 1) if gone(last_at, cutoff) else []
    return out


def merge_changes(
    position: ResumePosition,
    per_shard: Sequence[Sequence[OutboxChange]],
    last_sequences: Sequence[int],
    limit: int,
    *,
    cutoff: float = -math.inf,
    last_times: Sequence[float | None] | None = None,
    prev_times: Sequence[Sequence[float | None]] | None = None,
) -> OutboxChanges:
    """At most ``limit`` changes after ``position``, oldest first across shards, each shard in order.

    ``per_shard[i]`` are shard i's retained changes after its position, in sequence order;
    ``last_sequences[i]`` the shard's last sequence (read before the changes), ``last_times[i]`` when it was
    written and ``prev_times[i][j]`` when the change before ``per_shard[i][j]`` was (None or omitted: the
    backend shows whole saves only). A shard whose next change is gone is reported in ``gaps`` and resumes
    from just before its first retained change; a shard whose next change is still being written delivers
    nothing past it this time.
    """
    gaps: list[int] = []
    start = position
    chains: list[list[OutboxChange]] = []
    for shard, changes in enumerate(per_shard):
        expected = position.sequences[shard] + 1
        chain: list[OutboxChange] = []
        for j, change in enumerate(changes):
            if change.sequence != expected:
                prev_at = prev_times[shard][j] if prev_times is not None else None
                if chain or not gone(prev_at, cutoff):
                    break  # still being written, or a later gap: deliver the unbroken part first
                gaps.append(shard)
                start = start.advanced(shard, change.sequence - 1)
            chain.append(change)
            expected = change.sequence + 1
        last = last_sequences[shard]
        if not changes and last >= expected:
            last_at = last_times[shard] if last_times is not None else None
            if gone(last_at, cutoff):
                gaps.append(shard)
                start = start.advanced(shard, last)
        chains.append(chain)
    out: list[OutboxChange] = []
    for change in heapq.merge(*chains, key=lambda c: c.changed_at):
        if len(out) >= limit:
            break
        out.append(change)
        start = start.advanced(change.shard, change.sequence)
    return OutboxChanges(out, start.encode(), tuple(gaps))
