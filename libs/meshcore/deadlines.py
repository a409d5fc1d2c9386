"""Deadline propagation across hops without passing the gRPC context around.

gRPC Python does not carry a server call's deadline into the calls it makes. The server
interceptor therefore records the incoming deadline in a context variable when a handler
starts (each RPC runs in its own asyncio task, so the value belongs to that call alone), and a
service's ``clients.py`` asks :func:`remaining_timeout` for the ``timeout=`` of each downstream
call. Domain code in between stays free of gRPC.
"""

from __future__ import annotations

import contextvars
import time

from meshcore.errors import DeadlineExceeded

__all__ = ["bind_deadline", "current_deadline", "remaining_timeout"]

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("meshcore_deadline", default=None)


def bind_deadline(time_remaining: float | None) -> None:
    """Record that the current call must finish within ``time_remaining`` seconds (None = no deadline).

    Called by the server interceptor with ``context.time_remaining()``; it sets the variable
    for the rest of the current task, which gRPC creates per RPC.
    """
    _deadline.set(None if time_remaining is None else time.monotonic() + time_remaining)


def current_deadline() -> float | None:
    """Return the current call's deadline on the :func:`time.monotonic` clock, or None."""
    return _deadline.get()


def remaining_timeout(cap_s: float, *, reserve_s: float = 0.0) -> float:
    """Return the ``timeout=`` for a downstream call: ``cap_s``, or less if our caller's deadline is sooner.

    ``reserve_s`` is kept back for our own work after the downstream call returns (e.g. to
    encode the response). Raises :class:`~meshcore.errors.DeadlineExceeded` when no time is left,
    so a doomed call is not even started.
    """
    deadline = _deadline.get()
    if deadline is None:
        return cap_s
    left = deadline - time.monotonic() - reserve_s
    if left <= 0:
        raise DeadlineExceeded("deadline exceeded before the downstream call", {"cap_s": cap_s})
    return min(cap_s, left)
