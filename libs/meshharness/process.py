"""One Mailmesh service as a child process: spawn, wait for SERVING, capture its log, stop.

A service runs as ``python -m <module>`` with its settings in environment variables (the same ones the
Helm chart sets). :func:`spawn` starts it with stdout and stderr merged into one pipe; a reader thread
feeds every line into a :class:`~meshharness.logs.LogCapture` (and, optionally, an echo callback and a log
file), so a test can wait for a line, read the JSON records, or check that nothing noisy was logged.
:meth:`ServiceProcess.wait_serving` blocks on ``grpc.health.v1`` ``Watch`` until the service reports
SERVING (event-driven: the server pushes each status change), bounded by a deadline, and fails at once
with the process's output if it exits first. :meth:`ServiceProcess.stop` sends SIGTERM (the services drain
and exit 0), then SIGKILL after a grace period.

The core is synchronous (threads), so pytest fixtures, the ``make run`` runner and asyncio code can all use
it; asyncio callers run the blocking calls through ``asyncio.to_thread`` (the ``*_async`` variants).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from meshharness.logs import LogCapture, ServiceExited
from meshharness.ports import PortTaken

__all__ = [
    "REPO_ROOT",
    "ServiceProcess",
    "ServiceSpec",
    "TlsFiles",
    "clean_env",
    "scrape_metrics",
    "spawn",
    "start",
    "start_async",
    "tls_files",
    "wait_serving",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository root: the working directory of every process (relative paths resolve as in ``make``)."""

#: Variables stripped from the parent's environment (clean_env): a developer's shell must not change what a
#: test or a benchmark runs. OTEL_ and MAILMESH_ are shared by every service (meshcore.config).
SHARED_ENV_PREFIXES = ("MAILMESH_", "OTEL_")

# The health channel reconnects fast: a service binds its port a second or two after exec, and gRPC's
# default back-off (1 s, growing to 120 s) would add that much again to every start.
_HEALTH_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
]
_WATCH_SLICE_S = 2.0  # how often a Watch wait stops to check that the process is still alive
_BIND_FAILURES = ("address already in use", "cannot listen")

Echo = Callable[[str, str], None]
"""``echo(instance name, line)``: sees each output line as it arrives."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Prometheus samples: ``{(sample name, sorted label pairs): value}``."""

_live: set[ServiceProcess] = set()
_live_lock = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class ServiceSpec:
    """How to start one process: ``python [profile] -m <module> <args>`` with ``env``."""

    name: str
    """Instance name, used in messages and log prefixes (``archive``, ``edge_peer-1``)."""
    module: str
    """The module run with ``python -m`` (``services.archive``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set on top of the base environment (see ``inherit_env``)."""
    grpc_port: int = 0
    """The gRPC port the service was told to use (``<PREFIX>_GRPC_PORT``); 0 when it has none to wait for."""
    metrics_port: int = -1
    """Its Prometheus port (``<PREFIX>_METRICS_PORT``); -1 when disabled."""
    health: str = ""
    """The ``grpc.health.v1`` service name that must be SERVING (the archive's goes SERVING once its store
    is open); "" means the whole server."""
    args: tuple[str, ...] = ()
    """Command-line arguments after the module."""
    profile: Path | None = None
    """Run under ``python -m cProfile -o <profile>`` (written when the process exits on SIGTERM)."""
    inherit_env: bool = False
    """True: start from the parent's environment as it is (``make run``); False: :func:`clean_env`."""

    @property
    def address(self) -> str:
        """``127.0.0.1:<grpc_port>``."""
        return f"127.0.0.1:{self.grpc_port}"

    def argv(self) -> list[str]:
        """The full command line."""
        profile = ["-m", "cProfile", "-o", str(self.profile)] if self.profile is not None else []
        return [sys.executable, *profile, "-m", self.module, *self.args]


