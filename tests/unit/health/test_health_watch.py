"""WatchHub: the first report, every status change in order, the ANY-mode rate limit, backlog, close."""

from __future__ import annotations

import pytest

from meshcore.errors import ResourceExhausted, Unavailable
from services.health.hysteresis import Transition
from services.health.logic import HealthReport, HealthStatus, Thresholds, assess
from services.health.watch import MAX_BACKLOG, WatchHub, WatchStream, WatchUpdate
from tests.unit.health.health_fakes import T0, archive, edge

U, M, H = HealthStatus.UNHEALTHY, HealthStatus.MINIMALLY_HEALTHY, HealthStatus.HEALTHY


def report(status: HealthStatus, peers: int, at: float = T0) -> HealthReport:
    a = assess((edge("e:1", range(peers)),), (archive(),), Thresholds())
    return HealthReport(status, at, at, a.level, None, a, Thresholds())


async def take(stream: WatchStream, n: int) -> list[WatchUpdate]:
    """The next ``n`` updates, which must already be queued (the hub never blocks a publish)."""
    return [await anext(stream) for _ in range(n)]


def pending(hub: WatchHub) -> int:
    return sum(len(w.backlog) for w in hub._watchers)


async def test_the_first_message_is_the_current_report() -> None:
    hub = WatchHub()
    first = report(M, 5)
    hub.publish(first, Transition(None, M, T0), T0)
    stream = hub.watch(any_change=False)
    (update,) = await take(stream, 1)
    assert update == WatchUpdate(first, None, False)
    stream.close()
    assert hub.watchers == 0


async def test_a_watcher_opened_before_the_first_evaluation_gets_it_as_its_first_message() -> None:
    hub = WatchHub()
    stream = hub.watch(any_change=False)
    reading = anext(stream)
    hub.publish(report(U, 0), Transition(None, U, T0), T0)
    update = await reading
    assert update.previous is None and not update.status_changed and update.report.status is U
    stream.close()


async def test_status_mode_gets_every_transition_in_order_and_nothing_else() -> None:
    hub = WatchHub()
    hub.publish(report(U, 0), Transition(None, U, T0), T0)
    stream = hub.watch(any_change=False)
    await take(stream, 1)
    hub.publish(report(U, 2, T0 + 1), None, T0 + 1)  # peers changed, status did not
    hub.publish(report(M, 4, T0 + 2), Transition(U, M, T0 + 2), T0 + 2)
    hub.publish(report(H, 6, T0 + 3), Transition(M, H, T0 + 3), T0 + 3)
    hub.publish(report(U, 0, T0 + 4), Transition(H, U, T0 + 4), T0 + 4)
    assert pending(hub) == 3
    updates = await take(stream, 3)
    assert [(u.previous, u.report.status, u.status_changed) for u in updates] == [
        (U, M, True),
        (M, H, True),
        (H, U, True),
    ]
    stream.close()


async def test_any_mode_sends_other_changes_at_most_once_per_interval_with_the_latest_report() -> None:
    hub = WatchHub(min_interval_s=1.0)
    hub.publish(report(M, 4), Transition(None, M, T0), T0)
    stream = hub.watch(any_change=True)
    await take(stream, 1)
    hub.publish(report(M, 4, T0 + 0.5), None, T0 + 0.5)  # nothing changed but the time
    hub.publish(report(M, 5, T0 + 0.6), None, T0 + 0.6)  # changed, but within the interval
    assert pending(hub) == 0
    latest = report(M, 5, T0 + 1.0)
    hub.publish(latest, None, T0 + 1.0)
    (update,) = await take(stream, 1)
    assert update == WatchUpdate(latest, M, False)
    hub.publish(report(M, 5, T0 + 2.5), None, T0 + 2.5)  # same fingerprint: nothing to say
    assert pending(hub) == 0
    stream.close()


async def test_any_mode_sends_status_changes_at_once_inside_the_rate_limit() -> None:
    hub = WatchHub(min_interval_s=1.0)
    hub.publish(report(M, 5), Transition(None, M, T0), T0)
    stream = hub.watch(any_change=True)
    await take(stream, 1)
    hub.publish(report(H, 6, T0 + 0.1), Transition(M, H, T0 + 0.1), T0 + 0.1)
    (update,) = await take(stream, 1)
    assert update.status_changed and update.previous is M and update.report.status is H
    stream.close()


async def test_unread_unchanged_status_reports_replace_each_other_but_never_the_first_or_a_change() -> None:
    hub = WatchHub(min_interval_s=0.0)
    hub.publish(report(M, 4), Transition(None, M, T0), T0)
    stream = hub.watch(any_change=True)
    for peers in (5, 4, 5):
        hub.publish(report(M, peers, T0 + peers), None, T0 + peers)
    hub.publish(report(H, 6, T0 + 10), Transition(M, H, T0 + 10), T0 + 10)
    hub.publish(report(H, 7, T0 + 11), None, T0 + 11)
    hub.publish(report(H, 8, T0 + 12), None, T0 + 12)
    updates = await take(stream, 4)
    assert [(u.previous, u.report.assessment.peer_count, u.status_changed) for u in updates] == [
        (None, 4, False),
        (M, 5, False),
        (M, 6, True),
        (H, 8, False),
    ]
    stream.close()


async def test_a_watcher_too_far_behind_gets_its_backlog_then_resource_exhausted() -> None:
    hub = WatchHub()
    hub.publish(report(U, 0), Transition(None, U, T0), T0)
    stream = hub.watch(any_change=False)
    cycle = [(U, 0), (M, 4)]
    for i in range(MAX_BACKLOG + 5):
        (prev, _), (status, peers) = cycle[i % 2], cycle[(i + 1) % 2]
        hub.publish(report(status, peers, T0 + i), Transition(prev, status, T0 + i), T0 + i)
    updates = await take(stream, MAX_BACKLOG)
    assert updates[0].previous is None and all(u.status_changed for u in updates[1:])
    with pytest.raises(ResourceExhausted, match="reconnect"):
        await anext(stream)
    assert hub.watchers == 0


async def test_close_ends_open_streams_and_refuses_new_ones() -> None:
    hub = WatchHub()
    hub.publish(report(M, 4), Transition(None, M, T0), T0)
    stream = hub.watch(any_change=False)
    await take(stream, 1)
    reading = anext(stream)
    hub.close()
    with pytest.raises(Unavailable):
        await reading
    with pytest.raises(Unavailable):
        await anext(hub.watch(any_change=False))
    assert hub.watchers == 0
