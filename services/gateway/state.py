"""What every route shares: the config, the upstream services, the SSE hub, metrics, and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.requests import Request

from services.gateway.clients import Upstream
from services.gateway.config import Config
from services.gateway.errors import ClientLeft
from services.gateway.fanout import EventHub
from services.gateway.metrics import GatewayMetrics

__all__ = ["GatewayState"]

T = TypeVar("T")


@dataclass
class GatewayState:
    """The gateway's shared parts (``app.state.gateway``)."""

    cfg: Config
    upstream: Upstream
    hub: EventHub
    metrics: GatewayMetrics
    stopping: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the gateway shuts down: long polls answer at once and SSE streams end."""

    def wait_s(self, asked: float | None) -> float:
        """A long poll's wait: what the client asked, at most GATEWAY_MAX_WAIT_SECONDS; 0 while stopping."""
        if asked is None or self.stopping.is_set():
            return 0.0
        return min(asked, self.cfg.max_wait_s)

    async def unless_stopping(self, work: Awaitable[T], request: Request | None = None) -> T | None:
        """``work``'s result, or None when the gateway starts shutting down first (``work`` is cancelled).

        With ``request``, a long poll's: when its client disconnects first, ``work`` is cancelled (its
        upstream call with it) and :class:`~.errors.ClientLeft` raised. uvicorn does not cancel a request's
        task when its client leaves; without this an abandoned long poll would hold its upstream call for the
        whole wait.
        """
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stopping.wait())
        watched = {task, stop}
        gone = asyncio.ensure_future(_disconnected(request)) if request is not None else None
        if gone is not None:
            watched.add(gone)
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # our caller was cancelled: take the work down with us
            task.cancel()
            raise
        finally:
            stop.cancel()
            if gone is not None:
                gone.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if gone is not None and gone.done() and not gone.cancelled():
            raise ClientLeft()
        return None

    async def shutdown(self) -> None:
        """Answer long polls, end SSE streams (each with a final comment), stop the feeds."""
        self.stopping.set()
        await self.hub.close()


async def _disconnected(request: Request) -> None:
    """Return when the client of ``request`` (a GET: nothing else reads its body) has disconnected."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