def clean_env(strip_prefixes: Sequence[str] = ()) -> dict[str, str]:
    """The parent's environment without Mailmesh settings (``MAILMESH_*``, ``OTEL_*``, ``strip_prefixes``).

    ``PYTHONUNBUFFERED`` is set so every log line reaches the pipe as it is written.
    """
    prefixes = (*SHARED_ENV_PREFIXES, *strip_prefixes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ServiceProcess:
    """A spawned service: its spec, the child process and the lines it writes."""

    def __init__(self, spec: ServiceSpec, proc: subprocess.Popen[bytes], logs: LogCapture) -> None:
        self.spec = spec
        self.proc = proc
        self.logs = logs
        self.killed = False
        """True once :meth:`stop` had to SIGKILL the process (it did not exit within the grace)."""
        self._exited = threading.Event()
        self._reader: threading.Thread | None = None
        self._on_exit: list[Callable[[ServiceProcess], None]] = []
        self._on_exit_lock = threading.Lock()

    @property
    def name(self) -> str:
        """The instance name."""
        return self.spec.name

    @property
    def pid(self) -> int:
        """The process id."""
        return self.proc.pid

    @property
    def address(self) -> str:
        """``127.0.0.1:<grpc port>``."""
        return self.spec.address

    @property
    def returncode(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while it runs."""
        return self.proc.poll()

    def on_exit(self, callback: Callable[[ServiceProcess], None]) -> None:
        """Call ``callback(self)`` from the reader thread once the process has exited (at once if it has)."""
        with self._on_exit_lock:
            if not self._exited.is_set():
                self._on_exit.append(callback)
                return
        callback(self)

    def wait_serving(self, timeout: float, *, cancel: threading.Event | None = None) -> None:
        """Block until ``grpc.health.v1`` reports :attr:`ServiceSpec.health` SERVING.

        Raises :class:`~meshharness.ports.PortTaken` when the process exited because its port was taken,
        :class:`~meshharness.logs.ServiceExited` when it exited otherwise, ``TimeoutError`` after
        ``timeout`` seconds; returns early (without raising) once ``cancel`` is set.
        """
        env = {**(os.environ if self.spec.inherit_env else {}), **self.spec.env}
        wait_serving(
            self.address,
            self.spec.health,
            timeout,
            alive=self._check_alive,
            cancel=cancel,
            tls=tls_files(env),
        )

    async def wait_serving_async(self, timeout: float) -> None:
        """:meth:`wait_serving` for asyncio callers."""
        await asyncio.to_thread(self.wait_serving, timeout)

    def _check_alive(self) -> None:
        code = self.proc.poll()
        if code is None:
            return
        self.wait_exit(10)  # the reader has the last lines once it saw EOF
        tail = self.logs.tail()
        if any(failure in tail.lower() for failure in _BIND_FAILURES):
            raise PortTaken(self.name)
        raise ServiceExited(self.name, code, tail)

    def send_signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` unless the process has already exited."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to exit and its output to be read; returns the exit status.

        Raises ``subprocess.TimeoutExpired`` if it is still running after ``timeout`` seconds.
        """
        code = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(timeout)
        self._exited.wait(timeout)
        return code

    async def wait_exit_async(self, timeout: float) -> int:
        """:meth:`wait_exit` for asyncio callers."""
        return await asyncio.to_thread(self.wait_exit, timeout)

    def stop(self, grace: float = 15.0, *, sig: signal.Signals = signal.SIGTERM) -> int:
        """Send ``sig`` (SIGTERM: drain and exit), SIGKILL after ``grace`` s; returns the exit status."""
        self.send_signal(sig)
        try:
            return self.wait_exit(grace)
        except subprocess.TimeoutExpired:
            self.killed = True
            self.proc.kill()
            return self.wait_exit(30)

    async def stop_async(self, grace: float = 15.0, *, sig: signal.Signals = signal.SIGTERM) -> int:
        """:meth:`stop` for asyncio callers."""
        return await asyncio.to_thread(self.stop, grace, sig=sig)

    def metrics(self) -> Samples:
        """Scrape the service's ``/metrics`` (see :func:`scrape_metrics`)."""
        if self.spec.metrics_port < 0:
            raise ValueError(f"{self.name} runs without a metrics port")
        return scrape_metrics(self.spec.metrics_port)

    def metric(self, name: str, **labels: str) -> float:
        """One sample of :meth:`metrics` (0 when the series does not exist yet)."""
        return self.metrics().get((name, tuple(sorted(labels.items()))), 0.0)

    def _read(self, stream: IO[bytes], echo: Echo | None, log_file: Path | None) -> None:
        sink = log_file.open("a", encoding="utf-8") if log_file is not None else None
        try:
            for raw in iter(stream.readline, b""):
                text = raw.decode(errors="replace").rstrip("\r\n")
                self.logs.add(text)
                if echo is not None:
                    echo(self.name, text)
                if sink is not None:
                    sink.write(text + "\n")
                    sink.flush()
        finally:
            stream.close()
            if sink is not None:
                sink.close()
            code = self.proc.wait()
            self.logs.close(code)
            with _live_lock:
                _live.discard(self)
            with self._on_exit_lock:
                self._exited.set()
                callbacks = list(self._on_exit)
            for callback in callbacks:
                callback(self)


def spawn(
    spec: ServiceSpec,
    *,
    echo: Echo | None = None,
    log_file: Path | None = None,
    strip_env_prefixes: Sequence[str] = (),
    own_session: bool = False,
    max_lines: int | None = None,
) -> ServiceProcess:
    """Start ``spec`` and its output reader; returns at once (see :meth:`ServiceProcess.wait_serving`).

    ``echo(name, line)`` sees each output line as it arrives; ``log_file`` gets a copy of them.
    ``strip_env_prefixes`` are removed from the parent's environment unless the spec inherits it.
    ``own_session`` puts the child in a new session, so a terminal's Ctrl-C reaches only the parent, which
    then decides how its children stop (``make run``). ``max_lines`` bounds the lines kept in memory.
    """
    base = dict(os.environ) if spec.inherit_env else clean_env(strip_env_prefixes)
    env = {**base, "PYTHONUNBUFFERED": "1", **spec.env}
    if spec.profile is not None:
        spec.profile.parent.mkdir(parents=True, exist_ok=True)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.write_text("")
    proc = subprocess.Popen(
        spec.argv(),
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=own_session,
    )
    service = ServiceProcess(spec, proc, LogCapture(spec.name, max_lines))
    with _live_lock:
        _live.add(service)
    assert proc.stdout is not None
    service._reader = threading.Thread(
        target=service._read, args=(proc.stdout, echo, log_file), name=f"harness-{spec.name}", daemon=True
    )
    service._reader.start()
    return service


def start(
    spec: ServiceSpec,
    *,
    timeout: float = 60.0,
    echo: Echo | None = None,
    log_file: Path | None = None,
    strip_env_prefixes: Sequence[str] = (),
) -> ServiceProcess:
    """:func:`spawn` and wait until SERVING; on any failure the process is stopped before re-raising."""
    service = spawn(spec, echo=echo, log_file=log_file, strip_env_prefixes=strip_env_prefixes)
    try:
        service.wait_serving(timeout)
    except BaseException:
        service.stop(5)
        raise
    return service


async def start_async(
    spec: ServiceSpec,
    *,
    timeout: float = 60.0,
    log_file: Path | None = None,
    strip_env_prefixes: Sequence[str] = (),
) -> ServiceProcess:
    """:func:`start` for asyncio callers."""
    return await asyncio.to_thread(
        start, spec, timeout=timeout, log_file=log_file, strip_env_prefixes=strip_env_prefixes
    )


@dataclass(frozen=True)
class TlsFiles:
    """The mesh's mutual-TLS files (``MAILMESH_TLS_*``), as the harness's own channels present them."""

    cert: str
    key: str
    ca: str
    server_name: str = ""

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A blocking TLS channel to ``address`` presenting the certificate."""
        credentials = grpc.ssl_channel_credentials(
            root_certificates=Path(self.ca).read_bytes(),
            private_key=Path(self.key).read_bytes(),
            certificate_chain=Path(self.cert).read_bytes(),
        )
        name = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(address, credentials, options=[*options, *name])


def tls_files(env: Mapping[str, str]) -> TlsFiles | None:
    """The TLS files ``env`` gives every service, or None when the mesh runs plaintext."""
    cert, key, ca = (env.get(f"MAILMESH_TLS_{part}", "") for part in ("CERT", "KEY", "CA"))
    if not (cert and key and ca):
        return None
    return TlsFiles(cert, key, ca, env.get("MAILMESH_TLS_SERVER_NAME", ""))


def wait_serving(
    address: str,
    health: str,
    timeout: float,
    *,
    alive: Callable[[], None] | None = None,
    cancel: threading.Event | None = None,
    tls: TlsFiles | None = None,
) -> None:
    """Block on ``grpc.health.v1`` ``Watch`` at ``address`` until ``health`` is SERVING.

    ``alive()`` is called before each wait and should raise if the process behind ``address`` is gone.
    Raises ``TimeoutError`` after ``timeout`` seconds; returns quietly once ``cancel`` is set. ``tls``: the
    mesh runs mutual TLS (grpc.health.v1 needs no token, docs/security.md).
    """
    deadline = time.monotonic() + timeout
    request = health_pb2.HealthCheckRequest(service=health)
    channel = (
        grpc.insecure_channel(address, options=_HEALTH_CHANNEL_OPTIONS)
        if tls is None
        else tls.channel(address, _HEALTH_CHANNEL_OPTIONS)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while cancel is None or not cancel.is_set():
            if alive is not None:
                alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{health or 'server'} at {address} not SERVING within {timeout} s")
            # Waits for the connection (wait_for_ready), then for each status change the server pushes.
            call = stub.Watch(request, timeout=min(remaining, _WATCH_SLICE_S), wait_for_ready=True)
            try:
                for update in call:
                    if update.status == health_pb2.HealthCheckResponse.SERVING:
                        return
            except grpc.RpcError:
                continue  # not listening yet, or this slice ended: check the process, then watch again
            finally:
                call.cancel()


def scrape_metrics(port: int, host: str = "127.0.0.1") -> Samples:
    """A service's Prometheus ``/metrics``: ``{(sample name, sorted label pairs): value}``."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@atexit.register
def _kill_leftovers() -> None:
    """A test run that dies half-way must not leave services running: SIGKILL whatever is still alive."""
    with _live_lock:
        leftovers = list(_live)
    for service in leftovers:
        with contextlib.suppress(OSError):
            service.proc.kill()
