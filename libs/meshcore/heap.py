"""The cyclic garbage collector's policy for a serving process: the start-up heap frozen.

CPython's cyclic collector pauses the whole process. A full (generation 2) collection walks every tracked
container: in a service that is mostly what start-up made and never frees — modules, classes, functions,
protobuf descriptors, grpc and OpenTelemetry objects, ~53,000 in the send service. Under load such a
collection ran every ~2 s and took 14–40 ms of CPU, holding every in-flight call that long: the send
service's open-loop p99 (docs/benchmarks.md "The send service (issue 11)"). The collector starts one when
the objects promoted to generation 2 since the last outgrow a quarter of those it held after it
(CPython ``Modules/gcmodule.c``, ``long_lived_pending``), and short-lived request objects caught in a
younger collection while in flight are promoted steadily.

:func:`settle_heap` runs once per serving process, after its start hooks and before health reports SERVING
(:meth:`meshcore.server.MeshServer.serve_forever`), so its own full collection (~20 ms) delays no call.
``gc.freeze()`` moves every object alive then into the permanent generation, which no collection walks
(Python docs, ``gc.freeze``; the start-up heap is never garbage). Collected first, so start-up's own cycles
are freed rather than frozen. A full collection then walks only what was made since.

The young generation's threshold stays CPython's (700). A rarer young collection (10,000 was tried) saved a
few microseconds per Send, but anything that waits for the collector to free an abandoned object waits
longer. It showed one such thing: the edge peer's client span of a history ``Query`` stream ended only when
the abandoned call was collected, past the e2e observability test's 120 s in a quiet edge peer (since fixed:
the client reads each stream to its end, ``services/edge_peer/clients.py``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_off", "settle_heap"]


def settle_heap() -> None:
    """Collect, then freeze what is alive (see the module docstring).

    Once per process, after start-up: a frozen object that later becomes part of a garbage cycle is never
    collected, which is right for what start-up made and lives as long as the process.
    """
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def collector_off(*, collect_after: bool = False) -> Iterator[None]:
    """No cyclic collection while the block runs (reference counting still frees what it can); the
    collector's previous state after it, and one collection when ``collect_after``."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        if collect_after:
            gc.collect()
