"""A tiny benchmark harness: time a callable over a batch, repeat, keep the best and the median.

Why not pytest-benchmark: results must be plain JSON files that `make bench` writes and the README summarises,
and several benchmarks (the mesh, Cassandra) are whole-process scenarios rather than micro-benchmarks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Result:
    """One measured figure: ``value`` in ``unit`` (higher is better unless ``lower_is_better``)."""

    name: str
    value: float
    unit: str
    detail: dict[str, Any] = field(default_factory=dict)
    target: float | None = None
    lower_is_better: bool = False

    @property
    def meets_target(self) -> bool | None:
        """Whether the figure meets its target (None when there is none)."""
        if self.target is None:
            return None
        return self.value <= self.target if self.lower_is_better else self.value >= self.target

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form, including whether the target is met."""
        out = asdict(self)
        out["meets_target"] = self.meets_target
        return out


def rate(
    name: str,
    fn: Callable[[], object],
    *,
    ops_per_call: int,
    unit: str,
    repeats: int = 5,
    min_time_s: float = 0.2,
    target: float | None = None,
    cpu: bool = False,
) -> Result:
    """Measure ``fn``'s throughput in operations per second (best of ``repeats`` timed rounds).

    Each round calls ``fn`` until at least ``min_time_s`` has passed, so tiny operations are timed over
    many calls and clock resolution does not matter.

    ``cpu=True`` divides by this process's CPU time instead of wall time: operations per CPU-second, which
    other jobs on a shared machine barely move (wall-clock rates go into ``detail``). Only meaningful for
    work that runs on this process's threads.
    """
    fn()  # warm caches and lazy imports outside the timed rounds
    rates: list[float] = []
    wall_rates: list[float] = []
    for _ in range(repeats):
        calls = 0
        start = time.perf_counter()
        cpu_start = time.process_time()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time_s:
                break
        cpu_elapsed = max(time.process_time() - cpu_start, 1e-9)
        wall_rates.append(calls * ops_per_call / elapsed)
        rates.append(calls * ops_per_call / (cpu_elapsed if cpu else elapsed))
    detail: dict[str, Any] = {"median": round(statistics.median(rates), 1), "repeats": repeats}
    if cpu:
        detail.update(clock="process CPU time", wall_best=round(max(wall_rates), 1))
    return Result(name=name, value=round(max(rates), 1), unit=unit, detail=detail, target=target)


def percentile(samples: list[float], q: float) -> float:
    """The ``q``-th percentile (0–100) of ``samples`` by nearest rank."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class BenchConfig:
    """Run-wide settings the runner sets before calling the suites (``python -m bench.run --quick``)."""

    quick: bool = False
    """Reduced sizes: check that every suite runs end to end (figures are not comparable to full runs)."""


_CONFIG = BenchConfig()


def configure(*, quick: bool) -> None:
    """Set the run-wide settings (called by ``bench.run``)."""
    _CONFIG.quick = quick


def config() -> BenchConfig:
    """The run-wide settings."""
    return _CONFIG
