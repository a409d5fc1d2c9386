"""Fixtures of the gateway's integration tests: the fakes, and gateways over them (stopped after each)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from tests.integration.gateway.gateway_fakes import Fakes, start_fakes
from tests.integration.gateway.gateway_support import GatewayHandle, start_gateway

StartGateway = Callable[..., Awaitable[GatewayHandle]]


@pytest.fixture
async def fakes() -> AsyncIterator[Fakes]:
    running = await start_fakes()
    try:
        yield running
    finally:
        await running.server.stop(None)


@pytest.fixture
async def make_gateway(fakes: Fakes) -> AsyncIterator[StartGateway]:
    started: list[GatewayHandle] = []

    async def make(**env: str) -> GatewayHandle:
        handle = await start_gateway(fakes, **env)
        started.append(handle)
        return handle

    try:
        yield make
    finally:
        for handle in started:
            await handle.stop()


@pytest.fixture
async def gw(make_gateway: StartGateway) -> GatewayHandle:
    return await make_gateway()
