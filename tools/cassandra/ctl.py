"""Run a real single-node Apache Cassandra 5.0 from Maven Central jars, for tests and ``make run``.

No tarball, no Docker: ``fetch`` resolves ``org.apache.cassandra:cassandra-all`` (tools/cassandra/pom.xml)
with Maven into ``~/.m2`` and copies the runtime classpath into ``.cache/cassandra/lib``; ``start`` launches
``org.apache.cassandra.service.CassandraDaemon`` on that classpath as a detached process, with a YAML
rendered from tools/cassandra/cassandra.yaml.in, and waits until CQL answers a real query. All state lives
under ``var/cassandra``. The recipe and its sources: docs/cassandra.md "Sources: Maven artifacts"; usage,
ports and measurements: docs/cassandra.md.

Sub-commands (``python tools/cassandra/ctl.py --help``): fetch, start [--fresh], stop, status, wait,
cql "<statement>", logs [-f], nodetool <args>. Exit codes: 0 success, 1 failure (the reason is printed),
2 usage, 3 ``status``/``wait`` found no answering node.

Why one file of about 800 lines (over the house 400-line guideline): it has a single concern, the
lifecycle of one local node, and is both run by path from make and imported by tests
(``from tools.cassandra import ctl``); a quarter of it is the JVM flag list, docstrings and argparse.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import ipaddress
import os
import re
import shlex
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
YAML_TEMPLATE = HERE / "cassandra.yaml.in"
LOGBACK = HERE / "logback.xml"
LIB_DIR = ROOT / ".cache" / "cassandra" / "lib"
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
NODETOOL_CLASS = "org.apache.cassandra.tools.NodeTool"
STATE_MARKER = ".mailmesh-cassandra-state"
"""File that marks a directory as ours, so ``--fresh`` never wipes a directory it did not create."""
FETCH_RECIPE = "copy-dependencies/v1"
"""Part of the fetch stamp: change it when the way ``fetch`` lays out the lib dir changes."""
SUPPORTED_JAVA = (11, 17)
"""Cassandra 5.0 runs on Java 11 and 17 only (docs/cassandra.md "Sources: Java 17"); 17 is the tested one."""
LOG_TAIL_LINES = 60
#: Values of CASSANDRA_COMMITLOG_ACCESS (Cassandra 5.0 ``commitlog_disk_access_mode``; ``legacy`` = mmap).
COMMITLOG_ACCESS_MODES = ("direct", "mmap", "standard", "legacy")
#: File systems without O_DIRECT, where a ``direct`` commit log cannot open its segments.
NO_DIRECT_IO_FS = frozenset({"tmpfs", "ramfs"})

# conf/jvm17-server.options of apache/cassandra (docs/cassandra.md "Sources: Java 17"), all of them, including
# the newer revision's java.nio opening. Chronicle, netty and jamm need these on 17.
JDK17_FLAGS: tuple[str, ...] = (
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
)


# ---------------------------------------------------------------------------------------------- errors
class CassandraCtlError(Exception):
    """Base class: anything that stops a sub-command; ``main`` prints it and exits 1."""


class ConfigError(CassandraCtlError):
    """One or more CASSANDRA_* variables are bad; every problem is listed in ``problems``."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("bad Cassandra settings:\n  " + "\n  ".join(self.problems))


class FetchFailed(CassandraCtlError):
    """Maven could not produce the classpath; ``output`` holds the end of its output."""

    def __init__(self, reason: str, output: str = "") -> None:
        self.reason = reason
        self.output = output
        super().__init__(reason + (f"\n{output}" if output else ""))


class StartFailed(CassandraCtlError):
    """The node did not answer CQL; ``reason`` says why and ``log_tail`` shows the end of its logs."""

    def __init__(self, reason: str, log_tail: str = "") -> None:
        self.reason = reason
        self.log_tail = log_tail
        super().__init__(reason + (f"\n{log_tail}" if log_tail else ""))


