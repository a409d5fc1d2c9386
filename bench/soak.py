"""The soak (issue 14 item 5): ``make soak`` — the whole ingest path under sustained load, history readers
and hostile peers at once, for 10 minutes; zero acknowledged loss, flat memory and descriptors.

``python -m bench.soak [--smoke] [--archive sqlite|cassandra] [--duration S] [--rate N] [--out F] [--plot F]``

Processes (each sampled every second, docs/soak.md): ``services.archive`` (SQLite in a fresh file, or the
local Cassandra node in keyspace ``mailmesh_soak``), ``services.ingest``, ``services.history`` and
``services.edge_peer`` (confirmations on), as deployed on loopback; then three role processes
(``bench/soak_role.py``): the publishers (``bench/soak_publish.py``), the history clients
(``bench/soak_history.py``) and the hostile peers (``bench/soak_hostile.py``); this coordinator samples,
verifies (``bench/soak_verify.py``) and reports (``bench/soak_report.py``: ``bench/results/soak.json``, the
plot in ``docs/soak.svg``). Exit status 1 when any criterion failed (the report lists which).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import IO, Any

from bench.soak_history import PASSWORD
from bench.soak_report import build_report, write_outputs
from bench.soak_sampler import Sampler, Scrape
from bench.soak_settings import FULL, SMOKE, SoakSettings
from bench.soak_verify import Ledger, drain, exact_walks
from bench.support import (
    LOGS,
    ROOT,
    EdgeService,
    Service,
    archive_env,
    cassandra_pid,
    start_edge,
    start_service,
)
from meshharness import ENV_PREFIXES, Allow, clean_env, is_noise

__all__ = ["SOAK_KEYSPACE", "main", "run_soak"]

#: The Cassandra keyspace of a Cassandra-backed soak: dropped before and after (never the team's).
SOAK_KEYSPACE = "mailmesh_soak"
#: Hang bounds for the role processes (seconds): connecting every peer, and finishing once the load is over.
READY_BOUND_S = 300.0
FINISH_BOUND_S = 400.0
INGEST_SCRAPE: Scrape = {"archived": "mailserver_envelopes_total"}
EDGE_SCRAPE: Scrape = {
    "received": "waku_envelopes_received_total",
    "history_sent": "mailserver_envelopes_total",
    "connections": "devp2p_connections",
    "ingest_buffered": "edge_ingest_buffered_envelopes",
}
#: ERROR lines that are not ours to fix, counted apart (docs/soak.md "Criteria"). grpc's asyncio server logs
#: this one itself when it cannot send the final status of a streaming call whose client has already gone
#: (cancelled, deadline): grpc/grpc#32551 turned the raise into this log. The edge peer cancels its history
#: Query when the requesting peer leaves (a hostile peer's flood, a dropped slowloris reader).
BENIGN_ERRORS = (
    Allow(r"^ExecuteBatchError raised in core by servicer method", logger="grpc._cython.cygrpc"),
)
#: Edge counters reported at the end (the defences at work, and what could lose envelopes).
EDGE_COUNTERS = (
    "edge_ingest_dropped_envelopes_total",
    "waku_sink_failures_total",
    "devp2p_rejected_connections_total",
    "devp2p_disconnects_sent_total",
    "devp2p_errors_total",
    "waku_peer_disconnects_total",
    "waku_envelopes_rejected_total",
    "waku_envelopes_cache_failures_total",
    "waku_ignored_packets_total",
    "waku_confirmations_sent_total",
    "edge_history_requests_total",
    "mailserver_delivery_failures_total",
    "devp2p_sessions_total",
)


@dataclass
class _Role:
    """One role process and its pipes."""

    name: str
    proc: asyncio.subprocess.Process
    out: Path
    log: Path

    @classmethod
    async def start(cls, name: str, settings: Path, enode: str, work: Path) -> _Role:
        log = LOGS / f"soak-{name}.log"
        out = work / f"{name}.json"
        out.unlink(missing_ok=True)
        with log.open("wb") as sink:  # the child keeps its own descriptor
            proc = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "bench.soak_role", name, "--settings", str(settings)),
                *("--enode", enode, "--out", str(out), "--ledger", str(work / "ledger.bin")),
                cwd=ROOT,
                env=clean_env(ENV_PREFIXES),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=sink,
            )
        return cls(name, proc, out, log)

    def _failed(self, what: str) -> RuntimeError:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return RuntimeError(f"soak role {self.name} {what}:\n{tail}")

    async def _line(self, timeout: float) -> bytes:
        assert self.proc.stdout is not None
        return (await asyncio.wait_for(self.proc.stdout.readline(), timeout)).strip()

    async def ready(self) -> None:
        if await self._line(READY_BOUND_S) != b"ready":
            raise self._failed("did not get ready")

    def go(self, seconds: float) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {seconds}\n".encode())

    async def finish(self, load_s: float) -> dict[str, Any]:
        line = await self._line(load_s + FINISH_BOUND_S)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        if line != b"done" or code != 0:
            raise self._failed(f"failed (exit {code})")
        result: dict[str, Any] = json.loads(self.out.read_text())
        return result

    async def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def _drop_keyspace() -> None:
    from tools.cassandra import ctl

    with ctl.session(ctl.NodeConfig.from_env()) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {SOAK_KEYSPACE}", timeout=120)


async def _start_services(settings: SoakSettings, work: Path) -> tuple[list[Service], EdgeService]:
    """archive → ingest, history → edge peer, in that order; JSON logs so their levels can be counted."""
    common = {"MAILMESH_LOG_FORMAT": "json"}
    env = archive_env(settings.archive, sqlite_path=work / "archive.sqlite3")
    if settings.archive == "cassandra":
        env["ARCHIVE_CASSANDRA_KEYSPACE"] = SOAK_KEYSPACE
    archive = await start_service("archive", {**env, **common}, name="soak-archive", metrics=True)
    started = [archive]
    try:
        ingest_env = {"INGEST_ARCHIVE_ADDR": archive.address, **common}
        started.append(await start_service("ingest", ingest_env, name="soak-ingest", metrics=True))
        history_env = {"HISTORY_ARCHIVE_ADDR": archive.address, "HISTORY_CURSOR_SECRETS": "5a" * 32, **common}
        started.append(await start_service("history", history_env, name="soak-history"))
        edge = await start_edge(
            started[1],
            started[2],
            {**common, "EDGE_CONFIRMATIONS": "true", "EDGE_MAILSERVER_PASSWORDS": PASSWORD},
            name="soak-edge",
        )
    except BaseException:
        for service in reversed(started):
            await service.stop()
        raise
    return started, edge


def _edge_counters(edge: EdgeService) -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for (name, labels), value in sorted(edge.metrics().items()):
            if name in EDGE_COUNTERS and value:
                key = name + ("{" + ",".join(f"{k}={v}" for k, v in labels) + "}" if labels else "")
                out[key] = value
    return out


async def _load(
    settings: SoakSettings, services: list[Service], edge: EdgeService, work: Path
) -> tuple[Sampler, dict[str, dict[str, Any]], float]:
    """Start the roles, run the load while sampling; returns the samples, the roles' summaries, its length."""
    settings_file = work / "settings.json"
    settings.write(settings_file)
    roles: list[_Role] = []
    try:
        for name in ("publish", "history", "hostile"):  # good clients connect before the hostile peers
            roles.append(await _Role.start(name, settings_file, edge.enode, work))
            await roles[-1].ready()
        pids = {s.name.removeprefix("soak-"): s.pid for s in services} | {"edge-peer": edge.pid}
        pids |= {f"role {r.name}": r.proc.pid for r in roles} | {"coordinator": os.getpid()}
        if settings.archive == "cassandra" and (jvm := cassandra_pid()) is not None:
            pids["cassandra"] = jvm
        sampler = Sampler(
            pids,
            {
                "ingest": (services[1].process.spec.metrics_port, INGEST_SCRAPE),
                "edge": (edge.metrics_port, EDGE_SCRAPE),
            },
        )
        stop = asyncio.Event()
        began = time.monotonic()
        # The last sample is taken a second before the load ends: the roles exit at its end.
        sampling = asyncio.create_task(sampler.run(stop, began, began + settings.duration_s - 1))
        for role in roles:
            role.go(settings.duration_s)
        try:
            summaries = {role.name: await role.finish(settings.duration_s) for role in roles}
        finally:
            load_s = time.monotonic() - began
            stop.set()
            await sampling
    finally:
        for role in roles:
            await role.kill()
    return sampler, summaries, load_s


