"""The outbox state machine and serving order (MESSAGING-API "Retry", "Request prioritization")."""

from __future__ import annotations

from msgstore.types import MessageErrorKind, OutboxEntry, SendPriority, SendState
from services.send import schedule
from services.send.ports import PublishOutcome
from services.send.schedule import RetryPolicy
from tests.unit.send.send_fixtures import T0, entry

POLICY = RetryPolicy(retries=3, backoff_s=1.0, store_check_delay_s=0.5)
HASH = b"\xee" * 32
NO_PEERS = PublishOutcome(HASH, 0, detail="no peer")
SENT = PublishOutcome(HASH, 2)


def _fail_attempt(e: OutboxEntry, now: float) -> OutboxEntry:
    return schedule.after_publish(schedule.start_attempt(e, now), NO_PEERS, now, POLICY)


def test_backoff_is_1_2_4_seconds_after_each_failure_then_failed_with_no_peers() -> None:
    e = entry()
    now = T0
    delays = []
    for _ in range(3):
        e = _fail_attempt(e, now)
        assert e.state is SendState.RETRY_WAIT and e.sending and not e.sent
        assert e.progress.next_attempt_at is not None
        delays.append(e.progress.next_attempt_at - now)
        now = e.progress.next_attempt_at
        assert schedule.due_at(e, POLICY) == now
    assert delays == [1.0, 2.0, 4.0]
    e = _fail_attempt(e, now)
    assert e.state is SendState.FAILED and not e.sending
    assert e.progress.attempts == 4 and e.progress.finished_at == now
    assert e.error is not None and e.error.kind is MessageErrorKind.NO_PEERS
    assert "gave up after 4 attempts" in e.error.detail and "no peer" in e.error.detail


def test_a_success_on_a_retry_clears_the_error_and_sets_sent() -> None:
    e = _fail_attempt(entry(), T0)
    assert e.error is not None
    done = schedule.after_publish(schedule.start_attempt(e, T0 + 1), SENT, T0 + 1.2, POLICY)
    assert done.state is SendState.SUCCEEDED
    assert done.sent and not done.sending and done.error is None
    assert done.sent_at == T0 + 1.2 and done.progress.relayed_peers == 2 and done.envelope_hash == HASH


def test_a_rejection_is_final_at_once() -> None:
    e = schedule.start_attempt(entry(), T0)
    out = schedule.after_publish(e, PublishOutcome(HASH, 0, rejected_fault=5, detail="low pow"), T0, POLICY)
    assert out.state is SendState.FAILED and out.progress.attempts == 1
    assert (
        out.error is not None
        and out.error.kind is MessageErrorKind.REJECTED
        and out.error.envelope_fault == 5
    )


def test_store_confirmation_waits_then_succeeds_or_retries_with_not_stored() -> None:
    e = schedule.start_attempt(entry(store_confirmation=True), T0)
    waiting = schedule.after_publish(e, SENT, T0 + 0.1, POLICY)
    assert waiting.state is SendState.AWAITING_STORE
    assert waiting.sent and not waiting.sending  # sent only once sending is back to false
    assert schedule.due_at(waiting, POLICY) == T0 + 0.1 + 0.5
    stored = schedule.after_store_check(waiting, True, T0 + 1, POLICY)
    assert stored.state is SendState.SUCCEEDED and stored.stored and stored.stored_at == T0 + 1
    missing = schedule.after_store_check(waiting, False, T0 + 1, POLICY)
    assert missing.state is SendState.RETRY_WAIT and missing.sent  # sent never reverts
    assert missing.error is not None and missing.error.kind is MessageErrorKind.NOT_STORED
    assert missing.progress.next_attempt_at == T0 + 2