# ---------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class NodeConfig:
    """Where and how the local node runs. Built by ``from_env``; every field has a CASSANDRA_* variable."""

    host: str = "127.0.0.1"
    """Listen, RPC and CQL address (CASSANDRA_HOST); must be a loopback address."""
    native_port: int = 9042
    """CQL native protocol port (CASSANDRA_NATIVE_PORT)."""
    storage_port: int = 7000
    """Internode (gossip) port (CASSANDRA_STORAGE_PORT); nothing connects to it on a single node."""
    jmx_port: int = 7199
    """JMX port bound to loopback, used by ``nodetool`` (CASSANDRA_JMX_PORT); 0 turns JMX off."""
    heap: str = "1G"
    """JVM heap, both -Xms and -Xmx (CASSANDRA_HEAP), e.g. ``512M`` or ``1G``."""
    state_dir: Path = ROOT / "var" / "cassandra"
    """Data, commit log, hints, caches, logs, pid file and rendered config (CASSANDRA_STATE_DIR)."""
    start_timeout_s: float = 180.0
    """How long ``start``/``wait`` wait for a CQL answer, in seconds (CASSANDRA_START_TIMEOUT)."""
    stop_timeout_s: float = 60.0
    """How long ``stop`` waits after SIGTERM before SIGKILL, in seconds (CASSANDRA_STOP_TIMEOUT)."""
    java: str = ""
    """The java executable (CASSANDRA_JAVA); empty means: the first Java 17 (or 11) found."""
    extra_jvm_opts: tuple[str, ...] = ()
    """Extra JVM options appended last, shell-split (CASSANDRA_EXTRA_JVM_OPTS); for experiments."""
    commitlog_access: str = "direct"
    """``commitlog_disk_access_mode`` (CASSANDRA_COMMITLOG_ACCESS): direct, mmap or standard; direct falls
    back to mmap where the file system has no O_DIRECT (tmpfs), see :func:`commitlog_access_mode`."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NodeConfig:
        """Read the CASSANDRA_* variables; raise ``ConfigError`` listing every bad one at once."""
        env = os.environ if env is None else env
        problems: list[str] = []
        d = cls()

        def port(name: str, default: int, allow_zero: bool = False) -> int:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            if raw.isdigit() and (0 if allow_zero else 1) <= int(raw) <= 65535:
                return int(raw)
            problems.append(f"{name}={raw!r}: expected a port number{' or 0' if allow_zero else ''}")
            return default

        def seconds(name: str, default: float) -> float:
            raw = env.get(name, "").strip()
            if not raw:
                return default
            try:
                value = float(raw)
            except ValueError:
                value = -1.0
            if value > 0:
                return value
            problems.append(f"{name}={raw!r}: expected a positive number of seconds")
            return default

        host = env.get("CASSANDRA_HOST", "").strip() or d.host
        try:
            if not ipaddress.ip_address(host).is_loopback:
                problems.append(f"CASSANDRA_HOST={host!r}: the test node listens on loopback only")
        except ValueError:
            problems.append(f"CASSANDRA_HOST={host!r}: expected an IP address such as 127.0.0.1")
        heap = env.get("CASSANDRA_HEAP", "").strip() or d.heap
        if not re.fullmatch(r"[1-9][0-9]*[MmGg]", heap):
            problems.append(f"CASSANDRA_HEAP={heap!r}: expected a size such as 512M or 1G")
        access = env.get("CASSANDRA_COMMITLOG_ACCESS", "").strip() or d.commitlog_access
        if access not in COMMITLOG_ACCESS_MODES:
            problems.append(
                f"CASSANDRA_COMMITLOG_ACCESS={access!r}: expected one of {', '.join(COMMITLOG_ACCESS_MODES)}"
            )
        state_raw = env.get("CASSANDRA_STATE_DIR", "").strip()
        state_dir = (ROOT / state_raw).resolve() if state_raw else d.state_dir
        if state_dir in (Path("/"), ROOT, Path.home()):
            problems.append(f"CASSANDRA_STATE_DIR={state_raw!r}: refusing to keep state in {state_dir}")
        cfg = cls(
            host=host,
            native_port=port("CASSANDRA_NATIVE_PORT", d.native_port),
            storage_port=port("CASSANDRA_STORAGE_PORT", d.storage_port),
            jmx_port=port("CASSANDRA_JMX_PORT", d.jmx_port, allow_zero=True),
            heap=heap.upper(),
            state_dir=state_dir,
            start_timeout_s=seconds("CASSANDRA_START_TIMEOUT", d.start_timeout_s),
            stop_timeout_s=seconds("CASSANDRA_STOP_TIMEOUT", d.stop_timeout_s),
            java=env.get("CASSANDRA_JAVA", "").strip(),
            extra_jvm_opts=tuple(shlex.split(env.get("CASSANDRA_EXTRA_JVM_OPTS", ""))),
            commitlog_access=access,
        )
        ports = [p for p in (cfg.native_port, cfg.storage_port, cfg.jmx_port) if p]
        if len(set(ports)) != len(ports):
            problems.append(f"the native, storage and JMX ports must differ (got {ports})")
        if problems:
            raise ConfigError(problems)
        return cfg

    @property
    def endpoint(self) -> str:
        """``host:port`` of the CQL native protocol."""
        return f"{self.host}:{self.native_port}"

    @property
    def data_dir(self) -> Path:
        """SSTables."""
        return self.state_dir / "data"

    @property
    def commitlog_dir(self) -> Path:
        """Commit log segments (replayed on start)."""
        return self.state_dir / "commitlog"

    @property
    def log_dir(self) -> Path:
        """system.log (INFO+) and stdout.log (WARN+ and JVM output)."""
        return self.state_dir / "logs"

    @property
    def yaml_path(self) -> Path:
        """The rendered cassandra.yaml."""
        return self.state_dir / "conf" / "cassandra.yaml"

    @property
    def pid_file(self) -> Path:
        """Pid of the running CassandraDaemon."""
        return self.state_dir / "cassandra.pid"

    def yaml_dirs(self) -> dict[str, Path]:
        """The directories the YAML names, keyed by template variable."""
        return {
            "data_dir": self.data_dir,
            "commitlog_dir": self.commitlog_dir,
            "saved_caches_dir": self.state_dir / "saved_caches",
            "hints_dir": self.state_dir / "hints",
            "cdc_raw_dir": self.state_dir / "cdc_raw",
        }

    def all_dirs(self) -> list[Path]:
        """Every directory ``start`` creates (the YAML's, logs, rendered config, triggers)."""
        return [*self.yaml_dirs().values(), self.log_dir, self.yaml_path.parent, self.state_dir / "triggers"]


# ---------------------------------------------------------------------------------------------- helpers
def _say(msg: str) -> None:
    print(f"cassandra: {msg}", flush=True)


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    """Serialise fetch/start/stop between concurrent make or test processes."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with lock_file.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


LOG_FILES = ("stdout.log", "system.log")
"""stdout.log: JVM output (bad flags, crashes) and WARN+; system.log: INFO+ (logback.xml)."""


def tail(path: Path, lines: int = LOG_TAIL_LINES, start: int = 0) -> str:
    """The last ``lines`` lines of a text file after byte ``start`` ('' if there are none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(start, fh.tell() - 512 * 1024))
            data = fh.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def log_sizes(cfg: NodeConfig) -> dict[str, int]:
    """Current size of each log file, to report only what a launch wrote (see ``log_tail``)."""
    return {name: (p.stat().st_size if (p := cfg.log_dir / name).exists() else 0) for name in LOG_FILES}


def log_tail(cfg: NodeConfig, lines: int = LOG_TAIL_LINES, since: Mapping[str, int] | None = None) -> str:
    """The end of stdout.log and system.log (only what came after ``since``), labelled, for failures."""
    parts = []
    for name in LOG_FILES:
        path = cfg.log_dir / name
        if text := tail(path, lines, (since or {}).get(name, 0)):
            parts.append(f"---- last lines of {path}{' since this start' if since else ''} ----\n{text}")
    return "\n".join(parts) or f"(nothing in {cfg.log_dir}{' since this start' if since else ''})"


def _port_free(host: str, port: int, wait_s: float = 0.0) -> bool:
    """Can a listener bind ``host:port``? Retries for ``wait_s`` (a just-killed JVM may still hold it)."""
    deadline = time.monotonic() + wait_s
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
        time.sleep(0.2)


def _port_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def rss_mib(pid: int) -> float | None:
    """Resident set size of a process in MiB (None if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------- fetch
def _fetch_digest() -> str:
    return hashlib.sha256(POM.read_bytes() + FETCH_RECIPE.encode()).hexdigest()


def lib_is_current(lib_dir: Path = LIB_DIR) -> bool:
    """True when lib_dir holds the classpath of the current pom.xml."""
    stamp = lib_dir / ".stamp"
    current = stamp.is_file() and stamp.read_text().strip() == _fetch_digest()
    return current and any(lib_dir.glob("cassandra-all-*.jar"))


def fetch(lib_dir: Path = LIB_DIR, *, force: bool = False) -> bool:
    """Copy cassandra-all's runtime classpath into ``lib_dir``; return False if it was already current.

    Maven downloads into ~/.m2 (kept across clones on the machine), then copies into a temporary
    directory that replaces ``lib_dir`` only when complete, so an interrupted fetch is never mistaken
    for a good one. The stamp records the pom's sha256, so editing the pom re-fetches.
    """
    with _locked(lib_dir.parent / ".lock"):
        if not force and lib_is_current(lib_dir):
            return False
        mvn = shutil.which("mvn")
        if mvn is None:
            raise FetchFailed("mvn (Apache Maven) is not on PATH; install it: apt-get install maven")
        partial = lib_dir.with_name(lib_dir.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        cmd = [mvn, "-B", "-ntp", "-q", "-f", str(POM), "dependency:copy-dependencies"]
        cmd.append(f"-DoutputDirectory={partial}")
        _say(f"fetching the Cassandra classpath with Maven into {lib_dir} ...")
        proc = subprocess.run(cmd, cwd=HERE, capture_output=True, text=True, check=False)
        jars = sorted(partial.glob("cassandra-all-*.jar")) if partial.is_dir() else []
        if proc.returncode != 0 or not jars:
            output = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise FetchFailed(f"`{shlex.join(cmd)}` failed (exit {proc.returncode})", output)
        (partial / ".stamp").write_text(_fetch_digest() + "\n")
        old = lib_dir.with_name(lib_dir.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        if lib_dir.exists():
            lib_dir.rename(old)
        partial.rename(lib_dir)
        shutil.rmtree(old, ignore_errors=True)
        return True


def cassandra_version(lib_dir: Path = LIB_DIR) -> str:
    """The version of the fetched cassandra-all jar ('' if not fetched)."""
    jars = sorted(lib_dir.glob("cassandra-all-*.jar"))
    return jars[0].stem.removeprefix("cassandra-all-") if jars else ""


# ---------------------------------------------------------------------------------------------- launch
def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def find_java(cfg: NodeConfig) -> str:
    """The java to run Cassandra with: CASSANDRA_JAVA, else JAVA_HOME, PATH, /usr/lib/jvm (17 first)."""
    if cfg.java:
        major = _java_major(cfg.java)
        if major not in SUPPORTED_JAVA:
            raise StartFailed(f"CASSANDRA_JAVA={cfg.java} is Java {major}; Cassandra 5.0 needs 11 or 17")
        return cfg.java
    candidates: list[str] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    if on_path := shutil.which("java"):
        candidates.append(on_path)
    candidates += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java"))
    seen: dict[str, int | None] = {}
    for java in dict.fromkeys(candidates):
        seen[java] = _java_major(java)
        if seen[java] == 17:
            return java
    if java11 := next((j for j, major in seen.items() if major == 11), None):
        return java11
    found = ", ".join(f"{j} (Java {m})" for j, m in seen.items()) or "none"
    raise StartFailed(f"no Java 17 or 11 found (seen: {found}); Cassandra 5.0 runs only on those")


def filesystem_type(path: Path, mounts: str | None = None) -> str:
    """The type of the file system holding ``path`` (longest mount point prefix in /proc/mounts), or ''."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return ""
    target = str(path.resolve())
    best, kind = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def commitlog_access_mode(cfg: NodeConfig, fs_type: str | None = None) -> str:
    """The commit log access mode to render: the configured one, except that ``direct`` becomes ``mmap`` on
    tmpfs/ramfs (no O_DIRECT there: the node would fail to open its first segment)."""
    kind = filesystem_type(cfg.state_dir) if fs_type is None else fs_type
    if cfg.commitlog_access == "direct" and kind in NO_DIRECT_IO_FS:
        return "mmap"
    return cfg.commitlog_access


def render_yaml(cfg: NodeConfig, fs_type: str | None = None) -> str:
    """cassandra.yaml.in with this config's values substituted (paths single-quoted for YAML)."""

    def q(path: Path) -> str:
        return "'" + str(path).replace("'", "''") + "'"

    values = {name: q(path) for name, path in cfg.yaml_dirs().items()}
    values |= {"host": cfg.host, "native_port": str(cfg.native_port), "storage_port": str(cfg.storage_port)}
    values["commitlog_access"] = commitlog_access_mode(cfg, fs_type)
    return string.Template(YAML_TEMPLATE.read_text()).substitute(values)


def _no_mlock_prefix() -> list[str]:
    """As root, drop CAP_IPC_LOCK so Cassandra's mlockall fails (a WARN) instead of pinning the heap.

    mlockall(MCL_CURRENT) makes the whole 1 GiB heap resident at once (RSS about 1.4 GiB instead of
    about 0.55 GiB); these machines have no swap, so locking buys nothing. Non-root users cannot lock
    beyond RLIMIT_MEMLOCK anyway, so this makes root and non-root runs alike.
    """
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return []
    return [setpriv, "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock"]


def jvm_command(cfg: NodeConfig, java: str, lib_dir: Path = LIB_DIR) -> list[str]:
    """The full ``java ...`` command line of the CassandraDaemon."""
    jamm = sorted(lib_dir.glob("jamm-*.jar"))
    if len(jamm) != 1:
        raise StartFailed(
            f"expected one jamm-*.jar in {lib_dir}, found {len(jamm)}; run make cassandra-fetch"
        )
    cmd = [*_no_mlock_prefix(), java, f"-Xms{cfg.heap}", f"-Xmx{cfg.heap}", *JDK17_FLAGS]
    cmd += [
        "-Xss256k",
        "-XX:+PerfDisableSharedMem",  # no hsperfdata mmap file in /tmp
        "-XX:+ExitOnOutOfMemoryError",  # die loudly rather than limp on (Cassandra's StartupChecks advice)
        f"-XX:ErrorFile={cfg.log_dir}/hs_err_pid%p.log",
        "-Djava.net.preferIPv4Stack=true",
        f"-javaagent:{jamm[0]}",
        f"-Dcassandra.config={cfg.yaml_path.as_uri()}",
        f"-Dcassandra.storagedir={cfg.state_dir}",
        f"-Dcassandra.logdir={cfg.log_dir}",
        f"-Dlogback.configurationFile={LOGBACK.as_uri()}",
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.triggers_dir={cfg.state_dir / 'triggers'}",
        # Single test node: nobody to gossip with, so neither wait for gossip to settle at start-up
        # (Testcontainers does the same) nor spend 2 s announcing the shutdown.
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        "-Dcassandra.shutdown_announce_in_ms=0",
        # Skip the 1-2.5 s start-up measurement of a memtable row's heap overhead; 180 bytes is what
        # 5.0.9 measured on OpenJDK 17 ("Estimated SkipListMemtable row overhead: 180"). It only
        # feeds the memtable size accounting that decides when to flush.
        "-Dcassandra.memtable.row_overhead_size=180",
    ]
    if cfg.jmx_port:
        cmd.append(f"-Dcassandra.jmx.local.port={cfg.jmx_port}")
    cmd += [*cfg.extra_jvm_opts, "-cp", str(lib_dir / "*"), MAIN_CLASS]
    return cmd


def process_alive(pid: int) -> bool:
    """The process exists and is not a zombie (whatever it is running right now)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def running_pid(cfg: NodeConfig) -> int | None:
    """Pid from the pid file if that process is alive and is this state dir's CassandraDaemon."""
    try:
        pid = int(cfg.pid_file.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if not process_alive(pid):
        return None
    ours = f"-Dcassandra.config={cfg.yaml_path.as_uri()}".encode()
    return pid if MAIN_CLASS.encode() in cmdline and ours in cmdline else None


def _launch(cfg: NodeConfig, cmd: list[str]) -> int:
    """Start ``cmd`` detached (own session, not our child) with output to stdout.log; return its pid.

    A short-lived /bin/sh backgrounds the JVM and prints its pid, so the JVM is re-parented at once:
    no zombie and no subprocess ResourceWarning when the caller (make, pytest) exits or kills it.
    """
    stdout_log = cfg.log_dir / "stdout.log"
    cmdline_file = cfg.yaml_path.with_name("jvm.cmdline")
    cmdline_file.write_text(shlex.join(cmd) + "\n")
    with stdout_log.open("a") as fh:
        fh.write(f"==== ctl.py start {time.strftime('%Y-%m-%dT%H:%M:%S%z')} (command: {cmdline_file})\n")
    script = 'log=$1; shift; "$@" </dev/null >>"$log" 2>&1 & echo $!'
    out = subprocess.run(
        ["/bin/sh", "-c", script, "sh", str(stdout_log), *cmd],
        cwd=cfg.state_dir,
        capture_output=True,
        text=True,
        start_new_session=True,
        check=True,
    )
    pid = int(out.stdout.strip())
    cfg.pid_file.write_text(f"{pid}\n")
    return pid


# ---------------------------------------------------------------------------------------------- CQL
@contextlib.contextmanager
def session(
    cfg: NodeConfig, *, request_timeout_s: float = 10.0, connect_timeout_s: float = 5.0
) -> Iterator[Any]:
    """A cassandra-driver ``Session`` on the local node (protocol v5, explicit single-DC profile)."""
    from cassandra import ProtocolVersion
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    profile = ExecutionProfile(
        load_balancing_policy=DCAwareRoundRobinPolicy(local_dc="datacenter1"),
        request_timeout=request_timeout_s,
    )
    cluster = Cluster(
        [cfg.host],
        port=cfg.native_port,
        protocol_version=ProtocolVersion.V5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=connect_timeout_s,
        control_connection_timeout=connect_timeout_s,
    )
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def release_version(cfg: NodeConfig, timeout_s: float = 10.0) -> str:
    """Ask the node ``SELECT release_version FROM system.local`` (raises on any failure)."""
    with session(cfg, request_timeout_s=timeout_s, connect_timeout_s=timeout_s) as s:
        row = s.execute("SELECT release_version FROM system.local").one()
        return str(row.release_version)


def wait_ready(
    cfg: NodeConfig,
    *,
    timeout_s: float | None = None,
    pid: int | None = None,
    logs_since: Mapping[str, int] | None = None,
) -> str:
    """Wait until CQL answers a real query; return release_version or raise ``StartFailed``.

    With ``pid``, give up as soon as that process dies instead of waiting out the deadline.
    ``logs_since`` (from ``log_sizes`` before launch) limits the reported log tail to this start.
    """
    timeout_s = cfg.start_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    last_error = "the CQL port never opened"
    while True:
        # Not running_pid(): for a moment after launch the pid is /bin/sh or setpriv, mid-exec.
        if pid is not None and not process_alive(pid):
            raise StartFailed(
                f"Cassandra (pid {pid}) exited during start-up", log_tail(cfg, since=logs_since)
            )
        if _port_open(cfg.host, cfg.native_port):
            try:
                return release_version(cfg)
            except Exception as err:  # the driver raises many types while the node warms up
                last_error = f"CQL port open but query failed: {type(err).__name__}: {err}"
        if time.monotonic() >= deadline:
            raise StartFailed(
                f"no CQL answer from {cfg.endpoint} within {timeout_s:.0f} s ({last_error})"
                + (f"; pid {pid} is still running (make cassandra-stop stops it)" if pid else ""),
                log_tail(cfg, since=logs_since),
            )
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------- verbs
@dataclass(frozen=True)
class StartResult:
    """What ``start`` did."""

    pid: int
    release_version: str
    already_running: bool
    seconds: float
    """Time from launch to the first CQL answer (0 if it was already running)."""


def start(
    cfg: NodeConfig, *, fresh: bool = False, timeout_s: float | None = None, config_text: str | None = None
) -> StartResult:
    """Start the node unless it already answers; wait for CQL; raise ``StartFailed`` with the log tail.

    ``config_text`` is the cassandra.yaml to run with (default: :func:`render_yaml`); the cluster
    (tools/cassandra/cluster.py) renders its nodes' own.
    """
    config_text = render_yaml(cfg) if config_text is None else config_text
    fetch()
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    with _locked(cfg.state_dir.parent / f".{cfg.state_dir.name}.lock"):
        if fresh:
            _stop_locked(cfg)
            wipe(cfg)
        pid = running_pid(cfg)
        if pid is not None:
            if cfg.yaml_path.read_text() != config_text:
                raise StartFailed(f"already running (pid {pid}) with other settings; stop it first")
            return StartResult(pid, wait_ready(cfg, timeout_s=timeout_s, pid=pid), True, 0.0)
        for name, port in (("native", cfg.native_port), ("storage", cfg.storage_port), ("JMX", cfg.jmx_port)):
            if port and not _port_free(cfg.host, port, wait_s=10.0):
                var = f"CASSANDRA_{name.upper()}_PORT"
                raise StartFailed(
                    f"{cfg.host}:{port} ({name} port) is already in use by another process (another "
                    f"Cassandra, from another checkout?). Stop it, or choose another port with {var}."
                )
        java = find_java(cfg)
        for d in cfg.all_dirs():
            d.mkdir(parents=True, exist_ok=True)
        (cfg.state_dir / STATE_MARKER).touch()
        cfg.yaml_path.write_text(config_text)
        cmd, logs_before, began = jvm_command(cfg, java), log_sizes(cfg), time.monotonic()
        pid = _launch(cfg, cmd)
        version = wait_ready(cfg, timeout_s=timeout_s, pid=pid, logs_since=logs_before)
        return StartResult(pid, version, False, time.monotonic() - began)


def wipe(cfg: NodeConfig) -> None:
    """Delete the state dir (only one that ``start`` created: it must carry the marker file)."""
    if not cfg.state_dir.exists():
        return
    if not (cfg.state_dir / STATE_MARKER).exists() and any(cfg.state_dir.iterdir()):
        raise CassandraCtlError(f"refusing to wipe {cfg.state_dir}: it has no {STATE_MARKER} marker")
    for child in cfg.state_dir.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _stop_locked(cfg: NodeConfig) -> bool:
    pid = running_pid(cfg)
    if pid is None:
        cfg.pid_file.unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)  # shutdown hook: drain (flush memtables), then exit
    if not _wait_gone(pid, cfg.stop_timeout_s):
        _say(f"pid {pid} still alive {cfg.stop_timeout_s:.0f} s after SIGTERM; sending SIGKILL")
        os.kill(pid, signal.SIGKILL)
        if not _wait_gone(pid, 15.0):
            raise CassandraCtlError(f"pid {pid} survived SIGKILL")
    cfg.pid_file.unlink(missing_ok=True)
    return True


def stop(cfg: NodeConfig) -> bool:
    """SIGTERM, wait up to ``stop_timeout_s``, then SIGKILL; return False if it was not running."""
    cfg.state_dir.mkdir(parents=True, exist_ok=True)
    with _locked(cfg.state_dir.parent / f".{cfg.state_dir.name}.lock"):
        return _stop_locked(cfg)


def status_line(cfg: NodeConfig) -> tuple[bool, str]:
    """(answering, one human line) for ``status``."""
    pid = running_pid(cfg)
    if pid is None:
        busy = " (but something else answers on that port)" if _port_open(cfg.host, cfg.native_port) else ""
        return False, f"not running; CQL endpoint would be {cfg.endpoint}{busy}"
    rss = rss_mib(pid) or 0.0
    if not _port_open(cfg.host, cfg.native_port):
        return False, f"running (pid {pid}, RSS {rss:.0f} MiB) but CQL {cfg.endpoint} is not open yet"
    try:
        version = release_version(cfg, timeout_s=5.0)
    except Exception as err:  # not answering yet (starting) or wedged
        return False, f"running (pid {pid}, RSS {rss:.0f} MiB) but CQL {cfg.endpoint} does not answer: {err}"
    return True, f"running: pid {pid}, Cassandra {version}, CQL {cfg.endpoint}, RSS {rss:.0f} MiB"


# ---------------------------------------------------------------------------------------------- CLI
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ctl.py", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = p.add_subparsers(dest="verb", required=True)
    f = sub.add_parser("fetch", help="copy the Cassandra classpath from Maven (idempotent)")
    f.add_argument("--force", action="store_true", help="fetch even if the stamp is current")
    s = sub.add_parser("start", help="start the node (no-op if it answers) and wait for CQL")
    s.add_argument("--fresh", action="store_true", help="stop and wipe var/cassandra first")
    s.add_argument("--timeout", type=float, help="seconds to wait for CQL (default CASSANDRA_START_TIMEOUT)")
    sub.add_parser("stop", help="SIGTERM, wait, SIGKILL (idempotent)")
    sub.add_parser("status", help="print running/not running and the CQL endpoint (exit 3 if not answering)")
    w = sub.add_parser("wait", help="wait until CQL answers (exit 3 on timeout)")
    w.add_argument("--timeout", type=float)
    c = sub.add_parser("cql", help="run one CQL statement and print the rows")
    c.add_argument("statement")
    lg = sub.add_parser("logs", help="print the end of system.log")
    lg.add_argument("-n", "--lines", type=int, default=100)
    lg.add_argument("-f", "--follow", action="store_true", help="keep following (Ctrl-C to stop)")
    n = sub.add_parser("nodetool", help="run nodetool over JMX, e.g. `nodetool status`")
    n.add_argument("args", nargs=argparse.REMAINDER)
    return p


def _run(args: argparse.Namespace, cfg: NodeConfig) -> int:
    verb: str = args.verb
    if verb == "fetch":
        began = time.monotonic()
        did = fetch(force=args.force)
        state = f"fetched in {time.monotonic() - began:.1f} s" if did else "already current"
        _say(f"cassandra-all {cassandra_version()} classpath {state} ({LIB_DIR})")
    elif verb == "start":
        r = start(cfg, fresh=args.fresh, timeout_s=args.timeout)
        rss = rss_mib(r.pid) or 0.0
        how = "already running" if r.already_running else f"started in {r.seconds:.1f} s"
        _say(f"{how}: Cassandra {r.release_version}, CQL {cfg.endpoint}, pid {r.pid}, RSS {rss:.0f} MiB")
    elif verb == "stop":
        _say("stopped" if stop(cfg) else "not running")
    elif verb == "status":
        ok, line = status_line(cfg)
        _say(line)
        return 0 if ok else 3
    elif verb == "wait":
        try:
            version = wait_ready(cfg, timeout_s=args.timeout, pid=running_pid(cfg))
            _say(f"Cassandra {version} answers on {cfg.endpoint}")
        except StartFailed as err:
            _say(str(err))
            return 3
    elif verb == "cql":
        with session(cfg) as s:
            try:
                rows = list(s.execute(args.statement))
            except Exception as err:  # driver errors: syntax, invalid request, timeout ...
                raise CassandraCtlError(f"CQL failed: {type(err).__name__}: {err}") from err
        for row in rows:
            print(row)
    elif verb == "logs":
        log = cfg.log_dir / "system.log"
        if args.follow:
            os.execvp("tail", ["tail", "-n", str(args.lines), "-F", str(log)])
        print(tail(log, args.lines) or f"(no {log} yet)")
    elif verb == "nodetool":
        if not cfg.jmx_port:
            raise CassandraCtlError("JMX is off (CASSANDRA_JMX_PORT=0); nodetool needs it")
        cmd = [find_java(cfg), "-Xmx128m", *JDK17_FLAGS, f"-Dlogback.configurationFile={LOGBACK.as_uri()}"]
        cmd += [f"-Dcassandra.logdir={cfg.log_dir / 'nodetool'}", "-cp", str(LIB_DIR / "*"), NODETOOL_CLASS]
        cmd += ["-h", cfg.host, "-p", str(cfg.jmx_port), *args.args]
        return subprocess.run(cmd, check=False).returncode
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; see the module docstring."""
    args = _parser().parse_args(argv)
    try:
        return _run(args, NodeConfig.from_env())
    except CassandraCtlError as err:
        print(f"cassandra: FAILED: {err}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
