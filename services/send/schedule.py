"""The outbox's state machine and serving order (pure: every function takes ``now``; no I/O).

MESSAGING-API "Retry": an initial attempt and 3 retries, 1 s, 2 s and 4 s after each failure; a failure is
a publish that reached no peer, or a message the store does not hold when store confirmation applies;
retries halt while the node is Unhealthy and resume (the schedule continuing) on MinimallyHealthy or
Healthy. "Request prioritization": fresh requests before retries, retries newest first. A request always
ends: after its last attempt it is FAILED with an error that says why.

MessageRecord flags (MESSAGING-API "Properties of MessageRecord"): ``sending`` is true while an attempt is
in flight or scheduled; ``sent`` becomes true only with ``sending`` back to false (a request waiting for
the store is not sending); ``sent`` and ``stored`` never revert; ``error`` is cleared by a later success.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from msgstore.types import MessageError, MessageErrorKind, OutboxEntry, SendState
from services.send.ports import PublishOutcome

__all__ = [
    "PENDING",
    "RetryPolicy",
    "after_publish",
    "after_store_check",
    "cancel",
    "due_at",
    "fail",
    "order_key",
    "pause",
    "resend",
    "resume",
    "start_attempt",
]

#: States that are not final (MESSAGING-API ``getPendingRequests``).
PENDING = frozenset(
    {SendState.QUEUED, SendState.SENDING, SendState.RETRY_WAIT, SendState.PAUSED, SendState.AWAITING_STORE}
)
_DETAIL_LIMIT = 1024  # common.proto MessageError.detail: at most 1024 bytes


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts allowed and their backoff."""

    retries: int = 3
    """Retries after the initial attempt (MESSAGING-API: 3)."""
    backoff_s: float = 1.0
    """Delay before the first retry; doubled for each further one (1 s, 2 s, 4 s)."""
    store_check_delay_s: float = 0.5
    """Wait between a successful publish and asking the store."""

    @property
    def max_attempts(self) -> int:
        """The initial attempt plus the retries."""
        return 1 + self.retries

    def delay_after(self, attempt: int) -> float:
        """Delay before the retry that follows failed attempt number ``attempt`` (1-based)."""
        return self.backoff_s * float(2 ** (attempt - 1))


def _clip(text: str) -> str:
    raw = text.encode()
    return text if len(raw) <= _DETAIL_LIMIT else raw[: _DETAIL_LIMIT - 3].decode(errors="ignore") + "..."


def due_at(entry: OutboxEntry, policy: RetryPolicy) -> float | None:
    """When the scheduler should next work on ``entry``; None while it waits for something else."""
    progress = entry.progress
    if progress.state is SendState.QUEUED:
        return progress.next_attempt_at if progress.next_attempt_at is not None else progress.scheduled_at
    if progress.state is SendState.RETRY_WAIT:
        return progress.next_attempt_at if progress.next_attempt_at is not None else entry.updated_at
    if progress.state is SendState.AWAITING_STORE:
        return entry.updated_at + policy.store_check_delay_s
    return None


def order_key(entry: OutboxEntry) -> tuple[int, int, float, str]:
    """Serving order among due entries (smallest first): higher priority, then fresh before retries, fresh
    oldest first (FIFO), retries newest first by their last attempt ("most recently scheduled or retried")."""
    progress = entry.progress
    fresh = progress.attempts == 0
    when = progress.scheduled_at if fresh else -(progress.last_attempt_at or progress.scheduled_at)
    return (-int(progress.priority), 0 if fresh else 1, when, entry.request_id)


def start_attempt(entry: OutboxEntry, now: float) -> OutboxEntry:
    """The entry with one more attempt in flight (SENDING)."""
    progress = replace(
        entry.progress,
        state=SendState.SENDING,
        attempts=entry.progress.attempts + 1,
        last_attempt_at=now,
        next_attempt_at=None,
    )
    return replace(entry, progress=progress, sending=True, updated_at=now)


def fail(
    entry: OutboxEntry, kind: MessageErrorKind, detail: str, now: float, policy: RetryPolicy
) -> OutboxEntry:
    """A failed attempt: RETRY_WAIT with the next delay, or FAILED after the last attempt.

    The final error keeps the last failure's kind (NO_PEERS, NOT_STORED) so a client sees why it ended;
    other kinds become RETRIES_EXHAUSTED with the last attempt's detail.
    """
    attempt = entry.progress.attempts
    if attempt < entry.progress.max_attempts:
        error = MessageError(kind=kind, detail=_clip(detail), attempt=attempt, occurred_at=now)
        progress = replace(
            entry.progress, state=SendState.RETRY_WAIT, next_attempt_at=now + policy.delay_after(attempt)
        )
        return replace(entry, progress=progress, sending=True, error=error, updated_at=now)
    final_kind = (
        kind
        if kind in (MessageErrorKind.NO_PEERS, MessageErrorKind.NOT_STORED)
        else (MessageErrorKind.RETRIES_EXHAUSTED)
    )
    error = MessageError(
        kind=final_kind,
        detail=_clip(f"gave up after {attempt} attempts; last: {detail}"),
        attempt=attempt,
        occurred_at=now,
    )
    return _finish(replace(entry, error=error), SendState.FAILED, now)


