"""Prometheus metrics for gRPC, named exactly as go-grpc-prometheus names them.

Dashboards and alerts written for Go services (``grpc_server_handled_total{grpc_code="NotFound"}``)
then work unchanged: same metric names, same labels (``grpc_type`` ∈ {unary, client_stream,
server_stream, bidi_stream}, ``grpc_service``, ``grpc_method``, ``grpc_code``), Go's code
spelling (:data:`meshcore.codes.GO_CODE_NAMES`) and Go's default histogram buckets.

Metric sets are objects bound to a :class:`~prometheus_client.CollectorRegistry`: production uses
the process-wide default registry, tests pass a private one so assertions never see another
test's counts. Domain metrics (``mailserver_*``, ``waku_*``) belong in each service's own
metrics module, registered in the same registry.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import ClassVar, Self
from wsgiref.simple_server import WSGIServer

import grpc
from google.protobuf import descriptor_pool
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.exposition import start_http_server

from meshcore.codes import GO_CODE_NAMES, go_code_name

__all__ = [
    "ClientMetrics",
    "MetricsHttpServer",
    "PerRegistry",
    "RpcMetrics",
    "ServerMetrics",
    "grpc_type",
    "split_method",
    "start_metrics_server",
]

# prometheus.DefBuckets from client_golang: what go-grpc-prometheus's histogram uses by default.
# prometheus_client's defaults add 0.075/0.75/7.5, which would break cross-language dashboards.
GO_DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_LABELS = ("grpc_type", "grpc_service", "grpc_method")


def grpc_type(request_streaming: bool, response_streaming: bool) -> str:
    """Return go-grpc-prometheus's ``grpc_type`` label for an RPC's streaming shape."""
    if request_streaming:
        return "bidi_stream" if response_streaming else "client_stream"
    return "server_stream" if response_streaming else "unary"


def split_method(full_method: str) -> tuple[str, str]:
    """Split ``/pkg.Service/Method`` into ``("pkg.Service", "Method")``."""
    service, sep, method = full_method.lstrip("/").rpartition("/")
    return (service, method) if sep else ("unknown", full_method)


class PerRegistry:
    """Base of a metric set: one instance per ``CollectorRegistry``, shared by everything in the process.

    A registry refuses a second metric with the same name, so every server, channel or component of a
    process must share the set; :meth:`for_registry` is the way to get it. Each subclass keeps its own
    instances (tests give each service its own registry).
    """

    _instances: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, PerRegistry]]
    _lock: ClassVar[threading.Lock]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._instances = weakref.WeakKeyDictionary()
        cls._lock = threading.Lock()

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.registry = registry

    @classmethod
    def for_registry(cls, registry: CollectorRegistry = REGISTRY) -> Self:
        """Return the one instance for ``registry``, creating it on first use."""
        with cls._lock:
            instance = cls._instances.get(registry)
            if instance is None:
                instance = cls._instances[registry] = cls(registry)
            return instance  # type: ignore[return-value]


class RpcMetrics:
    """The metric children for one (type, service, method); an interceptor reports into it.

    Children are resolved once per method rather than per call, which keeps the label lookups
    (and their lock) off the per-call path.
    """

    __slots__ = ("_handled", "_handled_by_code", "_labels", "_received", "_seconds", "_sent", "_started")

    def __init__(self, metrics: GrpcMetrics, labels: tuple[str, str, str]) -> None:
        self._labels = labels
        self._started = metrics.started.labels(*labels)
        self._received = metrics.msg_received.labels(*labels)
        self._sent = metrics.msg_sent.labels(*labels)
        self._seconds = metrics.handling_seconds.labels(*labels)
        self._handled = metrics.handled
        self._handled_by_code: dict[grpc.StatusCode, Counter] = {}

    def started(self) -> None:
        """Count an RPC that began."""
        self._started.inc()

    def received(self) -> None:
        """Count one message received (request on a server, response on a client)."""
        self._received.inc()

    def sent(self) -> None:
        """Count one message sent (response on a server, request on a client)."""
        self._sent.inc()

    def handled(self, code: grpc.StatusCode, seconds: float) -> None:
        """Count an RPC that finished with ``code`` after ``seconds``."""
        self._handled_child(code).inc()
        self._seconds.observe(seconds)

    def initialize(self) -> None:
        """Create every series of this method at 0, ``grpc_code`` included, for each of the 17 codes."""
        for code in GO_CODE_NAMES:
            self._handled_child(code)

    def _handled_child(self, code: grpc.StatusCode) -> Counter:
        child = self._handled_by_code.get(code)
        if child is None:
            child = self._handled_by_code[code] = self._handled.labels(*self._labels, go_code_name(code))
        return child


class GrpcMetrics(PerRegistry):
    """The five go-grpc-prometheus metrics for one side (``server`` or ``client``) in one registry."""

    side: ClassVar[str]

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        super().__init__(registry)
        side = self.side
        self.started = Counter(
            f"grpc_{side}_started_total",
            f"Total number of RPCs started on the {side}.",
            _LABELS,
            registry=registry,
        )
        self.handled = Counter(
            f"grpc_{side}_handled_total",
            f"Total number of RPCs completed on the {side}, regardless of success or failure.",
            (*_LABELS, "grpc_code"),
            registry=registry,
        )
        self.msg_received = Counter(
            f"grpc_{side}_msg_received_total",
            f"Total number of RPC stream messages received on the {side}.",
            _LABELS,
            registry=registry,
        )
        self.msg_sent = Counter(
            f"grpc_{side}_msg_sent_total",
            f"Total number of gRPC stream messages sent by the {side}.",
            _LABELS,
            registry=registry,
        )
        self.handling_seconds = Histogram(
            f"grpc_{side}_handling_seconds",
            # Help texts follow go-grpc-prometheus so side-by-side exports read the same.
            "Histogram of response latency (seconds) of gRPC that had been application-level handled "
            f"by the {side}.",
            _LABELS,
            registry=registry,
            buckets=GO_DEFAULT_BUCKETS,
        )
        self._by_method: dict[tuple[str, str], RpcMetrics] = {}

    def rpc(self, full_method: str, rpc_type: str) -> RpcMetrics:
        """Return the metric children for ``full_method`` (``/pkg.Service/Method``) of ``rpc_type``."""
        key = (full_method, rpc_type)
        found = self._by_method.get(key)
        if found is None:
            service, method = split_method(full_method)
            found = self._by_method[key] = RpcMetrics(self, (rpc_type, service, method))
        return found


class ServerMetrics(GrpcMetrics):
    """``grpc_server_*`` metrics, fed by :class:`meshcore.interceptors.MeshServerInterceptor`."""

    side = "server"

    def initialize(self, service_names: Iterable[str]) -> None:
        """Create the series of every method of ``service_names`` at 0, as go-grpc-prometheus's
        ``InitializeMetrics(server)`` does (``server_metrics.go``, ``preRegisterMethod``).

        Without it a series appears only with its first event, and ``rate()``/``increase()`` miss that
        event: the first ``Internal`` of a method would never fire an error-ratio alert, and a dashboard
        shows "No data" instead of 0. Methods come from the protobuf descriptors of the generated code
        (what reflection serves); a name with no descriptor (a generic handler in a test) is skipped.
        """
        pool = descriptor_pool.Default()
        for name in service_names:
            try:
                service = pool.FindServiceByName(name)
            except KeyError:
                continue
            for method in service.methods:
                rpc_type = grpc_type(method.client_streaming, method.server_streaming)
                self.rpc(f"/{name}/{method.name}", rpc_type).initialize()


class ClientMetrics(GrpcMetrics):
    """``grpc_client_*`` metrics, fed by :class:`meshcore.clients.ClientMetricsInterceptor`."""

    side = "client"


class MetricsHttpServer:
    """A ``/metrics`` HTTP endpoint on its own port, in a daemon thread, that can be closed."""

    def __init__(self, port: int, *, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY) -> None:
        self._requested = port
        self._host = host.strip("[]")  # sockets want a bare IPv6 literal, gRPC wants brackets
        self._registry = registry
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    def start(self) -> int:
        """Bind and serve; returns the bound port (the real one when 0 was asked for)."""
        # _created series are a Python-client addition Go never emits; drop them so the
        # exposition matches what Go services' dashboards expect.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self._server, self._thread = start_http_server(
            self._requested, addr=self._host, registry=self._registry
        )
        self.port = int(self._server.server_port)
        return self.port

    def close(self) -> None:
        """Stop serving and release the port (blocks for up to the server's 0.5 s poll interval)."""
        httpd, thread = self._server, self._thread
        self._server = self._thread = None
        if httpd is not None and thread is not None:
            httpd.shutdown()
            httpd.server_close()
            thread.join()


def start_metrics_server(
    port: int, *, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY
) -> int:
    """Serve ``registry`` on ``host:port`` for the life of the process; returns the bound port.

    Use :class:`MetricsHttpServer` directly when the endpoint must be closed again
    (:class:`meshcore.server.MeshServer` does).
    """
    return MetricsHttpServer(port, host=host, registry=registry).start()
