"""Server bootstrap: one call builds a gRPC server with everything a Mailmesh service needs.

:func:`build_server` creates the ``grpc.aio`` server with the shared interceptors (tracing,
metrics, error mapping), the stock ``grpc.health.v1`` servicer, server reflection, message-size
limits, and binds the port (0 allowed). :class:`MeshServer` then runs it: ``start()``,
``stop()`` with a graceful sequence, and ``serve_forever()`` which stops on SIGTERM or SIGINT.
:func:`run_service` is the ``__main__`` entry: exit 0 after a clean stop, 2 on bad config.

Start-up, in order: the server starts with health NOT_SERVING for everything; start hooks run (open a store,
start background loops); then health reports each service as the hooks left it — SERVING unless a hook held
it NOT_SERVING with :meth:`MeshServer.set_serving` (say, a store that did not open yet: the hook starts a
retry loop that reports SERVING later). Health has one source of truth, so ``start()`` can never overwrite a
hook's NOT_SERVING with SERVING, whichever of the two reports first.

The graceful sequence, in order (docs/design.md "Graceful shutdown"; docs/platform-notes.md "gRPC in Python"):

1. health goes NOT_SERVING for every service, so readiness probes fail and traffic drains;
2. shutdown hooks run (stop intake: close listeners, stop background loops);
3. ``server.stop(grace)``: new RPCs are refused, in-flight ones get ``grace`` seconds;
4. after-drain hooks run (flush buffers and close stores once no handler can touch them);
5. the metrics endpoint closes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NoReturn, Self, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import REGISTRY, CollectorRegistry

from meshcore.auth import AuthInterceptor, TlsOnlyInterceptor, load_tokens
from meshcore.balancing import Keepalive, server_age_options, server_keepalive_options, set_keepalive
from meshcore.config import ConfigError, RuntimeConfig
from meshcore.heap import settle_heap
from meshcore.interceptors import MeshServerInterceptor
from meshcore.logging import setup_logging
from meshcore.metrics import MetricsHttpServer, ServerMetrics
from meshcore.security import ChannelSecurity, install_channel_security, server_credentials
from meshcore.tracing import ServerSpans, setup_tracing

__all__ = [
    "MeshServer",
    "Registration",
    "ShutdownHook",
    "StartHook",
    "build_server",
    "run_service",
    "setup_observability",
]

S = TypeVar("S")
ShutdownHook = Callable[[], Awaitable[None]]
"""An async callable run during graceful shutdown (flush a buffer, close a store)."""
StartHook = Callable[[], Awaitable[None]]
"""An async callable run by ``start()`` before health reports SERVING (open a store, start a loop)."""

_log = logging.getLogger(__name__)
_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@dataclass(frozen=True)
class Registration:
    """One gRPC service to serve: its full name (``mailmesh.archive.v1.Archive``) and how to add it."""

    service_name: str
    add_to_server: Callable[[grpc.aio.Server], None]

    @classmethod
    def of(cls, service_name: str, add_fn: Callable[[S, grpc.aio.Server], None], servicer: S) -> Registration:
        """Build from a generated ``add_XServicer_to_server`` function and the servicer instance."""
        return cls(service_name, functools.partial(add_fn, servicer))


def _keepalive(runtime: RuntimeConfig) -> Keepalive:
    return Keepalive(runtime.grpc_keepalive_s, runtime.grpc_keepalive_timeout_s)


def setup_observability(runtime: RuntimeConfig, *, set_global: bool = True) -> TracerProvider:
    """Set up logging, tracing, keepalive and the channels' credentials from ``runtime``; returns the
    tracer provider.

    Every channel :func:`meshcore.clients.make_channel` opens afterwards carries this service's TLS
    certificate and service token (:mod:`meshcore.security`) and the process's gRPC keepalive
    (:func:`meshcore.balancing.set_keepalive`): every service calls this first, before it opens any.
    """
    setup_logging(runtime.service_name, runtime.log_level, runtime.log_format)
    install_channel_security(ChannelSecurity.from_config(runtime.security))
    set_keepalive(_keepalive(runtime))
    return setup_tracing(runtime.service_name, runtime.otlp_endpoint, set_global=set_global)


def build_server(
    runtime: RuntimeConfig,
    registrations: Sequence[Registration],
    *,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tracer_provider: trace.TracerProvider | None = None,
    registry: CollectorRegistry = REGISTRY,
    options: Sequence[tuple[str, Any]] = (),
) -> MeshServer:
    """Create and bind a server for ``registrations`` as ``runtime`` says; call ``start()`` next.

    ``interceptors`` run innermost, after tracing, metrics, error mapping and (token auth on) the
    :class:`~meshcore.auth.AuthInterceptor`; the port is mutual TLS when configured. ``tracer_provider``
    None means the global one (:func:`setup_tracing` installs it); ``registry`` receives the
    gRPC metrics and is what the metrics endpoint serves; ``options`` are extra channel args.
    Call it from a coroutine: grpc.aio binds the server to the running event loop.
    """
    metrics = ServerMetrics.for_registry(registry)
    names = [r.service_name for r in registrations]
    served = [*names, health.SERVICE_NAME, reflection.SERVICE_NAME]
    metrics.initialize(served)
    # Tracing, metrics and error mapping are one layer: each grpc.aio interceptor costs every call.
    chain: list[grpc.aio.ServerInterceptor] = [MeshServerInterceptor(metrics, ServerSpans(tracer_provider))]
    credentials = server_credentials(runtime.security)
    probe = credentials is not None and runtime.probe_port >= 0
    if probe:
        chain.append(TlsOnlyInterceptor())
    tokens = load_tokens(runtime.security)
    if tokens is not None:
        chain.append(AuthInterceptor(tokens))
    chain.extend(interceptors)
    server = grpc.aio.server(
        interceptors=chain,
        options=[
            # On by default on Linux: two servers could then share a port without noticing.
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", runtime.max_message_bytes),
            ("grpc.max_send_message_length", runtime.max_message_bytes),
            *server_keepalive_options(_keepalive(runtime)),
            *server_age_options(runtime.grpc_max_connection_age_s),
            *options,
        ],
        maximum_concurrent_rpcs=runtime.max_concurrent_rpcs or None,
    )
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for registration in registrations:
        registration.add_to_server(server)
    reflection.enable_server_reflection(served, server)
    address = f"{runtime.grpc_host}:{runtime.grpc_port}"
    probe_address = f"{runtime.grpc_host}:{runtime.probe_port}"
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
        probe_port = server.add_insecure_port(probe_address) if probe else None
    except RuntimeError as err:
        raise OSError(f"cannot listen for gRPC on {address} (probes: {probe_address}): {err}") from err
    mesh = MeshServer(server, health_servicer, port, names, runtime, registry)
    mesh.probe_port = probe_port
    return mesh


class MeshServer:
    """A built, bound server: start it, stop it gracefully, or serve until a signal."""

    def __init__(
        self,
        server: grpc.aio.Server,
        health_servicer: Any,
        port: int,
        service_names: Sequence[str],
        runtime: RuntimeConfig,
        registry: CollectorRegistry,
    ) -> None:
        self._server = server
        self._health = health_servicer
        self.port = port
        """The bound gRPC port (the real one when the config asked for 0)."""
        self.probe_port: int | None = None
        """The bound plaintext health-only port (mutual TLS with ``<PREFIX>_GRPC_PROBE_PORT``), else None."""
        self.service_names = tuple(service_names)
        self._runtime = runtime
        self._metrics = (
            MetricsHttpServer(runtime.metrics_port, host=runtime.grpc_host, registry=registry)
            if runtime.metrics_port >= 0
            else None
        )
        self._start_hooks: list[StartHook] = []
        self._hooks: list[ShutdownHook] = []
        self._after_drain: list[ShutdownHook] = []
        # What health reports per service once started ("" is the whole server); set_serving writes it.
        self._serving: dict[str, bool] = dict.fromkeys(("", *self.service_names), True)
        self._health_published = False
        self._health_lock = asyncio.Lock()  # one writer: start() publishing or a hook's loop reporting
        self._started = False
        self._settle = False  # serve_forever(settle=True): settle the heap before health reports SERVING
        self._stop_requested = asyncio.Event()
        self._stopped: asyncio.Future[None] | None = None
        self._force_stop: asyncio.Task[None] | None = None

    @property
    def grpc_server(self) -> grpc.aio.Server:
        """The underlying ``grpc.aio.Server``."""
        return self._server

    @property
    def metrics_port(self) -> int | None:
        """The bound metrics port once started, or None when metrics are disabled or not started."""
        return self._metrics.port if self._metrics is not None and self._metrics.port else None

    def add_shutdown_hook(self, hook: ShutdownHook, *, after_drain: bool = False) -> None:
        """Run ``hook`` during graceful shutdown, before the server stops or (``after_drain``) after.

        Before: in-flight RPCs are still running and new ones may still arrive (use it to stop
        intake). After: no handler runs any more (use it to flush and close what they wrote to).
        Hooks run in the order added, each bounded by the shutdown grace; a failing hook is
        logged and does not stop the others.
        """
        (self._after_drain if after_drain else self._hooks).append(hook)

    def add_start_hook(self, hook: StartHook) -> None:
        """Run ``hook`` in :meth:`start` before health reports SERVING; hooks run in the order added.

        The server already answers meanwhile (health says NOT_SERVING), so a handler must cope with what the
        hook has not done yet (the archive answers UNAVAILABLE until its store is open).

        A hook may hold a service NOT_SERVING with :meth:`set_serving` (it stays so until set SERVING again,
        typically by a retry loop the hook started; stop such loops with a shutdown hook). A hook that
        raises fails ``start()``: the server is stopped gracefully (shutdown hooks run) and the error
        propagates.
        """
        self._start_hooks.append(hook)

    async def set_serving(self, service: str, serving: bool) -> None:
        """Report ``service`` (or "" for the whole server) as SERVING or NOT_SERVING to health checks.

        Before :meth:`start` has published health (from a start hook, say) this only records the state, which
        ``start()`` then reports instead of SERVING.
        """
        async with self._health_lock:
            self._serving[service] = serving
            if self._health_published:
                await self._health.set(service, _SERVING if serving else _NOT_SERVING)

    async def start(self) -> None:
        """Start serving, run the start hooks, report health (see the module docstring), open metrics."""
        for name in self._serving:
            await self._health.set(name, _NOT_SERVING)  # until the start hooks have run
        try:
            await self._server.start()
            await _run_start_hooks(self._start_hooks)
        except BaseException:
            await self.stop()
            raise
        self._started = True
        if self._settle:
            # Before SERVING: the collection it runs (~20 ms over start-up's heap) delays no caller's call.
            settle_heap()
        async with self._health_lock:
            self._health_published = True
            for name, serving in self._serving.items():
                await self._health.set(name, _SERVING if serving else _NOT_SERVING)
        if self._metrics is not None:
            self._metrics.start()
        _log.info(
            "serving %s on port %d",
            ", ".join(self.service_names) or "(no services)",
            self.port,
            extra={"grpc_port": self.port, "metrics_port": self.metrics_port},
        )

    def request_shutdown(self) -> None:
        """Ask :meth:`serve_forever` to shut down gracefully (what the signal handlers do)."""
        self._stop_requested.set()

    async def stop(self, grace: float | None = None) -> None:
        """Shut down gracefully (see the module docstring); ``grace`` defaults to the config's.

        Safe to call more than once or concurrently: later calls wait for the first to finish.
        """
        self._stop_requested.set()
        if self._stopped is None:
            self._stopped = asyncio.get_running_loop().create_future()
            try:
                await self._shutdown(self._runtime.shutdown_grace_s if grace is None else grace)
            finally:
                self._stopped.set_result(None)
        else:
            await asyncio.shield(self._stopped)

    async def _shutdown(self, grace: float) -> None:
        _log.info("shutting down; in-flight RPCs get %.1f s", grace)
        await self._health.enter_graceful_shutdown()
        await _run_hooks(self._hooks, grace)
        await self._server.stop(grace)
        await _run_hooks(self._after_drain, grace)
        if self._metrics is not None:
            await asyncio.to_thread(self._metrics.close)
        _log.info("stopped")

    async def serve_forever(self, *, settle: bool = True) -> None:
        """Start (if needed), serve until SIGTERM/SIGINT or :meth:`request_shutdown`, then stop gracefully.

        ``settle``: freeze the start-up heap and make young collections rarer
        (:func:`meshcore.heap.settle_heap`) once the start hooks have run, before health reports SERVING (or
        at once when already started) — what a process that serves does; a test running servers inside its
        own process passes False.
        """
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            if not self._started:
                self._settle = settle
                await self.start()
            elif settle:
                settle_heap()  # started by the caller already: settle now, while serving
            await self._stop_requested.wait()
            await self.stop()
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop_requested.is_set():
            # A second Ctrl-C or SIGTERM: stop waiting for in-flight RPCs.
            _log.warning("%s again: cancelling in-flight RPCs now", sig.name)
            # stop(None) while stop(grace) is draining cancels the remaining calls at once.
            # Keep a reference: the loop holds tasks only weakly.
            self._force_stop = asyncio.get_running_loop().create_task(self._server.stop(None))
            return
        _log.info("%s received", sig.name)
        self._stop_requested.set()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def _run_start_hooks(hooks: Iterable[StartHook]) -> None:
    for hook in hooks:
        _log.debug("start hook %s", getattr(hook, "__qualname__", repr(hook)))
        await hook()


async def _run_hooks(hooks: Iterable[ShutdownHook], timeout: float) -> None:
    for hook in hooks:
        name = getattr(hook, "__qualname__", repr(hook))
        try:
            await asyncio.wait_for(hook(), timeout=max(timeout, 0.001))
        except TimeoutError:
            _log.error("shutdown hook %s did not finish within %.1f s", name, timeout)
        except Exception:
            _log.exception("shutdown hook %s failed", name)


def run_service(main: Callable[[], Awaitable[None]]) -> NoReturn:
    """Run ``main`` (typically: load config, build, ``serve_forever``) and exit the process.

    Exit status: 0 after a clean return, 2 for a :class:`~meshcore.config.ConfigError` (printed
    to stderr, every problem listed), 130 for Ctrl-C before signal handling was installed, 1 for
    anything else (logged with its traceback).
    """

    async def runner() -> None:
        await main()

    try:
        asyncio.run(runner())
    except ConfigError as err:
        print(f"{sys.argv[0] or 'service'}: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception:
        # Without handlers (logging not set up yet) logging's last-resort handler still prints
        # this and the traceback to stderr.
        _log.critical("service failed", exc_info=True)
        raise SystemExit(1) from None
    raise SystemExit(0)