def _finish(entry: OutboxEntry, state: SendState, now: float) -> OutboxEntry:
    progress = replace(entry.progress, state=state, next_attempt_at=None, finished_at=now)
    return replace(entry, progress=progress, sending=False, updated_at=now)


def after_publish(
    entry: OutboxEntry, outcome: PublishOutcome, now: float, policy: RetryPolicy
) -> OutboxEntry:
    """The entry after an attempt's publish: sent (SUCCEEDED, or AWAITING_STORE), refused, or failed."""
    entry = replace(entry, envelope_hash=outcome.envelope_hash)
    if outcome.relayed_to > 0:
        progress = replace(entry.progress, relayed_peers=outcome.relayed_to)
        sent = replace(entry, progress=progress, sent=True, sent_at=entry.sent_at or now, error=None)
        if entry.progress.store_confirmation and not entry.stored:
            progress = replace(progress, state=SendState.AWAITING_STORE, next_attempt_at=None)
            return replace(sent, progress=progress, sending=False, updated_at=now)
        return _finish(sent, SendState.SUCCEEDED, now)
    if outcome.rejected_fault:
        # A refusal is about the envelope itself (size, PoW, topic): sending it again cannot help.
        error = MessageError(
            kind=MessageErrorKind.REJECTED,
            detail=_clip(outcome.detail or "refused by the edge peers"),
            envelope_fault=outcome.rejected_fault,
            attempt=entry.progress.attempts,
            occurred_at=now,
        )
        return _finish(replace(entry, error=error), SendState.FAILED, now)
    return fail(entry, MessageErrorKind.NO_PEERS, outcome.detail or "reached no Waku peer", now, policy)


def after_store_check(entry: OutboxEntry, stored: bool, now: float, policy: RetryPolicy) -> OutboxEntry:
    """The entry after asking the store: SUCCEEDED and stored, or a NOT_STORED failure (retry or FAILED)."""
    if stored:
        done = replace(entry, stored=True, stored_at=entry.stored_at or now, error=None)
        return _finish(done, SendState.SUCCEEDED, now)
    detail = f"the store does not hold envelope 0x{entry.envelope_hash.hex()}"
    return fail(entry, MessageErrorKind.NOT_STORED, detail, now, policy)


def pause(entry: OutboxEntry, now: float) -> OutboxEntry:
    """Halt a waiting entry (QUEUED or RETRY_WAIT) while the node is Unhealthy; ``next_attempt_at`` is kept
    so :func:`resume` can continue the schedule."""
    if entry.progress.state not in (SendState.QUEUED, SendState.RETRY_WAIT):
        return entry
    return replace(entry, progress=replace(entry.progress, state=SendState.PAUSED), updated_at=now)


def resume(entry: OutboxEntry, paused_since: float, now: float) -> OutboxEntry:
    """A PAUSED entry back in the schedule: the delay that remained when the pause began is kept, not
    restarted (a retry due 3 s after the pause began is due 3 s after the resume)."""
    if entry.progress.state is not SendState.PAUSED:
        return entry
    state = SendState.QUEUED if entry.progress.attempts == 0 else SendState.RETRY_WAIT
    nxt = entry.progress.next_attempt_at
    if nxt is not None:
        nxt = now + max(0.0, nxt - paused_since)
    return replace(entry, progress=replace(entry.progress, state=state, next_attempt_at=nxt), updated_at=now)


def cancel(entry: OutboxEntry, now: float) -> OutboxEntry | None:
    """CANCELED, or None when the entry is already final (Cancel is then a no-op)."""
    if entry.state.is_final:
        return None
    return _finish(entry, SendState.CANCELED, now)


def resend(entry: OutboxEntry, now: float, policy: RetryPolicy) -> OutboxEntry | None:
    """A FAILED entry re-queued as fresh with its attempts reset; None for any other state. The error stays
    until a success clears it."""
    if entry.state is not SendState.FAILED:
        return None
    progress = replace(
        entry.progress,
        state=SendState.QUEUED,
        attempts=0,
        max_attempts=policy.max_attempts,
        next_attempt_at=now,
        finished_at=None,
    )
    return replace(entry, progress=progress, sending=True, updated_at=now)
