"""The collector policy of a serving process (meshcore.heap): start-up's heap frozen."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

import meshcore.server
from meshcore.heap import settle_heap
from meshcore.server import MeshServer, build_server
from tests.unit.meshcore.support import RawService, runtime_for_tests, unary


@pytest.fixture
def collector() -> Iterator[None]:
    """This test process's collector as it was, restored afterwards (pytest's heap is not a service's)."""
    yield
    gc.unfreeze()


class _Cycle:
    """An object in a reference cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_settle_freezes_what_is_alive_and_leaves_the_thresholds(collector: None) -> None:
    threshold = gc.get_threshold()
    kept = [_Cycle() for _ in range(100)]
    settle_heap()
    assert gc.get_freeze_count() >= len(kept)
    assert gc.get_threshold() == threshold


def test_garbage_made_before_settling_is_collected_not_frozen(collector: None) -> None:
    gc.disable()  # no collection between making the garbage and settling but settle_heap's own
    try:
        garbage = [weakref.ref(_Cycle()) for _ in range(1000)]
        assert all(ref() is not None for ref in garbage)  # unreachable, but only a collection frees them
        settle_heap()
    finally:
        gc.enable()
    # A frozen cycle would never be freed (no collection walks the permanent generation).
    assert all(ref() is None for ref in garbage)


def test_garbage_made_after_settling_is_still_collected(collector: None) -> None:
    settle_heap()
    frozen = gc.get_freeze_count()
    garbage = [weakref.ref(_Cycle()) for _ in range(1000)]
    gc.collect()
    assert all(ref() is None for ref in garbage)
    assert gc.get_freeze_count() == frozen


async def _serve_once(mesh: MeshServer, *, settle: bool) -> None:
    """serve_forever until it has started (or found the server started), then shut it down."""
    serving = asyncio.ensure_future(mesh.serve_forever(settle=settle))
    async with grpc.aio.insecure_channel(f"127.0.0.1:{mesh.port}") as channel:
        # wait_for_ready: the call waits for serve_forever to have started the server.
        assert await unary(channel, "Echo")(b"up", timeout=10, wait_for_ready=True) == b"up"
    mesh.request_shutdown()
    await asyncio.wait_for(serving, timeout=10)


@pytest.mark.parametrize("started_first", [False, True])
async def test_serve_forever_settles_once_before_health_reports_serving(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch, started_first: bool
) -> None:
    mesh = build_server(runtime_for_tests(), [RawService().registration()], registry=registry)
    published: list[bool] = []  # whether health had reported SERVING when the heap was settled
    monkeypatch.setattr(meshcore.server, "settle_heap", lambda: published.append(mesh._health_published))
    if started_first:  # a caller that started the server itself: settled at once, while serving
        await mesh.start()
    await _serve_once(mesh, settle=True)
    assert published == [started_first]


async def test_serve_forever_without_settle_leaves_the_heap_alone(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    mesh = build_server(runtime_for_tests(), [RawService().registration()], registry=registry)
    calls: list[None] = []
    monkeypatch.setattr(meshcore.server, "settle_heap", lambda: calls.append(None))
    await _serve_once(mesh, settle=False)
    assert calls == []
