"""Helpers for tests that prove objects are freed without the cycle collector (memory-leak regressions)."""

from __future__ import annotations

from meshcore.heap import collector_off

#: ``with cycle_collector_off():`` only reference counting frees objects meanwhile, so whatever a reference
#: cycle holds stays alive (meshcore.heap.collector_off).
cycle_collector_off = collector_off

__all__ = ["cycle_collector_off"]
