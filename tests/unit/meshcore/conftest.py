"""Fixtures for the meshcore tests: a private metrics registry, in-memory tracing, a running raw service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from prometheus_client import CollectorRegistry

from meshcore.clients import make_channel
from meshcore.server import build_server
from tests.unit.meshcore.support import SERVICE, AwaitableSpanExporter, RawService, Running, runtime_for_tests


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, AwaitableSpanExporter]]:
    exporter = AwaitableSpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
async def running(
    registry: CollectorRegistry, spans: tuple[TracerProvider, AwaitableSpanExporter]
) -> AsyncIterator[Running]:
    provider, exporter = spans
    service = RawService()
    mesh = build_server(
        runtime_for_tests(), [service.registration()], tracer_provider=provider, registry=registry
    )
    await mesh.start()
    channel = make_channel(
        f"127.0.0.1:{mesh.port}",
        service_name=SERVICE,
        timeout_s=10,
        tracer_provider=provider,
        registry=registry,
    )
    try:
        yield Running(service, mesh, channel, registry, provider, exporter)
    finally:
        await channel.close()
        service.release.set()
        await mesh.stop(grace=0)
