"""Sequence allocation, epoch fencing, gap detection and the stored document form (pure msgstore modules)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from msgstore.allocation import allocate
from msgstore.codec import (
    decode_entry,
    decode_record,
    decode_subscription,
    encode_entry,
    encode_record,
    encode_subscription,
)
from msgstore.errors import LeaseLost
from msgstore.replay import event_page, merge_changes
from msgstore.sequencing import EPOCH_SHIFT, bucket_of, epoch_ceiling, first_sequence
from msgstore.settings import check_lease
from msgstore.sharding import ResumePosition
from msgstore.types import (
    Event,
    EventDraft,
    EventType,
    Gap,
    HealthChange,
    HealthStatus,
    Lease,
    Message,
    MessageError,
    MessageErrorKind,
    MessageOrigin,
    OutboxChange,
    OutboxEntry,
    Record,
    SendPriority,
    SendProgress,
    SendState,
    Subscription,
)

LEASE = Lease("records/writer", "w", 3, 1000.0, 30.0)


def rec(n: int) -> Record:
    return Record(
        bytes([n]) * 32, "/waku/2/rs/16/32", Message(b"p", "/a/1/b/proto"), MessageOrigin.SEND, 10.0 + n
    )


@given(st.integers(1, 2**20), st.integers(0, 2**50))
def test_a_new_epoch_starts_above_everything_before_it(epoch: int, seen: int) -> None:
    first = first_sequence(epoch, seen)
    assert first > seen and first > epoch << EPOCH_SHIFT
    # every sequence an older epoch could have used lies below the new floor
    assert epoch_ceiling(epoch - 1) <= (epoch << EPOCH_SHIFT) < first


def test_sequences_and_revisions_share_one_counter() -> None:
    a, b, c = rec(1), rec(2), rec(3)
    drafts = [
        EventDraft(EventType.MESSAGE_SENT, a.message_hash),
        EventDraft(
            EventType.HEALTH_CHANGE, health=HealthChange(HealthStatus.HEALTHY, HealthStatus.UNHEALTHY)
        ),
        EventDraft(EventType.MESSAGE_CHANGE, a.message_hash),
        EventDraft(EventType.MESSAGE_RECEIVED, c.message_hash),
    ]
    plan = allocate(LEASE, [a, b, c], drafts, next_sequence=100, last_event=90, now=5.0, last_event_at=4.0)
    assert [s.event.sequence for s in plan.events] == [100, 101, 102, 103]
    assert [s.prev for s in plan.events] == [90, 100, 101, 102]
    assert [s.prev_at for s in plan.events] == [4.0, 5.0, 5.0, 5.0] and plan.last_event_at == 5.0
    assert [r.revision for r in plan.records] == [102, 104, 103]  # last event of each; b gets a fresh one
    assert plan.next_sequence == 105 and plan.last_event == 103
    assert plan.events[0].event.record == plan.records[0] and plan.events[1].event.record is None
    with pytest.raises(ValueError):
        allocate(
            LEASE,
            [a],
            [EventDraft(EventType.MESSAGE_SENT, b.message_hash)],
            next_sequence=1,
            last_event=0,
            now=0,
        )
    with pytest.raises(ValueError):
        allocate(LEASE, [a, a], [], next_sequence=1, last_event=0, now=0)
    with pytest.raises(LeaseLost):
        allocate(LEASE, [a], [], next_sequence=epoch_ceiling(LEASE.epoch), last_event=0, now=0)


def test_event_pages_report_gaps() -> None:
    ev = [(Event(s, EventType.MESSAGE_CHANGE, 0.0), p, None) for s, p in ((10, 7), (11, 10))]
    assert event_page(7, ev, 11) == [e for e, _, _ in ev]
    assert event_page(8, ev, 11) == [e for e, _, _ in ev]  # 8 was a revision, not an event: nothing missed
    assert event_page(5, ev, 11) == Gap(10)  # 7 is gone
    assert event_page(11, [], 11) == []
    assert event_page(9, [], 11) == Gap(12)
    assert bucket_of(4095) == 0 and bucket_of(4096) == 1


def test_an_event_still_being_written_is_waited_for_not_a_gap() -> None:
    """A Cassandra batch is not isolated: the head row, or a later event, may show before an event of the
    same batch. The missing event's time (its successor's prev_at, the head's last_at) says whether it is
    gone (older than the window: a gap) or in flight (stop before it)."""

    def row(seq: int, prev: int, prev_at: float | None) -> tuple[Event, int, float | None]:
        return Event(seq, EventType.MESSAGE_CHANGE, 100.0), prev, prev_at

    cutoff = 50.0
    # the head says 11 (written at 100), no event is visible yet: in flight, nothing to deliver, no gap
    assert event_page(9, [], 11, last_at=100.0, cutoff=cutoff) == []
    # the head's last event left the window: everything after 9 is gone
    assert event_page(9, [], 11, last_at=40.0, cutoff=cutoff) == Gap(12)
    # 11 shows before 10 (another partition of the same batch): stop before the hole
    assert event_page(9, [row(11, 10, 100.0)], 11, last_at=100.0, cutoff=cutoff) == []
    # 10 itself is gone (its successor says it was emitted at 40): a gap at 11
    assert event_page(7, [row(11, 10, 40.0)], 11, last_at=100.0, cutoff=cutoff) == Gap(11)
    # a hole after delivered events: deliver the chain up to it, report nothing yet
    chain = [row(10, 9, 100.0), row(12, 11, 100.0)]
    assert [e.sequence for e in event_page(9, chain, 12, last_at=100.0, cutoff=cutoff)] == [10]  # type: ignore[union-attr]
    gone_hole = [row(10, 9, 100.0), row(12, 11, 40.0)]
    assert [e.sequence for e in event_page(9, gone_hole, 12, cutoff=cutoff)] == [10]  # type: ignore[union-attr]
    assert event_page(10, gone_hole[1:], 12, cutoff=cutoff) == Gap(12)  # reported on the next read


def test_merge_changes_keeps_shard_order_and_limits() -> None:
    entry = OutboxEntry(
        "r",
        b"h" * 32,
        "p",
        Message(b"", "t"),
        SendProgress(SendState.QUEUED, SendPriority.NORMAL, 0, 4, 0, False, 0.0),
    )
    shard0 = [OutboxChange(0, s, t, entry) for s, t in ((3, 1.0), (4, 5.0))]
    shard1 = [OutboxChange(1, s, t, entry) for s, t in ((9, 2.0), (10, 3.0))]
    page = merge_changes(ResumePosition((2, 8)), [shard0, shard1], [4, 10], 3)
    assert [(c.shard, c.sequence) for c in page.changes] == [(0, 3), (1, 9), (1, 10)]
    assert ResumePosition.decode(page.position, 2) == ResumePosition((3, 10)) and page.gaps == ()
    # shard 0 lost 1-2 (first retained is 3); shard 1 retains nothing after 8 although it reached 10
    gap = merge_changes(ResumePosition((0, 8)), [shard0, []], [4, 10], 10)
    assert gap.gaps == (0, 1) and [c.sequence for c in gap.changes] == [3, 4]
    assert ResumePosition.decode(gap.position, 2) == ResumePosition((4, 10))
    assert merge_changes(ResumePosition((4, 10)), [[], []], [4, 10], 10).gaps == ()


def test_merge_changes_waits_for_a_change_still_being_written() -> None:
    """The shard row (last = 4, written at 100) visible before its change row: no gap, nothing past it;
    the same picture with the last change older than the window is a gap."""
    entry = OutboxEntry(
        "r",
        b"h" * 32,
        "p",
        Message(b"", "t"),
        SendProgress(SendState.QUEUED, SendPriority.NORMAL, 0, 4, 0, False, 0.0),
    )
    start = ResumePosition((3, 0))
    waiting = merge_changes(start, [[], []], [4, 0], 10, cutoff=50.0, last_times=[100.0, None])
    assert (
        waiting.gaps == () and waiting.changes == [] and ResumePosition.decode(waiting.position, 2) == start
    )
    expired = merge_changes(start, [[], []], [4, 0], 10, cutoff=50.0, last_times=[40.0, None])
    assert expired.gaps == (0,) and ResumePosition.decode(expired.position, 2) == ResumePosition((4, 0))
    # change 5 visible, 4 not yet (two changes of one shard in one batch, across partitions)
    five = [OutboxChange(0, 5, 100.0, entry)]
    held = merge_changes(start, [five, []], [5, 0], 10, cutoff=50.0, prev_times=[[100.0], []])
    assert held.gaps == () and held.changes == []
    lost = merge_changes(start, [five, []], [5, 0], 10, cutoff=50.0, prev_times=[[40.0], []])
    assert lost.gaps == (0,) and [c.sequence for c in lost.changes] == [5]


def test_check_lease_stops_before_the_margin() -> None:
    check_lease(LEASE, 2.0, 997.9)
    with pytest.raises(LeaseLost):
        check_lease(LEASE, 2.0, 998.0)


text = st.text(max_size=20)
maybe_bytes = st.none() | st.binary(max_size=20)
times = st.floats(0, 2e9, allow_nan=False)
messages = st.builds(
    Message,
    st.binary(max_size=50),
    text,
    st.none() | st.integers(0, 9),
    st.none() | st.integers(0, 2**62),
    maybe_bytes,
    maybe_bytes,
    st.none() | st.booleans(),
)
errors = st.none() | st.builds(
    MessageError, st.sampled_from(MessageErrorKind), text, st.integers(0, 9), st.integers(0, 4), times
)
progress = st.builds(
    SendProgress,
    st.sampled_from(SendState),
    st.sampled_from(SendPriority),
    st.integers(0, 4),
    st.integers(1, 4),
    st.integers(0, 99),
    st.booleans(),
    times,
    st.none() | times,
    st.none() | times,
    st.none() | times,
)


@given(
    st.builds(
        OutboxEntry,
        text,
        st.binary(min_size=32, max_size=32),
        text,
        messages,
        progress,
        error=errors,
        sent_at=st.none() | times,
        sequence=st.integers(0, 2**60),
    )
)
def test_entries_round_trip(entry: OutboxEntry) -> None:
    assert decode_entry(encode_entry(entry), entry.message.payload) == entry


@given(
    st.builds(
        Record,
        st.binary(min_size=32, max_size=32),
        text,
        messages,
        st.sampled_from(MessageOrigin),
        times,
        error=errors,
        subscription_ids=st.lists(text).map(tuple),
        send_progress=st.none() | progress,
        revision=st.integers(0, 2**62),
    )
)
def test_records_round_trip(record: Record) -> None:
    assert decode_record(encode_record(record), record.message.payload) == record


@given(
    st.builds(
        Subscription,
        text,
        text,
        st.lists(text).map(tuple),
        st.lists(st.binary(min_size=4, max_size=4)).map(tuple),
        times,
        ended_at=st.none() | times,
    )
)
def test_subscriptions_round_trip(sub: Subscription) -> None:
    assert decode_subscription(encode_subscription(sub)) == sub


def test_a_repeat_matches_without_a_timestamp_only() -> None:
    e = OutboxEntry(
        "r",
        b"h" * 32,
        "p",
        Message(b"x", "t", timestamp=5),
        SendProgress(SendState.QUEUED, SendPriority.NORMAL, 0, 4, 0, False, 0.0),
    )
    assert e.repeats(dataclasses.replace(e, message=Message(b"x", "t")))
    assert e.repeats(dataclasses.replace(e, message=Message(b"x", "t", timestamp=5, version=0)))
    assert not e.repeats(dataclasses.replace(e, message=Message(b"x", "t", timestamp=6)))
    assert not e.repeats(dataclasses.replace(e, pubsub_topic="q"))
    assert not e.repeats(dataclasses.replace(e, message=Message(b"x", "t", meta=b"m")))
