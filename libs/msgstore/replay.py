"""Reading change streams back: gaps in the event log, and merging the outbox's per-shard change logs.

A gap is reported, never papered over: a consumer resuming after ``s`` whose first retained successor says
its predecessor was ``prev > s`` has missed ``prev`` (it expired), so it gets :class:`~msgstore.types.Gap`
and knows to re-read state. Outbox shards number their changes densely (each owner continues at the
shard's last sequence + 1), so there the test is simply "the first retained change is not ``s + 1``".
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from msgstore.sharding import ResumePosition
from msgstore.types import Event, Gap, OutboxChange, OutboxChanges

__all__ = ["event_page", "merge_changes"]


def event_page(after: int, rows: Sequence[tuple[Event, int]], last_event: int) -> list[Event] | Gap:
    """The answer to "events after ``after``" given the retained ``(event, prev)`` rows with sequence >
    ``after`` in order, and the last event sequence ever written (0 if none)."""
    if rows:
        first, prev = rows[0]
        if prev > after:
            return Gap(first.sequence)
        return [event for event, _ in rows]
    if last_event > after:
        return Gap(last_event + 1)
    return []


def merge_changes(
    position: ResumePosition,
    per_shard: Sequence[Sequence[OutboxChange]],
    last_sequences: Sequence[int],
    limit: int,
) -> OutboxChanges:
    """At most ``limit`` changes after ``position``, oldest first across shards, each shard in order.

    ``per_shard[i]`` are shard i's retained changes after its position, in sequence order;
    ``last_sequences[i]`` the shard's last sequence. A shard whose first retained change does not follow
    its position (or that retains none although it moved on) is reported in ``gaps`` and resumes from
    just before its first retained change.
    """
    gaps: list[int] = []
    start = position
    for shard, changes in enumerate(per_shard):
        after = position.sequences[shard]
        first = changes[0].sequence if changes else last_sequences[shard] + 1
        if first > after + 1 and last_sequences[shard] > after:
            gaps.append(shard)
            start = start.advanced(shard, first - 1)
    merged = heapq.merge(*per_shard, key=lambda c: c.changed_at)
    out: list[OutboxChange] = []
    for change in merged:
        if len(out) >= limit:
            break
        out.append(change)
        start = start.advanced(change.shard, change.sequence)
    return OutboxChanges(out, start.encode(), tuple(gaps))
