"""RetentionPolicy: how long an envelope is kept, globally, per topic and per item."""

from __future__ import annotations

import pytest

from archivestore.retention import DAY_S, RetentionPolicy

A, B = b"\x01\x02\x03\x04", b"\xaa\xbb\xcc\xdd"


def test_default_keeps_thirty_days() -> None:
    assert RetentionPolicy().default_s == 30 * DAY_S
    assert RetentionPolicy().retention_for(A) == 30 * DAY_S


@pytest.mark.parametrize(("days", "seconds"), [(30, 30 * DAY_S), (0.5, DAY_S // 2), (0, None), (None, None)])
def test_from_days_uses_status_go_units_and_zero_means_forever(
    days: float | None, seconds: int | None
) -> None:
    assert RetentionPolicy.from_days(days).default_s == seconds


def test_from_days_converts_per_topic_overrides() -> None:
    policy = RetentionPolicy.from_days(10, {A: 1, B: 0.25})
    assert policy.per_topic_s == {A: DAY_S, B: DAY_S // 4}


def test_per_topic_zero_days_keeps_nothing_unlike_the_global_zero() -> None:
    # Pinned on purpose: a zero global retention is status-go's "disabled" (keep forever); a zero per-topic
    # override is a real duration of zero seconds, i.e. envelopes on that topic are never kept.
    policy = RetentionPolicy.from_days(0, {A: 0})
    assert policy.retention_for(B) is None
    assert policy.retention_for(A) == 0
    assert policy.ttl(sent=100, topic=A, now=100) == 0  # already expired at its own sent time


def test_precedence_item_then_topic_then_default() -> None:
    policy = RetentionPolicy(default_s=1000, per_topic_s={A: 50})
    assert policy.retention_for(B) == 1000
    assert policy.retention_for(A) == 50
    assert policy.retention_for(A, override_s=7) == 7
    assert policy.retention_for(B, override_s=0) == 0


def test_expires_at_and_ttl() -> None:
    policy = RetentionPolicy(default_s=100, per_topic_s={A: 10})
    assert policy.expires_at(1_000, B) == 1_100
    assert policy.expires_at(1_000, A) == 1_010
    assert policy.ttl(1_000, B, now=1_040) == 60
    assert policy.ttl(1_000, B, now=1_100) == 0  # "0 or less means already expired"
    assert policy.ttl(1_000, A, now=1_100) == -90


def test_forever_has_no_expiry_and_no_ttl() -> None:
    policy = RetentionPolicy(default_s=None, per_topic_s={A: 10})
    assert policy.expires_at(1_000, B) is None
    assert policy.ttl(1_000, B, now=10**9) is None
    assert policy.expires_at(1_000, A) == 1_010


def test_cutoffs_for_an_expiry_run() -> None:
    policy = RetentionPolicy(default_s=100, per_topic_s={A: 500, B: 5})
    assert policy.cutoffs(now=10_000) == (9_900, {A: 9_500, B: 9_995})
    assert RetentionPolicy(default_s=None).cutoffs(now=10_000) == (None, {})


def test_cutoffs_agree_with_expires_at() -> None:
    # An envelope is past retention at `now` exactly when sent <= cutoff. expire() deletes sent < cutoff
    # (status-go's cleaner range), so the one second *at* the cutoff is already invisible and goes next run.
    policy = RetentionPolicy(default_s=100, per_topic_s={A: 30})
    now = 5_000
    cutoff, per_topic = policy.cutoffs(now)
    assert cutoff is not None
    for topic in (A, B):
        for sent in range(now - 150, now + 1):
            expires_at = policy.expires_at(sent, topic)
            assert expires_at is not None
            assert (expires_at <= now) == (sent <= per_topic.get(topic, cutoff))