async def _settled(edge: EdgeService) -> bool:
    """The edge peer holds nothing for ingest: every envelope it took has been made durable by ingest."""
    samples = await asyncio.to_thread(edge.metrics)
    return sum(v for (name, _), v in samples.items() if name == "edge_ingest_buffered_envelopes") == 0


def _log_levels(services: list[Service], edge: EdgeService) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for service in [*services, edge.service]:
        lines = service.process.logs.lines
        noisy = [
            line
            for line in lines
            if line.level in ("ERROR", "CRITICAL") or (is_noise(line) and not line.level)
        ]
        allowed = [line for line in noisy if any(a.matches(line) for a in BENIGN_ERRORS)]
        errors = [line.msg for line in noisy if line not in allowed]
        warnings = [line.msg for line in lines if line.level == "WARNING"]
        out[service.name] = {
            "errors": len(errors),
            "benign_errors": len(allowed),
            "warnings": len(warnings),
            "first_errors": [e[:200] for e in errors[:5]],
            "warning_kinds": sorted({w[:80] for w in warnings})[:10],
        }
    return out


async def run_soak(
    settings: SoakSettings, *, work: Path, out: Path | None, plot: Path | None
) -> dict[str, Any]:
    """Run one soak (services, load, verification) and return its report; write ``out`` and ``plot``."""
    settings = replace(settings, run_id=settings.run_id or random.randrange(1, 1 << 31))
    work.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    for stale in work.glob("archive.sqlite3*"):
        stale.unlink()
    if settings.archive == "cassandra":
        await asyncio.to_thread(_drop_keyspace)
    services, edge = await _start_services(settings, work)
    exits: dict[str, int] = {}
    try:
        sampler, roles, load_s = await _load(settings, services, edge, work)
        ledger = Ledger.read(work / "ledger.bin")
        archive = await drain(services[0].address, ledger, settings.drain_timeout_s, partial(_settled, edge))
        walks = await exact_walks(settings, edge.enode, ledger, settings.final_walks)
        counters = _edge_counters(edge)
        alive = {s.name: s.returncode is None for s in [*services, edge.service]}
    finally:
        exits[edge.service.name] = await edge.stop()
        for service in reversed(services):
            exits[service.name] = await service.stop()
        if settings.archive == "cassandra":
            await asyncio.to_thread(_drop_keyspace)
        for stale in work.glob("archive.sqlite3*"):
            stale.unlink()
    report = build_report(
        settings,
        sampler=sampler,
        roles=roles,
        load_s=load_s,
        archive=archive,
        walks=walks,
        edge_counters=counters,
        services={"alive_after_load": alive, "exit_codes": exits, "logs": _log_levels(services, edge)},
    )
    write_outputs(report, out, plot)
    return report