def test_the_last_not_stored_ends_failed_not_stored() -> None:
    e = entry(store_confirmation=True, attempts=3, state=SendState.RETRY_WAIT)
    waiting = schedule.after_publish(schedule.start_attempt(e, T0), SENT, T0, POLICY)
    out = schedule.after_store_check(waiting, False, T0 + 1, POLICY)
    assert out.state is SendState.FAILED
    assert out.error is not None and out.error.kind is MessageErrorKind.NOT_STORED and out.sent


def test_other_final_failures_are_retries_exhausted() -> None:
    e = schedule.start_attempt(entry(attempts=3, state=SendState.RETRY_WAIT), T0)
    out = schedule.fail(e, MessageErrorKind.INTERNAL, "sealing failed", T0, POLICY)
    assert out.error is not None and out.error.kind is MessageErrorKind.RETRIES_EXHAUSTED
    assert "sealing failed" in out.error.detail


def test_order_fresh_before_retries_retries_newest_first_priority_first() -> None:
    fresh_old = entry("a", scheduled_at=T0)
    fresh_new = entry("b", scheduled_at=T0 + 5)
    retry_old = entry(
        "c", state=SendState.RETRY_WAIT, attempts=1, scheduled_at=T0 - 10, last_attempt_at=T0 + 1
    )
    retry_new = entry(
        "d", state=SendState.RETRY_WAIT, attempts=2, scheduled_at=T0 - 20, last_attempt_at=T0 + 3
    )
    low = entry("e", priority=SendPriority.LOW, scheduled_at=T0 - 100)
    high_retry = entry(
        "f", priority=SendPriority.HIGH, state=SendState.RETRY_WAIT, attempts=1, last_attempt_at=T0
    )
    ordered = sorted([low, retry_old, fresh_new, retry_new, fresh_old, high_retry], key=schedule.order_key)
    assert [e.request_id for e in ordered] == ["f", "a", "b", "d", "c", "e"]


def test_pause_keeps_the_remaining_delay_and_resume_continues_it() -> None:
    waiting = _fail_attempt(entry(), T0)  # retry due at T0 + 1
    paused = schedule.pause(waiting, T0 + 0.25)
    assert paused.state is SendState.PAUSED and schedule.due_at(paused, POLICY) is None
    resumed = schedule.resume(paused, paused_since=T0 + 0.25, now=T0 + 100)
    assert resumed.state is SendState.RETRY_WAIT
    assert resumed.progress.next_attempt_at == T0 + 100.75  # 0.75 s were left when the pause began
    assert resumed.progress.attempts == 1


def test_a_paused_fresh_request_resumes_as_fresh() -> None:
    paused = schedule.pause(entry(), T0)
    resumed = schedule.resume(paused, paused_since=T0, now=T0 + 3)
    assert resumed.state is SendState.QUEUED and schedule.due_at(resumed, POLICY) == T0


def test_pause_leaves_in_flight_and_awaiting_entries_alone() -> None:
    for state in (SendState.SENDING, SendState.AWAITING_STORE, SendState.SUCCEEDED):
        e = entry(state=state)
        assert schedule.pause(e, T0) is e


def test_cancel_in_every_state() -> None:
    for state in schedule.PENDING:
        out = schedule.cancel(entry(state=state), T0 + 1)
        assert out is not None and out.state is SendState.CANCELED and not out.sending
        assert out.progress.finished_at == T0 + 1
    for state in (SendState.SUCCEEDED, SendState.FAILED, SendState.CANCELED):
        assert schedule.cancel(entry(state=state), T0) is None


def test_resend_requeues_only_failed_requests_as_fresh() -> None:
    failed = entry(state=SendState.FAILED, attempts=4)
    out = schedule.resend(failed, T0 + 9, POLICY)
    assert out is not None and out.state is SendState.QUEUED and out.progress.attempts == 0
    assert out.progress.scheduled_at == failed.progress.scheduled_at  # keys the index: never changes
    assert schedule.due_at(out, POLICY) == T0 + 9
    for state in (SendState.QUEUED, SendState.SUCCEEDED, SendState.CANCELED):
        assert schedule.resend(entry(state=state), T0, POLICY) is None
