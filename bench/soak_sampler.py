"""Once a second during the soak: RSS, open descriptors and CPU of every process, a few service counters,
the machine's load; and the least-squares slopes that say whether memory and descriptors stay flat.

RSS is ``VmRSS`` from ``/proc/<pid>/status``, descriptors are the entries of ``/proc/<pid>/fd``, CPU is
user + system time from ``/proc/<pid>/stat`` (:func:`bench.support.proc_cpu_s`). Counters come from the
services' Prometheus endpoints (scraped on a worker thread so a slow scrape never delays the next tick):
ingest's ``mailserver_envelopes_total`` (envelopes newly archived) and the edge peer's received envelopes,
envelopes sent in 0x7f batches, devp2p connections and ingest buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.support import machine_busy_s, proc_cpu_s, rss_kib
from meshharness import scrape_metrics

__all__ = ["Sampler", "Scrape", "fd_count", "slope_per_min", "steady_slopes"]

#: What to read from a service's /metrics: {series name: sample name (summed over its labels)}.
Scrape = Mapping[str, str]


def fd_count(pid: int) -> int:
    """Open file descriptors of ``pid`` (0 once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def _pressure(resource: str) -> float:
    """Linux PSI "some avg10" of ``resource`` (-1 where the kernel does not expose it)."""
    try:
        first = Path(f"/proc/pressure/{resource}").read_text().split("\n", 1)[0]
    except OSError:
        return -1.0
    return float(first.split("avg10=", 1)[1].split()[0])


def slope_per_min(t: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` over ``t`` (seconds), per minute; 0 with fewer than two points."""
    n = len(t)
    if n < 2:
        return 0.0
    mt, my = sum(t) / n, sum(y) / n
    var = sum((a - mt) ** 2 for a in t)
    if var == 0:
        return 0.0
    cov = sum((a - mt) * (b - my) for a, b in zip(t, y, strict=True))
    return cov / var * 60.0


@dataclass
class Sampler:
    """Samples ``pids`` and ``scrapes`` ({service: (metrics port, what)}) every second until stopped."""

    pids: Mapping[str, int]
    scrapes: Mapping[str, tuple[int, Scrape]]
    t: list[float] = field(default_factory=list)
    rss_mib: dict[str, list[float]] = field(default_factory=dict)
    fds: dict[str, list[int]] = field(default_factory=dict)
    cpu_s: dict[str, list[float]] = field(default_factory=dict)
    counters: dict[str, list[float | None]] = field(default_factory=dict)
    load1: list[float] = field(default_factory=list)
    cpu_pressure: list[float] = field(default_factory=list)
    """``/proc/pressure/cpu`` "some avg10": % of the last 10 s in which runnable tasks waited for a CPU."""
    io_pressure: list[float] = field(default_factory=list)
    """``/proc/pressure/io`` "some avg10": % of the last 10 s in which tasks waited for I/O."""
    machine_cpu: list[float] = field(default_factory=list)
    """The whole machine's busy CPU seconds (all cores), from ``/proc/stat``."""

    async def run(self, stop: asyncio.Event, began: float, until: float) -> None:
        """One sample per second (ticks at ``began + k``) up to ``until`` (monotonic) or until ``stop``."""
        tick = 0
        while not stop.is_set() and began + tick <= until:
            await self._sample(time.monotonic() - began)
            tick += 1
            delay = began + tick - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)  # the sampling period, not synchronisation

    async def _sample(self, at: float) -> None:
        scraped = await asyncio.gather(
            *(self._scrape(port, what) for port, what in self.scrapes.values()), return_exceptions=True
        )
        self.t.append(round(at, 2))
        for name, pid in self.pids.items():
            self.rss_mib.setdefault(name, []).append(round(rss_kib(pid) / 1024, 2))
            self.fds.setdefault(name, []).append(fd_count(pid))
            cpu = 0.0
            with contextlib.suppress(OSError, IndexError, ValueError):
                cpu = proc_cpu_s(pid)
            self.cpu_s.setdefault(name, []).append(round(cpu, 2))
        for (service, (_, what)), values in zip(self.scrapes.items(), scraped, strict=True):
            for key in what:
                value = values.get(key) if isinstance(values, dict) else None
                self.counters.setdefault(f"{service}.{key}", []).append(value)
        self.load1.append(os.getloadavg()[0])
        self.cpu_pressure.append(_pressure("cpu"))
        self.io_pressure.append(_pressure("io"))
        self.machine_cpu.append(round(machine_busy_s()[0], 2))

    async def _scrape(self, port: int, what: Scrape) -> dict[str, float]:
        samples = await asyncio.wait_for(asyncio.to_thread(scrape_metrics, port), 5.0)
        out: dict[str, float] = {}
        for key, sample in what.items():
            out[key] = sum(v for (name, _), v in samples.items() if name == sample)
        return out

    def to_json(self) -> dict[str, Any]:
        """Every series, as sampled."""
        return {
            "t_s": self.t,
            "rss_mib": self.rss_mib,
            "fds": self.fds,
            "cpu_s": self.cpu_s,
            "counters": self.counters,
            "load1": self.load1,
            "cpu_pressure_some_avg10": self.cpu_pressure,
            "io_pressure_some_avg10": self.io_pressure,
            "machine_busy_cpu_s": self.machine_cpu,
        }


def steady_slopes(sampler: Sampler, fraction: float) -> dict[str, dict[str, float]]:
    """Per process: RSS and descriptors at start, max and end, and their slopes over the last ``fraction``
    of the samples."""
    out: dict[str, dict[str, float]] = {}
    first = int(len(sampler.t) * (1 - fraction))
    for name in sampler.pids:
        rss, fds = sampler.rss_mib[name], sampler.fds[name]
        steady = [i for i in range(first, len(sampler.t)) if rss[i] > 0]  # 0: the process had exited
        ts = [sampler.t[i] for i in steady]
        out[name] = {
            "rss_mib_start": rss[0],
            "rss_mib_max": max(rss),
            "rss_mib_end": rss[-1],
            "rss_mib_per_min": round(slope_per_min(ts, [rss[i] for i in steady]), 3),
            "fds_start": fds[0],
            "fds_max": max(fds),
            "fds_end": fds[-1],
            "fds_per_min": round(slope_per_min(ts, [float(fds[i]) for i in steady]), 3),
            "cpu_s": round(sampler.cpu_s[name][-1] - sampler.cpu_s[name][0], 1),
        }
    return out
