"""What every route shares: the config, the upstream services, the SSE hub, metrics, and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from services.gateway.clients import Upstream
from services.gateway.config import Config
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

    async def unless_stopping(self, work: Awaitable[T]) -> T | None:
        """``work``'s result, or None when the gateway starts shutting down first (``work`` is cancelled)."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stopping.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # our caller was cancelled (the client left): take the work down with us
            task.cancel()
            raise
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None

    async def shutdown(self) -> None:
        """Answer long polls, end SSE streams (each with a final comment), stop the feeds."""
        self.stopping.set()
        await self.hub.close()
