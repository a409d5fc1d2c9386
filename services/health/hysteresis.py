"""Hysteresis: when the reported health status follows the evaluated level (pure, injected clock).

Users of other Waku implementations complain that health flip-flops: logos-delivery re-evaluates its
connection status on every peer event with only a 100 ms cooldown (``node_health_monitor.nim``), so one peer
connecting and dropping around a threshold flips the state, and every flip pauses or resumes a sender's
retries (MESSAGING-API "Retry": retries stop while unhealthy and resume on minimally healthy or healthy). The
rule here:

* **A change must hold.** The status moves only when every evaluation for ``hold_s`` seconds disagreed with it
  in the same direction. It then moves to the level closest to the current status among those seen in that
  window, because that is the condition that held throughout (an upgrade seen as Healthy, MinimallyHealthy,
  Healthy lands on MinimallyHealthy). One evaluation that agrees with the status, or disagrees the other way,
  restarts the window: a count flapping 5 ↔ 6 never holds for ``hold_s`` and the status stays put.
* **Losses are fast.** No peer on any edge peer, or no archive SERVING, leaves nothing to send through or
  to confirm against; sending on would only burn the request's retries. Such a loss moves the status to
  Unhealthy once it has held for ``loss_hold_s`` (0 by default: the first evaluation that sees it). Recovery
  from it is an upgrade and waits ``hold_s``, so a dependency that keeps flapping keeps the node Unhealthy
  rather than flipping it.
* **The first evaluation** sets the status directly: there is no earlier state to protect.

Dwell times are measured between evaluations on the injected clock, so a stalled poller cannot make a change
look sustained sooner, and tests drive the machine without sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.health.logic import HealthStatus

__all__ = ["HealthStateMachine", "Transition"]


@dataclass(frozen=True)
class Transition:
    """The status changed from ``previous`` (None on the first evaluation) to ``status`` at ``at``."""

    previous: HealthStatus | None
    status: HealthStatus
    at: float


@dataclass
class _Window:
    upward: bool
    since: float
    bound: HealthStatus
    """The level closest to the status seen since ``since``: where the status goes when the window holds."""


class HealthStateMachine:
    """Feeds evaluated levels in, tells when the reported status changes."""

    def __init__(self, *, hold_s: float, loss_hold_s: float) -> None:
        if not 0 <= loss_hold_s <= hold_s:
            raise ValueError("need 0 <= loss_hold_s <= hold_s")
        self._hold_s = hold_s
        self._loss_hold_s = loss_hold_s
        self._status: HealthStatus | None = None
        self._since = 0.0
        self._window: _Window | None = None
        self._loss_since: float | None = None

    @property
    def status(self) -> HealthStatus | None:
        """The reported status; None before the first evaluation."""
        return self._status

    @property
    def status_since(self) -> float:
        """When the status last changed (0 before the first evaluation)."""
        return self._since

    @property
    def pending_since(self) -> float | None:
        """Since when evaluations have disagreed with the status in one direction; None when they agree."""
        return None if self._window is None else self._window.since

    def observe(self, level: HealthStatus, *, loss: bool, now: float) -> Transition | None:
        """Take one evaluation at ``now``; returns the transition it causes, if any.

        ``loss`` says ``level`` is Unhealthy because no peer or no archive is left (the fast path).
        """
        if loss and level is not HealthStatus.UNHEALTHY:
            raise ValueError("a loss is always evaluated as Unhealthy")
        self._loss_since = (self._loss_since if self._loss_since is not None else now) if loss else None
        if self._status is None:
            return self._move(None, level, now)
        if level == self._status:
            self._window = None
            return None
        upward = level > self._status
        window = self._window
        if window is None or window.upward != upward:
            window = self._window = _Window(upward, now, level)
        else:
            window.bound = min(window.bound, level) if upward else max(window.bound, level)
        if self._loss_since is not None and now - self._loss_since >= self._loss_hold_s:
            return self._move(self._status, HealthStatus.UNHEALTHY, now)
        if now - window.since < self._hold_s:
            return None
        moved = self._move(self._status, window.bound, now)
        if level != moved.status:
            # The window's bound lagged the latest level: what this evaluation says starts the next window.
            self._window = _Window(level > moved.status, now, level)
        return moved

    def _move(self, previous: HealthStatus | None, status: HealthStatus, now: float) -> Transition:
        self._status = status
        self._since = now
        self._window = None
        return Transition(previous, status, now)
