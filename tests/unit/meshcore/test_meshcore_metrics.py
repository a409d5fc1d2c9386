"""One metric set per registry and per class (PerRegistry)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from meshcore.metrics import ClientMetrics, PerRegistry, ServerMetrics


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
