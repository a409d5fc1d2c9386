"""Mesh core: what every Mailmesh service is built from.

Config from the environment (:mod:`~meshcore.config`, :mod:`~meshcore.parsers`), JSON logging
(:mod:`~meshcore.logging`), go-grpc-prometheus metrics (:mod:`~meshcore.metrics`), OpenTelemetry
tracing (:mod:`~meshcore.tracing`), the error categories domain code raises
(:mod:`~meshcore.errors`) and the one table mapping them to status codes (:mod:`~meshcore.codes`),
the server interceptors (:mod:`~meshcore.interceptors`), the server bootstrap with health,
reflection and graceful shutdown (:mod:`~meshcore.server`), client channels
(:mod:`~meshcore.clients`) and deadline propagation (:mod:`~meshcore.deadlines`).

The names most services need are re-exported here; everything else is imported from its module.
"""

from meshcore.clients import make_channel, translate_rpc_error
from meshcore.config import (
    ConfigError,
    FromEnv,
    RuntimeConfig,
    describe,
    describe_markdown,
    load_config,
    nested,
    runtime_settings,
    setting,
)
from meshcore.deadlines import remaining_timeout
from meshcore.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MeshError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from meshcore.logging import setup_logging, trim
from meshcore.metrics import start_metrics_server
from meshcore.server import MeshServer, Registration, build_server, run_service, setup_observability
from meshcore.tracing import setup_tracing

__all__ = [
    "AlreadyExists",
    "ConfigError",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FromEnv",
    "Internal",
    "InvalidArgument",
    "MeshError",
    "MeshServer",
    "NotFound",
    "PermissionDenied",
    "Registration",
    "ResourceExhausted",
    "RuntimeConfig",
    "Unauthenticated",
    "Unavailable",
    "build_server",
    "describe",
    "describe_markdown",
    "load_config",
    "make_channel",
    "nested",
    "remaining_timeout",
    "run_service",
    "runtime_settings",
    "setting",
    "setup_logging",
    "setup_observability",
    "setup_tracing",
    "start_metrics_server",
    "translate_rpc_error",
    "trim",
]
