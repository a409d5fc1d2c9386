"""Client channels over a service's replicas: the channel target, round-robin, keepalive.

A service's address setting (``INGEST_ARCHIVE_ADDR`` …, parsed by
:func:`meshcore.parsers.parse_grpc_target`) names one service that may run several replicas.
:func:`channel_target` turns it into a gRPC target — a list of IP addresses becomes one ``ipv4:``/``ipv6:``
multi-address target (grpc doc/naming.md), a name stays a ``dns`` name — and every channel balances its calls
``round_robin`` over the addresses it has (gRPC load-balancing policies; a DNS name of a headless Service
resolves to every pod). Round-robin keeps a connection to each replica and picks only connected ones, so a
replica that dies drops out of the rotation as soon as its connection closes, and an idempotent call that
failed on it is retried on another (the retry policy in :func:`meshcore.clients.service_config`).

A replica that stops answering without closing its connection (a partition, a hung host) is noticed by
keepalive: the client pings after :attr:`Keepalive.time_s` without traffic and drops the connection when the
ping is not answered within :attr:`Keepalive.timeout_s` (gRFC A8). grpcio 1.85 ends the connection only on
its ping timeout (``grpc.http2.ping_timeout_ms``, 60 s by default) and not on ``grpc.keepalive_timeout_ms``
alone (measured: a black-holed connection stayed READY past the keepalive timeout), so both are set. Servers
must accept pings that often, or they answer GOAWAY ``too_many_pings`` (grpc doc/keepalive.md):
:func:`server_keepalive_options` is what :func:`meshcore.server.build_server` sets.

The keepalive is one setting for the whole process (``MAILMESH_GRPC_KEEPALIVE_*``, applied by
:func:`meshcore.server.setup_observability`), like the global tracer provider: every channel the process
opens afterwards uses it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from meshcore.parsers import is_grpc_uri, parse_grpc_target, parse_host_port

__all__ = [
    "DEFAULT_KEEPALIVE",
    "Keepalive",
    "channel_target",
    "client_keepalive_options",
    "current_keepalive",
    "server_age_options",
    "server_keepalive_options",
    "set_keepalive",
]


@dataclass(frozen=True)
class Keepalive:
    """When an idle connection is pinged, and how long the ping may go unanswered."""

    time_s: float = 10.0
    """Ping after this many seconds without traffic on the connection."""
    timeout_s: float = 5.0
    """Drop the connection (its calls fail UNAVAILABLE) when a ping is not answered within this."""

    def __post_init__(self) -> None:
        if self.time_s <= 0 or self.timeout_s <= 0:
            raise ValueError("keepalive time and timeout must be > 0")


DEFAULT_KEEPALIVE = Keepalive()
"""10 s / 5 s: a silent replica is dropped within about 15 s; idle channels send one small ping every 10 s."""

_process_keepalive = DEFAULT_KEEPALIVE


def set_keepalive(keepalive: Keepalive) -> None:
    """Use ``keepalive`` for every channel this process opens from now on."""
    global _process_keepalive  # one setting for the whole process (module docstring)
    _process_keepalive = keepalive


def current_keepalive() -> Keepalive:
    """The keepalive new channels get (:data:`DEFAULT_KEEPALIVE` until :func:`set_keepalive`)."""
    return _process_keepalive


def channel_target(address: str) -> str:
    """The gRPC target for an address setting's value (see :func:`meshcore.parsers.parse_grpc_target`).

    ``10.0.0.1:1,10.0.0.2:1`` becomes ``ipv4:10.0.0.1:1,10.0.0.2:1`` (``ipv6:[…]:1,[…]:2`` for IPv6); one
    ``host:port`` or a URI is returned as it is. Raises ``ValueError`` for what the parser refuses.
    """
    text = parse_grpc_target(address)
    if "," not in text or is_grpc_uri(text):
        return text
    first = parse_host_port()(text.split(",", 1)[0])
    return f"ipv{ipaddress.ip_address(first.host).version}:{text}"  # the parser checked: one IP family


def client_keepalive_options(keepalive: Keepalive | None = None) -> list[tuple[str, Any]]:
    """Channel arguments for ``keepalive`` (None: the process's, :func:`current_keepalive`)."""
    k = keepalive if keepalive is not None else _process_keepalive
    time_ms, timeout_ms = int(k.time_s * 1000), int(k.timeout_s * 1000)
    return [
        ("grpc.keepalive_time_ms", time_ms),
        ("grpc.keepalive_timeout_ms", timeout_ms),
        ("grpc.http2.ping_timeout_ms", timeout_ms),  # what ends the connection in grpcio 1.85 (module doc)
        # Idle channels and long quiet streams (WatchHealth) are checked too; the default (2 pings, then
        # none until data is sent) would stop checking exactly the connections that only wait.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]


def server_keepalive_options(keepalive: Keepalive | None = None) -> list[tuple[str, Any]]:
    """Server arguments: accept the clients' pings (twice as often as they send them, for jitter) and ping
    idle clients the same way, so the streams of a client that vanished are ended too."""
    k = keepalive if keepalive is not None else _process_keepalive
    return [
        ("grpc.http2.min_ping_interval_without_data_ms", int(k.time_s * 500)),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.keepalive_time_ms", int(k.time_s * 1000)),
        ("grpc.keepalive_timeout_ms", int(k.timeout_s * 1000)),
        ("grpc.http2.ping_timeout_ms", int(k.timeout_s * 1000)),
    ]


def server_age_options(max_age_s: float) -> list[tuple[str, Any]]:
    """Server arguments for a maximum connection age (gRFC A9; none when ``max_age_s`` is 0).

    A client balancing over a DNS name (a headless Service) resolves it again only when a connection ends,
    so without an age it never learns of replicas added after it connected, and a scaled-up Deployment's
    new pods take no calls from the old clients. The grace stays gRPC's default (unbounded): the GOAWAY
    only stops new calls on the connection, so long streams (WatchHealth, StreamEvents,
    WatchSendStatuses) are never cut by it.
    """
    if max_age_s <= 0:
        return []
    return [("grpc.max_connection_age_ms", int(max_age_s * 1000))]
