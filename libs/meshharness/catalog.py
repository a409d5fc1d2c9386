"""The services the harness knows how to start: one :class:`ServiceKind` each.

Adding a service to ``make run``, the e2e mesh and the benchmarks is one entry in :data:`CATALOG`: its
module, env prefix, health name, port offset (``make run`` ports are ``50050 + offset`` for gRPC and
``9150 + offset`` for metrics, the defaults each service's config declares) and the services it calls.
A dependency's address reaches it as ``<PREFIX>_<DEPENDENCY PREFIX>_ADDR`` (``INGEST_ARCHIVE_ADDR``), the
convention every service config follows (docs/service-template.md); with several replicas it lists every one
(``127.0.0.1:1,127.0.0.1:2``), which a client balances over (meshcore.balancing) or, where each instance
matters (the health service, the edge peers' callers), addresses one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CATALOG", "ENV_PREFIXES", "ServiceKind", "kind"]


@dataclass(frozen=True, kw_only=True)
class ServiceKind:
    """How to run one kind of service as a process."""

    name: str
    """Catalog key and default instance name (``archive``)."""
    module: str
    """Run as ``python -m <module>``."""
    prefix: str
    """Its env prefix, without the underscore (``ARCHIVE``)."""
    health: str
    """The full gRPC service name it reports SERVING once ready to serve."""
    offset: int
    """Port offset in the fixed layout (``make run``)."""
    needs: tuple[str, ...] = ()
    """Catalog names of the services it calls; they start first and it gets their addresses."""
    observes: tuple[str, ...] = ()
    """Catalog names of services it only looks at (the health service checks every service's
    grpc.health.v1): it gets their addresses too, but need not start after them (they may need it)."""
    state_files: Mapping[str, str] = field(default_factory=dict)
    """Env var -> file name under the mesh's state directory (a database, a key, a secret)."""
    shared_state: frozenset[str] = frozenset()
    """Variables of :attr:`state_files` whose file every replica shares (the history cursor secret, so a
    cursor from one replica is valid on another; the messaging store the send and subscription replicas
    coordinate through). The others are per replica (an edge peer's node key, the archive's SQLite file)."""
    extra_ports: Mapping[str, int] = field(default_factory=dict)
    """Env var -> port in the fixed layout, for listeners besides gRPC and metrics (the devp2p port).
    With free ports each gets a free port, and its ``*_HOST`` twin (``EDGE_LISTEN_HOST``) is loopback."""
    instance_var: str = ""
    """Env var naming the replica (in its logs and metrics) when a mesh runs several."""

    def addr_var(self, dependency: ServiceKind) -> str:
        """The variable that carries ``dependency``'s address to this service."""
        return f"{self.prefix}_{dependency.prefix}_ADDR"


CATALOG: Mapping[str, ServiceKind] = {
    k.name: k
    for k in (
        ServiceKind(
            name="archive",
            module="services.archive",
            prefix="ARCHIVE",
            health="mailmesh.archive.v1.ArchiveService",
            offset=3,
            state_files={"ARCHIVE_SQLITE_PATH": "archive.sqlite3"},
        ),
        ServiceKind(
            name="ingest",
            module="services.ingest",
            prefix="INGEST",
            health="mailmesh.ingest.v1.IngestService",
            offset=2,
            needs=("archive",),
        ),
        ServiceKind(
            name="history",
            module="services.history",
            prefix="HISTORY",
            health="mailmesh.history.v1.HistoryQueryService",
            offset=4,
            needs=("archive",),
            state_files={"HISTORY_CURSOR_SECRET_FILE": "cursor.secret"},
            shared_state=frozenset({"HISTORY_CURSOR_SECRET_FILE"}),
        ),
        ServiceKind(
            name="edge_peer",
            module="services.edge_peer",
            prefix="EDGE",
            health="mailmesh.edgepeer.v1.EdgePeerService",
            offset=1,
            needs=("ingest", "history"),
            state_files={"EDGE_NODE_KEY_FILE": "edge-peer.nodekey"},
            extra_ports={"EDGE_LISTEN_PORT": 30303},
            instance_var="EDGE_INSTANCE",
        ),
        ServiceKind(
            name="health",
            module="services.health",
            prefix="HEALTH",
            health="mailmesh.health.v1.HealthService",
            offset=7,
            needs=("archive", "ingest", "history", "edge_peer"),
            observes=("send", "subscription", "gateway"),
        ),
        ServiceKind(
            name="send",
            module="services.send",
            prefix="SEND",
            health="mailmesh.send.v1.SendService",
            offset=5,
            needs=("edge_peer", "history", "health"),
            observes=("subscription",),  # its active subscriptions (store confirmation); it follows send
            state_files={"MSGSTORE_SQLITE_PATH": "messaging.sqlite3"},
            shared_state=frozenset({"MSGSTORE_SQLITE_PATH"}),
        ),
        ServiceKind(
            name="subscription",
            module="services.subscription",
            prefix="SUBSCRIPTION",
            health="mailmesh.subscription.v1.SubscriptionService",
            offset=6,
            needs=("edge_peer", "history", "health", "send"),
            state_files={"MSGSTORE_SQLITE_PATH": "messaging.sqlite3"},
            shared_state=frozenset({"MSGSTORE_SQLITE_PATH"}),
            instance_var="SUBSCRIPTION_REPLICA_ID",
        ),
        ServiceKind(
            name="gateway",
            module="services.gateway",
            prefix="GATEWAY",
            health="",  # no gRPC service of its own: the whole server goes SERVING once the REST API listens
            offset=8,
            needs=("send", "subscription", "health"),
            extra_ports={"GATEWAY_HTTP_PORT": 8645},
        ),
    )
}
"""Every service, by name."""

ENV_PREFIXES: tuple[str, ...] = tuple(f"{k.prefix}_" for k in CATALOG.values())
"""The env prefixes of every known service (stripped from a parent's environment before a test starts one)."""


def kind(name: str) -> ServiceKind:
    """The catalog entry ``name``; ``KeyError`` lists the known ones."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"unknown service {name!r}; known: {', '.join(CATALOG)}") from None
