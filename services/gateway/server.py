"""The gateway from its config: upstream channels and shared state (:func:`connect`), then the gRPC server
(``grpc.health.v1`` only) with the HTTP server as its start hook (:func:`build`).

Start-up: the gRPC port answers health NOT_SERVING; the start hook binds the HTTP socket and starts uvicorn
in this event loop; only then does health report SERVING (so the harness and Kubernetes probes see the REST
API ready). Shutdown (SIGTERM, meshcore's sequence): health goes NOT_SERVING; long polls answer at once and
SSE streams end with a final comment; uvicorn stops accepting and waits for the requests in flight (within
the shutdown grace); then the upstream channels close. The process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass, field

import uvicorn
from fastapi import FastAPI
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from meshcore import MeshServer, build_server
from meshcore.auth import Tokens, load_tokens
from meshcore.security import ChannelSecurity
from services.gateway.app import build_app
from services.gateway.clients import Upstream
from services.gateway.config import Config
from services.gateway.fanout import EventHub
from services.gateway.metrics import GatewayMetrics
from services.gateway.state import GatewayState

__all__ = ["Deps", "HttpServer", "build", "connect"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deps:
    """What the server needs besides its config."""

    state: GatewayState
    tokens: Tokens | None = None
    """The mesh's bearer tokens (``MAILMESH_AUTH=token``); None = the REST API is open."""
    registry: CollectorRegistry = REGISTRY
    tracer_provider: trace.TracerProvider | None = field(default=None)


def connect(
    cfg: Config,
    *,
    registry: CollectorRegistry = REGISTRY,
    tracer_provider: trace.TracerProvider | None = None,
    security: ChannelSecurity | None = None,
) -> Deps:
    """Open the upstream channels and build the shared state (call from the event loop).

    The REST API checks the tokens of ``cfg.runtime.security`` (the same as every gRPC service); the
    channels carry ``security`` (None = the process default :func:`meshcore.setup_observability` installs:
    this service's TLS certificate and service token).
    """
    metrics = GatewayMetrics.for_registry(registry)
    upstream = Upstream(cfg, registry=registry, tracer_provider=tracer_provider, security=security)
    hub = EventHub(upstream, metrics, capacity=cfg.sse_client_buffer)
    state = GatewayState(cfg=cfg, upstream=upstream, hub=hub, metrics=metrics)
    return Deps(state, load_tokens(cfg.runtime.security), registry, tracer_provider)


def _plain(record: logging.LogRecord) -> bool:
    """Drop uvicorn's ``color_message`` extra (ANSI escapes) from our JSON lines."""
    record.__dict__.pop("color_message", None)
    return True


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the gateway's MeshServer owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]
        yield


class HttpServer:
    """uvicorn serving the app on a socket bound before it starts (so port 0 is known at once)."""

    def __init__(self, app: FastAPI, cfg: Config) -> None:
        self._app = app
        self._cfg = cfg
        self._server: _Uvicorn | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0
        """The bound port (the real one when the config asked for 0)."""

    async def start(self) -> None:
        """Bind, listen, serve in a task."""
        cfg = self._cfg
        family = socket.AF_INET6 if ":" in cfg.http_host else socket.AF_INET
        # IPPROTO_TCP, not the default 0: asyncio disables Nagle on an accepted connection only when the
        # socket says it is TCP (base_events._set_nodelay checks ``sock.proto``), and accepted sockets inherit
        # the listener's. With Nagle on, an answer written as head + body waits for the client's delayed ACK
        # of the head on a keep-alive connection: 40 ms added to long polls, /health and SSE frames.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((cfg.http_host.strip("[]"), cfg.http_port))
        except OSError as err:
            sock.close()
            raise OSError(f"cannot listen for HTTP on {cfg.http_host}:{cfg.http_port}: {err}") from err
        sock.listen(1024)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            log_config=None,  # our JSON logging (meshcore.logging) gets uvicorn's records too
            access_log=False,  # the gateway writes its own (ObserveMiddleware): no query strings
            lifespan="off",
            proxy_headers=True,
            forwarded_allow_ips=cfg.forwarded_allow_ips or None,
            server_header=False,
            timeout_graceful_shutdown=max(int(cfg.runtime.shutdown_grace_s) - 1, 1),
            timeout_keep_alive=30,
            backlog=1024,
        )
        logging.getLogger("uvicorn.error").addFilter(_plain)
        self._server = _Uvicorn(config)
        self._task = asyncio.get_running_loop().create_task(
            self._server.serve(sockets=[sock]), name="uvicorn"
        )
        _log.info("REST API on %s:%d", cfg.http_host, self.port, extra={"http_port": self.port})

    @property
    def connections(self) -> int:
        """HTTP connections open now (uvicorn's count; a connection leaves it when its client closes)."""
        return len(self._server.server_state.connections) if self._server is not None else 0

    def connection_sockets(self) -> list[socket.socket]:
        """The sockets of the HTTP connections open now (their options, for tests and diagnostics)."""
        if self._server is None:
            return []
        found = (c.transport.get_extra_info("socket") for c in self._server.server_state.connections)
        return [sock for sock in found if sock is not None]

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish (uvicorn's graceful shutdown), return when done."""
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        await self._task


def build(cfg: Config, deps: Deps) -> tuple[MeshServer, HttpServer]:
    """The bound (not started) gRPC server, with the HTTP server as its start hook; ports 0 allowed."""
    state = deps.state
    http = HttpServer(build_app(state, deps.tokens, tracer_provider=deps.tracer_provider), cfg)
    mesh = build_server(cfg.runtime, [], registry=deps.registry, tracer_provider=deps.tracer_provider)
    mesh.add_start_hook(http.start)

    async def stop_http() -> None:
        await state.shutdown()
        await http.stop()

    mesh.add_shutdown_hook(stop_http)
    mesh.add_shutdown_hook(state.upstream.close, after_drain=True)
    return mesh, http
