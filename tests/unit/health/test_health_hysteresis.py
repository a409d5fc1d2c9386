"""The hysteresis state machine, driven by peer counts through assess() and a hand-moved clock (no sleeps)."""

from __future__ import annotations

import pytest

from services.health.hysteresis import HealthStateMachine, Transition
from services.health.logic import HealthStatus, ServingStatus, Thresholds, assess
from tests.unit.health.health_fakes import T0, archive, edge

HOLD = 3.0
STEP = 1.0  # the default poll interval
U, M, H = HealthStatus.UNHEALTHY, HealthStatus.MINIMALLY_HEALTHY, HealthStatus.HEALTHY


class Driver:
    """Feeds one evaluation per STEP seconds: a peer count and whether the archive serves."""

    def __init__(self, hold_s: float = HOLD, loss_hold_s: float = 0.0) -> None:
        self.thresholds = Thresholds(hold_s=hold_s, loss_hold_s=loss_hold_s)
        self.machine = HealthStateMachine(hold_s=hold_s, loss_hold_s=loss_hold_s)
        self.now = T0 - STEP
        self.transitions: list[Transition] = []

    def feed(self, peers: int, *, archive_up: bool = True, step: float = STEP) -> HealthStatus:
        self.now += step
        status = ServingStatus.SERVING if archive_up else ServingStatus.NOT_SERVING
        a = assess((edge("e:1", range(peers)),), (archive(status),), self.thresholds)
        moved = self.machine.observe(a.level, loss=a.loss, now=self.now)
        if moved is not None:
            self.transitions.append(moved)
        assert self.machine.status is not None
        return self.machine.status

    def run(self, counts: list[int]) -> list[HealthStatus]:
        return [self.feed(c) for c in counts]


def test_first_evaluation_sets_the_status_directly() -> None:
    d = Driver()
    assert d.feed(5) is M
    assert d.transitions == [Transition(None, M, T0)] and d.machine.status_since == T0


@pytest.mark.parametrize("start", [5, 6])
def test_a_count_flapping_5_6_every_evaluation_stays_at_one_state(start: int) -> None:
    d = Driver()
    other = 11 - start
    statuses = d.run([start, other] * 50)
    assert set(statuses) == {d.machine.status} and len(d.transitions) == 1
    assert d.machine.status is (M if start == 5 else H)


def test_a_flap_slower_than_the_poll_but_shorter_than_the_hold_does_not_flip() -> None:
    d = Driver()
    statuses = d.run([5] + ([6, 6, 5] * 30))  # 6 peers for 2 s at a time, hold is 3 s
    assert set(statuses) == {M} and len(d.transitions) == 1


def test_a_sustained_rise_moves_the_status_after_the_hold_and_not_before() -> None:
    d = Driver()
    d.feed(5)
    d.feed(6)  # the window opens here
    pending_since = d.machine.pending_since
    assert pending_since == d.now
    assert d.feed(6) is M and d.feed(6) is M  # 2 s held
    assert d.feed(6) is H  # 3 s held
    assert d.transitions[-1] == Transition(M, H, pending_since + HOLD)
    assert d.machine.status_since == pending_since + HOLD and d.machine.pending_since is None


def test_a_sustained_drop_that_keeps_some_peers_also_waits_for_the_hold() -> None:
    d = Driver()
    d.run([6, 3, 3, 3])
    assert d.machine.status is H
    assert d.feed(3) is U and d.transitions[-1].previous is H


def test_zero_peers_make_the_node_unhealthy_at_the_first_evaluation_that_sees_it() -> None:
    d = Driver()
    d.feed(8)
    assert d.feed(0) is U
    assert d.transitions[-1] == Transition(H, U, d.now)


def test_losing_the_archive_makes_the_node_unhealthy_at_once() -> None:
    d = Driver()
    d.feed(8)
    assert d.feed(8, archive_up=False) is U


def test_a_configured_loss_hold_delays_the_fast_path() -> None:
    d = Driver(loss_hold_s=1.0)
    d.feed(8)
    assert d.feed(0) is H
    assert d.feed(0) is U


def test_recovery_from_a_loss_waits_the_hold_so_a_flapping_archive_keeps_the_node_down() -> None:
    d = Driver()
    d.feed(8)
    flapping = [d.feed(8, archive_up=up) for up in [False, True] * 20 + [False]]
    assert set(flapping) == {U} and [t.status for t in d.transitions] == [H, U]
    statuses = [d.feed(8) for _ in range(4)]
    assert statuses == [U, U, U, H]


def test_the_move_goes_to_the_level_that_held_throughout_the_window() -> None:
    d = Driver()
    d.run([0, 6, 4, 6])
    assert d.machine.status is U
    assert d.feed(6) is M  # the window saw Healthy, MinimallyHealthy, Healthy, Healthy: at least M held
    # What the latest evaluation says opens the next window at once.
    assert d.machine.pending_since == d.now
    assert d.run([6, 6, 6]) == [M, M, H]


def test_a_change_of_direction_restarts_the_window() -> None:
    d = Driver()
    d.feed(5)  # M
    d.run([6, 6, 3])  # up twice, then down: the upward window is gone
    assert d.machine.status is M and d.machine.pending_since == d.now
    assert d.run([3, 3]) == [M, M]
    assert d.feed(3) is U


def test_an_evaluation_agreeing_with_the_status_clears_the_window() -> None:
    d = Driver()
    d.run([5, 6, 6])
    assert d.machine.pending_since is not None
    d.feed(5)
    assert d.machine.pending_since is None


def test_the_hold_is_measured_on_the_clock_not_in_evaluations() -> None:
    d = Driver()
    d.feed(5)
    d.feed(6)
    assert d.feed(6, step=2.9) is M
    assert d.feed(6, step=0.1) is H


def test_hold_zero_follows_every_evaluation() -> None:
    d = Driver(hold_s=0.0)
    assert d.run([5, 6, 5, 0, 4]) == [M, H, M, U, M]


def test_a_loss_must_be_evaluated_as_unhealthy() -> None:
    with pytest.raises(ValueError):
        HealthStateMachine(hold_s=1, loss_hold_s=0).observe(H, loss=True, now=T0)
    with pytest.raises(ValueError):
        HealthStateMachine(hold_s=1, loss_hold_s=2)
