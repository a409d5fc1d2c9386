"""Connecting to a Cassandra cluster: the one execution profile, and driver exceptions as :mod:`dbkit.errors`.

Both stores (and the Spark job, which rewrites the archive's partitions itself) build their ``Cluster`` here,
so protocol version, load balancing, consistency, timeouts and reconnection are the same everywhere
(cassandra-driver docs "Execution Profiles", "Load Balancing"; docs/cassandra.md "Sources: Python driver").
"""

from __future__ import annotations

from dataclasses import dataclass

from cassandra import (
    ConsistencyLevel,
    CoordinationFailure,
    OperationTimedOut,
    Timeout,
    Unavailable,
)
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.connection import ConnectionException
from cassandra.policies import DCAwareRoundRobinPolicy, ExponentialReconnectionPolicy, TokenAwarePolicy
from cassandra.protocol import IsBootstrappingErrorMessage, OverloadedErrorMessage
from cassandra.query import tuple_factory

from dbkit.cassandra.credentials import Credentials
from dbkit.errors import DbError, DbUnavailable

__all__ = ["ConnectOptions", "build_cluster", "translate"]

_RETRYABLE: tuple[type[BaseException], ...] = (
    NoHostAvailable,
    OperationTimedOut,
    Unavailable,
    Timeout,  # ReadTimeout, WriteTimeout
    CoordinationFailure,  # ReadFailure, WriteFailure
    ConnectionException,
    OverloadedErrorMessage,
    IsBootstrappingErrorMessage,
    OSError,
)


def translate(err: BaseException, what: str) -> DbError:
    """The :mod:`dbkit.errors` error for a driver exception raised doing ``what`` (raise it ``from err``).

    Retryable (:class:`DbUnavailable`): no host, client or server timeouts, unavailable or failing replicas,
    broken connections, an overloaded or bootstrapping coordinator. Anything else (an invalid request, a
    syntax error) is a :class:`DbError`. A ``DbError`` is returned as it is.
    """
    if isinstance(err, DbError):
        return err
    if isinstance(err, _RETRYABLE):
        return DbUnavailable(f"cassandra unavailable during {what}: {type(err).__name__}: {err}")
    return DbError(f"cassandra error during {what}: {type(err).__name__}: {err}")


@dataclass(frozen=True)
class ConnectOptions:
    """How to reach the cluster and how each request behaves."""

    contact_points: tuple[str, ...]
    port: int
    consistency: int = ConsistencyLevel.LOCAL_QUORUM
    request_timeout: float = 12.0
    connect_timeout: float = 5.0
    local_dc: str | None = None
    max_in_flight: int = 512
    protocol_version: int = 5
    credentials: Credentials | None = None
    """Log in with these (PasswordAuthenticator); None = the cluster has no authenticator."""


def build_cluster(opts: ConnectOptions) -> Cluster:
    """A ``Cluster`` with one explicit execution profile (token-aware, DC-local, configured CL and timeout).

    Token and schema metadata stay enabled: ``TokenAwarePolicy`` needs the token map *and* the keyspace's
    replication (from schema metadata) to pick a replica as coordinator; without them it silently degrades to
    round robin. Reconnection is capped at 10 s (driver default 600 s) so a restarted node is used again
    promptly. With credentials every connection logs in (``PlainTextAuthProvider``, SASL PLAIN).
    """
    creds = opts.credentials
    auth = PlainTextAuthProvider(creds.username, creds.password) if creds is not None else None
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=opts.local_dc)),
        consistency_level=opts.consistency,
        request_timeout=opts.request_timeout,
        row_factory=tuple_factory,  # positional rows: no namedtuple class per result
    )
    return Cluster(
        contact_points=list(opts.contact_points),
        port=opts.port,
        protocol_version=opts.protocol_version,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=10.0),
        connect_timeout=opts.connect_timeout,
        control_connection_timeout=opts.connect_timeout,
        schema_metadata_enabled=True,
        token_metadata_enabled=True,
        idle_heartbeat_interval=10,
        idle_heartbeat_timeout=5,
        auth_provider=auth,
    )
