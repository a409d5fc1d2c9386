"""A local three-node Apache Cassandra 5.0 cluster on loopback aliases, for the cluster campaign.

Each node is a :class:`ctl.NodeConfig` (same Maven classpath, JVM flags and launcher as the single node of
tools/cassandra/ctl.py) on its own loopback address — 127.0.0.2, 127.0.0.3, 127.0.0.4 by default; Linux
routes all of 127.0.0.0/8 to ``lo``, so no alias has to be configured — with its own state directory
under ``var/cassandra-cluster/``, a small heap and a JMX port of its own (JMX binds 127.0.0.1 whatever the
node's address). CQL and storage ports are the same on every address: the Python driver and the Spark
connector reach every node on one port. The single shared node on 127.0.0.1 is never touched.

Nodes start one after another, as Cassandra requires for a bootstrap: the seed first, then each other node
bootstraps (``auto_bootstrap``) and the next one starts only once ``nodetool status`` shows every started
node Up/Normal. Usage and measurements: docs/cassandra.md "Cluster".

Sub-commands (``python tools/cassandra/cluster.py --help``): start [--fresh], stop, status, kill <n>,
restart <n>, nodetool <n> <args>. Exit codes as ctl.py's: 0, 1 failure, 2 usage, 3 not every node UN.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.cassandra import ctl

DEFAULT_HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
CLUSTER_NAME = "mailmesh-cluster"
#: Murmur3Partitioner's token range is [-2**63, 2**63 - 1]; one evenly spaced token per node.
TOKEN_MIN = -(2**63)
#: ``nodetool status`` lines: state (U/D + N/L/J/M) and address, e.g. ``UN  127.0.0.2  1.2 MiB  1  100.0%``.
STATUS_LINE = re.compile(r"^([UD][NLJM])\s+(\d+\.\d+\.\d+\.\d+)")

# JVM overrides of ctl.jvm_command's single-node speed-ups (the last -D of a name wins). A cluster node
# waits for gossip to settle before it serves CQL (CassandraDaemon.waitForGossipToSettle), so a restarted
# node knows which replicas are up before it coordinates a request; and it announces a shutdown so its peers
# mark it down at once (both are Cassandra's defaults). ``ring_delay_ms`` is how long a bootstrapping node
# listens to gossip before it picks its ranges (StorageService, default 30 s): the ring here is three
# loopback nodes started one at a time, each waited for until every node sees it Up/Normal.
CLUSTER_JVM_OPTS = (
    "-Dcassandra.skip_wait_for_gossip_to_settle=-1",
    "-Dcassandra.shutdown_announce_in_ms=2000",
    "-Dcassandra.ring_delay_ms=10000",
)


@dataclass(frozen=True)
class ClusterConfig:
    """The cluster's addresses, ports and footprint; every field has a CASSANDRA_CLUSTER_* variable."""

    hosts: tuple[str, ...] = DEFAULT_HOSTS
    """One loopback address per node, the first is the seed (CASSANDRA_CLUSTER_HOSTS, comma-separated)."""
    native_port: int = 9042
    """CQL port on every node's address (CASSANDRA_CLUSTER_NATIVE_PORT)."""
    storage_port: int = 7000
    """Internode port on every node's address (CASSANDRA_CLUSTER_STORAGE_PORT)."""
    jmx_port: int = 7201
    """JMX port of the first node; node ``i`` uses ``jmx_port + i`` (CASSANDRA_CLUSTER_JMX_PORT)."""
    heap: str = "640M"
    """Heap of each node, -Xms and -Xmx (CASSANDRA_CLUSTER_HEAP)."""
    state_dir: Path = ctl.ROOT / "var" / "cassandra-cluster"
    """Parent of the nodes' state directories node1, node2, … (CASSANDRA_CLUSTER_STATE_DIR)."""
    start_timeout_s: float = 300.0
    """Per node: seconds to wait for CQL, then for the ring to show UN (CASSANDRA_CLUSTER_START_TIMEOUT)."""
    stop_timeout_s: float = 60.0
    """Per node: seconds after SIGTERM before SIGKILL (CASSANDRA_CLUSTER_STOP_TIMEOUT)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ClusterConfig:
        """Read the CASSANDRA_CLUSTER_* variables; ``ctl.ConfigError`` lists every bad one."""
        env = os.environ if env is None else env
        d, problems = cls(), []

        def number(name: str, default: float, low: float, high: float) -> float:
            raw = env.get(name, "").strip()
            try:
                value = float(raw) if raw else default
            except ValueError:
                value = low - 1
            if not low <= value <= high:
                problems.append(f"{name}={raw!r}: expected a number from {low:g} to {high:g}")
                return default
            return value

        hosts = tuple(h.strip() for h in env.get("CASSANDRA_CLUSTER_HOSTS", "").split(",") if h.strip())
        hosts = hosts or d.hosts
        for host in hosts:
            try:
                if not ipaddress.ip_address(host).is_loopback or host == "127.0.0.1":
                    problems.append(
                        f"CASSANDRA_CLUSTER_HOSTS: {host} is not a loopback alias besides 127.0.0.1"
                    )
            except ValueError:
                problems.append(f"CASSANDRA_CLUSTER_HOSTS: {host!r} is not an IP address")
        if len(set(hosts)) != len(hosts) or len(hosts) < 2:
            problems.append(f"CASSANDRA_CLUSTER_HOSTS: want two or more distinct addresses, got {hosts}")
        heap = env.get("CASSANDRA_CLUSTER_HEAP", "").strip().upper() or d.heap
        if not re.fullmatch(r"[1-9][0-9]*[MG]", heap):
            problems.append(f"CASSANDRA_CLUSTER_HEAP={heap!r}: expected a size such as 512M or 1G")
        state = env.get("CASSANDRA_CLUSTER_STATE_DIR", "").strip()
        cfg = cls(
            hosts=hosts,
            native_port=int(number("CASSANDRA_CLUSTER_NATIVE_PORT", d.native_port, 1, 65535)),
            storage_port=int(number("CASSANDRA_CLUSTER_STORAGE_PORT", d.storage_port, 1, 65535)),
            jmx_port=int(number("CASSANDRA_CLUSTER_JMX_PORT", d.jmx_port, 1, 65535 - len(hosts))),
            heap=heap,
            state_dir=(ctl.ROOT / state).resolve() if state else d.state_dir,
            start_timeout_s=number("CASSANDRA_CLUSTER_START_TIMEOUT", d.start_timeout_s, 1, 3600),
            stop_timeout_s=number("CASSANDRA_CLUSTER_STOP_TIMEOUT", d.stop_timeout_s, 1, 3600),
        )
        jmx = set(cfg.jmx_ports)
        if jmx & {cfg.native_port, cfg.storage_port, 7199}:
            problems.append(f"JMX ports {sorted(jmx)} clash with CQL, storage or the single node's 7199")
        if problems:
            raise ctl.ConfigError(problems)
        return cfg

    @property
    def jmx_ports(self) -> list[int]:
        """Node ``i``'s JMX port at index ``i``."""
        return [self.jmx_port + i for i in range(len(self.hosts))]

    @property
    def contact_points(self) -> str:
        """Every node's address, comma-separated (for ARCHIVE_CASSANDRA_HOSTS and the Spark connector)."""
        return ",".join(self.hosts)

    def node(self, index: int) -> ctl.NodeConfig:
        """Node ``index`` (0 = the seed) as a ctl.py node: its address, ports, heap and state directory."""
        return ctl.NodeConfig(
            host=self.hosts[index],
            native_port=self.native_port,
            storage_port=self.storage_port,
            jmx_port=self.jmx_ports[index],
            heap=self.heap,
            state_dir=self.state_dir / f"node{index + 1}",
            start_timeout_s=self.start_timeout_s,
            stop_timeout_s=self.stop_timeout_s,
            java=os.environ.get("CASSANDRA_JAVA", "").strip(),
            extra_jvm_opts=CLUSTER_JVM_OPTS,
        )

    def nodes(self) -> list[ctl.NodeConfig]:
        """Every node, the seed first."""
        return [self.node(i) for i in range(len(self.hosts))]

    def token(self, index: int) -> int:
        """Node ``index``'s single token, evenly spaced around the ring."""
        return TOKEN_MIN + index * (2**64 // len(self.hosts))


def render_node_yaml(cc: ClusterConfig, index: int, fs_type: str | None = None) -> str:
    """Node ``index``'s cassandra.yaml: the single node's (ctl.render_yaml) with the cluster's differences."""
    cfg = cc.node(index)
    doc: dict[str, Any] = yaml.safe_load(ctl.render_yaml(cfg, fs_type=fs_type))
    doc["cluster_name"] = CLUSTER_NAME
    doc["initial_token"] = str(cc.token(index))
    doc["seed_provider"][0]["parameters"][0]["seeds"] = f"{cc.hosts[0]}:{cc.storage_port}"
    # The seed starts the ring; every other node joins it by streaming the ranges it takes over.
    doc["auto_bootstrap"] = True
    # A replica that was down gets the writes it missed as hints, for up to the hint window (3 h: the
    # archive's gc_grace_seconds of TTL'd tables relies on it, archivestore.cassandra.schema); repair does
    # the rest.
    doc["hinted_handoff_enabled"] = True
    doc["max_hint_window"] = "3h"
    header = f"# Rendered by tools/cassandra/cluster.py for node {index + 1} ({cfg.host}); do not edit.\n"
    return header + str(yaml.safe_dump(doc, sort_keys=False))


# ---------------------------------------------------------------------------------------------- nodetool
def nodetool(
    cc: ClusterConfig, index: int, *args: str, timeout_s: float = 600.0
) -> subprocess.CompletedProcess[str]:
    """Run ``nodetool <args>`` against node ``index`` over its JMX port (output captured)."""
    cfg = cc.node(index)
    cmd = [ctl.find_java(cfg), "-Xmx128m", "-XX:TieredStopAtLevel=1", *ctl.JDK17_FLAGS]
    cmd += [
        f"-Dlogback.configurationFile={ctl.LOGBACK.as_uri()}",
        f"-Dcassandra.logdir={cfg.log_dir / 'nodetool'}",
    ]
    cmd += [
        "-cp",
        str(ctl.LIB_DIR / "*"),
        ctl.NODETOOL_CLASS,
        "-h",
        "127.0.0.1",
        "-p",
        str(cfg.jmx_port),
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)


def parse_status(text: str) -> dict[str, str]:
    """``nodetool status`` output as {address: state}, e.g. {'127.0.0.2': 'UN', '127.0.0.3': 'DN'}."""
    return {m.group(2): m.group(1) for line in text.splitlines() if (m := STATUS_LINE.match(line.strip()))}


def ring(cc: ClusterConfig, index: int) -> dict[str, str]:
    """The ring as node ``index`` sees it ({} when its JMX does not answer)."""
    out = nodetool(cc, index, "status", timeout_s=120.0)
    return parse_status(out.stdout) if out.returncode == 0 else {}


def wait_ring(cc: ClusterConfig, index: int, want: Mapping[str, str], timeout_s: float) -> dict[str, str]:
    """Poll node ``index``'s view until every address in ``want`` has its state; raise StartFailed after."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = ring(cc, index)
        if all(seen.get(addr) == state for addr, state in want.items()):
            return seen
        if time.monotonic() >= deadline:
            raise ctl.StartFailed(f"node {index + 1} sees {seen or 'nothing'}, want {dict(want)}")
        time.sleep(1.0)


# ---------------------------------------------------------------------------------------------- verbs
def start_node(cc: ClusterConfig, index: int, *, fresh: bool = False) -> ctl.StartResult:
    """Start one node (no-op if it answers); wait until it and the seed (if up) see every running node UN."""
    cfg = cc.node(index)
    # ctl.start checks its ports on the node's address, but JMX binds 127.0.0.1 (JMXServerUtils, local only).
    if ctl.running_pid(cfg) is None and not ctl._port_free("127.0.0.1", cfg.jmx_port, wait_s=10.0):
        raise ctl.StartFailed(
            f"127.0.0.1:{cfg.jmx_port} (node {index + 1}'s JMX) is in use: CASSANDRA_CLUSTER_JMX_PORT"
        )
    result = ctl.start(cfg, fresh=fresh, config_text=render_node_yaml(cc, index))
    running = [i for i, node in enumerate(cc.nodes()) if ctl.running_pid(node) is not None]
    up = {cc.hosts[i]: "UN" for i in running}
    for viewer in dict.fromkeys(i for i in (index, 0) if i in running):
        wait_ring(cc, viewer, up, cc.start_timeout_s)
    return result


def start(cc: ClusterConfig, *, fresh: bool = False) -> list[ctl.StartResult]:
    """Start every node in order (seed first), each once the previous ones are UN."""
    if fresh:
        stop(cc)
    return [start_node(cc, i, fresh=fresh) for i in range(len(cc.hosts))]


def stop(cc: ClusterConfig) -> list[bool]:
    """Stop every node (SIGTERM: drain and announce; SIGKILL after the stop timeout), in parallel."""
    with ThreadPoolExecutor(len(cc.hosts)) as pool:
        return list(pool.map(ctl.stop, cc.nodes()))


def kill(cc: ClusterConfig, index: int) -> int:
    """SIGKILL node ``index`` (no drain, no announcement: a crash) and wait until it is gone; its pid."""
    cfg = cc.node(index)
    pid = ctl.running_pid(cfg)
    if pid is None:
        raise ctl.CassandraCtlError(f"node {index + 1} ({cfg.host}) is not running")
    os.kill(pid, signal.SIGKILL)
    while ctl.process_alive(pid):
        time.sleep(0.05)
    return pid


def status(cc: ClusterConfig) -> tuple[bool, list[str]]:
    """(every node running and seen UN by every running node, one line per node and view)."""
    lines, ok = [], True
    for i, cfg in enumerate(cc.nodes()):
        answering, line = ctl.status_line(cfg)
        ok = ok and answering
        lines.append(f"node {i + 1} {cfg.host} (JMX {cfg.jmx_port}): {line}")
        if ctl.running_pid(cfg) is not None:
            view = ring(cc, i)
            ok = ok and len(view) == len(cc.hosts) and set(view.values()) == {"UN"}
            lines.append(f"  sees {' '.join(f'{a}={s}' for a, s in sorted(view.items())) or 'nothing (JMX)'}")
    return ok, lines


# ---------------------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cluster.py", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="verb", required=True)
    s = sub.add_parser("start", help="start every node in order and wait until all are UN")
    s.add_argument("--fresh", action="store_true", help="stop and wipe every node's state first")
    sub.add_parser("stop", help="stop every node (idempotent)")
    sub.add_parser("status", help="each node's CQL answer and ring view (exit 3 unless all UN)")
    for verb, what in (("kill", "SIGKILL node N"), ("restart", "start node N again and wait for UN")):
        sub.add_parser(verb, help=what).add_argument("n", type=int)
    n = sub.add_parser("nodetool", help="run nodetool against node N, e.g. `nodetool 1 status`")
    n.add_argument("n", type=int)
    n.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _index(cc: ClusterConfig, n: int) -> int:
    if not 1 <= n <= len(cc.hosts):
        raise ctl.CassandraCtlError(f"node numbers are 1 to {len(cc.hosts)}, not {n}")
    return n - 1


def _run(args: argparse.Namespace, cc: ClusterConfig) -> int:
    if args.verb == "start":
        began = time.monotonic()
        for i, r in enumerate(start(cc, fresh=args.fresh)):
            how = "already running" if r.already_running else f"CQL after {r.seconds:.1f} s"
            ctl._say(f"node {i + 1} {cc.hosts[i]}: {how}, pid {r.pid}, Cassandra {r.release_version}")
        ctl._say(
            f"cluster of {len(cc.hosts)} UN in {time.monotonic() - began:.1f} s; CQL {cc.contact_points}"
        )
    elif args.verb == "stop":
        ctl._say(f"stopped {sum(stop(cc))} node(s)")
    elif args.verb == "status":
        ok, lines = status(cc)
        print("\n".join(lines), flush=True)
        return 0 if ok else 3
    elif args.verb == "kill":
        ctl._say(f"node {args.n}: killed pid {kill(cc, _index(cc, args.n))}")
    elif args.verb == "restart":
        r = start_node(cc, _index(cc, args.n))
        ctl._say(f"node {args.n}: pid {r.pid}, UN after {r.seconds:.1f} s to CQL")
    elif args.verb == "nodetool":
        out = nodetool(cc, _index(cc, args.n), *args.args)
        print(out.stdout + out.stderr, end="", flush=True)
        return out.returncode
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; see the module docstring."""
    args = _parser().parse_args(argv)
    try:
        return _run(args, ClusterConfig.from_env())
    except ctl.CassandraCtlError as err:
        print(f"cassandra cluster: FAILED: {err}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
