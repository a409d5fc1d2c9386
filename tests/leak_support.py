"""Helpers for tests that prove objects are freed without the cycle collector (memory-leak regressions)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cycle_collector_off() -> Iterator[None]:
    """Only reference counting frees objects meanwhile: whatever a reference cycle holds stays alive."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
