"""How the records writer numbers a commit: event sequences and record revisions from one counter.

``mailmesh.common.v1.MessageRecord.revision``: "a change that emits events takes the sequence of the last
one; a change that emits none still takes a fresh number". Events of one commit are numbered in the order
given (the specific ``message:*`` events first, then ``message:change``, as ``Event`` documents), and each
event carries the record state *after* the commit, revision included. Each event also records ``prev``,
the sequence of the event before it, and ``prev_at``, when that one was emitted: a reader tells a resume
point whose successors expired (a gap) from one that simply has nothing newer, and a missing event that
expired from one still being written (see :mod:`msgstore.replay`). Pure: both backends use it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from msgstore.errors import LeaseLost
from msgstore.sequencing import epoch_ceiling
from msgstore.types import Event, EventDraft, Lease, Record

__all__ = ["Allocation", "StoredEvent", "allocate"]


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as written: the event, the sequence of the event before it and when that was emitted."""

    event: Event
    prev: int
    prev_at: float | None = None


@dataclass(frozen=True, slots=True)
class Allocation:
    """A numbered commit and the writer's counters after it."""

    records: list[Record]
    events: list[StoredEvent]
    next_sequence: int
    last_event: int
    last_event_at: float | None = None


def allocate(
    lease: Lease,
    records: Sequence[Record],
    drafts: Sequence[EventDraft],
    *,
    next_sequence: int,
    last_event: int,
    now: float,
    last_event_at: float | None = None,
) -> Allocation:
    """Number ``drafts`` and give every record a revision, starting at ``next_sequence``."""
    by_hash = {r.message_hash: r for r in records}
    if len(by_hash) != len(records):
        raise ValueError("a commit holds each record once")
    seq = next_sequence
    event_seqs: list[int] = []
    last_of: dict[bytes, int] = {}
    for draft in drafts:
        if draft.health is None and draft.message_hash not in by_hash:
            raise ValueError(f"event {draft.type.spec_name} reports a record that is not in the commit")
        event_seqs.append(seq)
        if draft.health is None:
            last_of[draft.message_hash] = seq
        seq += 1
    revisions: dict[bytes, int] = {}
    for key in by_hash:
        if key in last_of:
            revisions[key] = last_of[key]
        else:
            revisions[key] = seq
            seq += 1
    if seq > epoch_ceiling(lease.epoch):
        raise LeaseLost(lease.name, lease.epoch, "the epoch's sequence range is exhausted")
    numbered = {h: dataclasses.replace(r, revision=revisions[h]) for h, r in by_hash.items()}
    events: list[StoredEvent] = []
    prev, prev_at = last_event, last_event_at
    for draft, sequence in zip(drafts, event_seqs, strict=True):
        record: Record | None = None if draft.health is not None else numbered[draft.message_hash]
        events.append(StoredEvent(Event(sequence, draft.type, now, record, draft.health), prev, prev_at))
        prev, prev_at = sequence, now
    return Allocation([numbered[r.message_hash] for r in records], events, seq, prev, prev_at)