def main(argv: list[str] | None = None) -> int:
    """``make soak``: run, print the verdict, exit 1 on any failure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="the make-test sizes (about 15 s of load)")
    parser.add_argument("--archive", choices=("sqlite", "cassandra"), default=None)
    parser.add_argument("--duration", type=float, default=None, help="seconds of load (600)")
    parser.add_argument("--rate", type=float, default=None, help="target envelopes/s (1000)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/soak.json"))
    parser.add_argument("--plot", type=Path, default=Path("docs/soak.svg"))
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "soak")
    ns = parser.parse_args(argv)
    settings = SMOKE if ns.smoke else FULL
    overrides = {"archive": ns.archive, "duration_s": ns.duration, "rate": ns.rate}
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    print(f"soak: {settings.duration_s:g} s at {settings.rate:g} envelopes/s, {settings.archive}", flush=True)
    report = asyncio.run(run_soak(settings, work=ns.work, out=ns.out, plot=ns.plot))
    _print_summary(report, sys.stdout)
    return 0 if report["passed"] else 1


def _print_summary(report: dict[str, Any], stream: IO[str]) -> None:
    for key, value in report["figures"].items():
        print(f"  {key}: {value}", file=stream)
    for name, p in report["processes"].items():
        print(
            f"  {name}: RSS {p['rss_mib_start']}→{p['rss_mib_end']} MiB ({p['rss_mib_per_min']:+} MiB/min), "
            f"fds {p['fds_start']}→{p['fds_end']} ({p['fds_per_min']:+}/min)",
            file=stream,
        )
    verdict = "PASSED" if report["passed"] else "FAILED: " + "; ".join(report["failures"])
    print(f"soak {verdict}", file=stream, flush=True)


if __name__ == "__main__":
    sys.exit(main())
