"""One metric set per registry and per class (PerRegistry); server series created up front."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from meshcore.metrics import ClientMetrics, PerRegistry, ServerMetrics
from meshcore.server import build_server
from tests.unit.meshcore.support import runtime_for_tests


class _Widgets(PerRegistry):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.made = Counter("test_widgets_total", "Widgets.", registry=registry)


class _Gadgets(PerRegistry):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.made = Counter("test_gadgets_total", "Gadgets.", registry=registry)


def test_one_instance_per_registry_and_class() -> None:
    first, second = CollectorRegistry(), CollectorRegistry()
    widgets = _Widgets.for_registry(first)
    assert _Widgets.for_registry(first) is widgets  # a second registration would raise: shared instead
    assert _Widgets.for_registry(second) is not widgets
    assert isinstance(_Gadgets.for_registry(first), _Gadgets)  # its own instances, not the widgets'
    assert ServerMetrics.for_registry(first) is not ClientMetrics.for_registry(first)  # type: ignore[comparison-overlap]


HEALTH = "grpc.health.v1.Health"


def test_initialize_creates_every_method_series_at_zero_with_every_code() -> None:
    """go-grpc-prometheus ``InitializeMetrics``: series exist before the first call, so rate() sees it."""
    registry = CollectorRegistry()
    ServerMetrics.for_registry(registry).initialize([HEALTH, "no.such.v1.Service"])

    def value(name: str, method: str, rpc_type: str, **extra: str) -> float | None:
        labels = {"grpc_type": rpc_type, "grpc_service": HEALTH, "grpc_method": method, **extra}
        return registry.get_sample_value(name, labels)

    for code in ("OK", "Canceled", "Internal", "Unavailable", "Unauthenticated"):
        assert value("grpc_server_handled_total", "Check", "unary", grpc_code=code) == 0
    assert value("grpc_server_started_total", "Watch", "server_stream") == 0  # streams by their shape
    assert value("grpc_server_msg_sent_total", "Watch", "server_stream") == 0
    assert value("grpc_server_handling_seconds_count", "Check", "unary") == 0
    handled = [
        s
        for m in registry.collect()
        if m.name == "grpc_server_handled"
        for s in m.samples
        if s.name == "grpc_server_handled_total"
    ]
    methods = {s.labels["grpc_method"] for s in handled}
    assert methods == {"Check", "List", "Watch"}
    assert len(handled) == 17 * len(methods)  # every code Go knows, nothing for the unknown service


async def test_build_server_initializes_the_registered_services_health_and_reflection() -> None:
    registry = CollectorRegistry()
    mesh = build_server(runtime_for_tests(), [], registry=registry)
    try:
        services = {
            s.labels["grpc_service"]
            for m in registry.collect()
            if m.name == "grpc_server_started"
            for s in m.samples
        }
        assert services == {HEALTH, "grpc.reflection.v1alpha.ServerReflection"}
    finally:
        await mesh.stop(grace=0)
