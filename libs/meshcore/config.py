"""Service configuration from environment variables, declared once as a frozen dataclass.

This module is the only place in Mailmesh that reads ``os.environ``. A service declares its
settings as fields whose metadata names the variable, its parser, its default and a doc string
with units::

    @dataclass(frozen=True, kw_only=True)
    class Config(FromEnv):
        runtime: RuntimeConfig = runtime_settings("ARCHIVE", service_name="archive",
                                                  grpc_port=50053, metrics_port=9153)
        backend: str = setting("ARCHIVE_BACKEND", parse_choice("sqlite", "cassandra"),
                               default="sqlite", doc="Storage backend.")

    cfg = Config.from_env()      # or load_config(Config, environ)

:func:`load_config` checks every variable before failing, so one start-up shows every mistake
in a single :class:`ConfigError`; :func:`describe` lists (env, default, doc) for READMEs.
Defaults are written as the string one would put in the environment and go through the same
parser, so a default can never bypass validation and the README shows exactly what to type.

Env names may contain ``{prefix}``; a nested config (:func:`nested`) fills it in, which is how
:class:`RuntimeConfig` becomes ``ARCHIVE_GRPC_PORT`` in one service and ``INGEST_GRPC_PORT`` in
another. Avoid names of the form ``<SERVICE>_PORT`` or ``<SERVICE>_SERVICE_HOST``: Kubernetes
injects those for every Service in the namespace.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Self, TypeVar, cast

from meshcore.parsers import (
    Parser,
    parse_choice,
    parse_duration,
    parse_int,
    parse_list,
    parse_optional_file,
    parse_str,
    parse_token,
    parse_url,
)

__all__ = [
    "ConfigError",
    "FromEnv",
    "RuntimeConfig",
    "SecurityConfig",
    "SettingDoc",
    "describe",
    "describe_markdown",
    "load_config",
    "nested",
    "runtime_settings",
    "setting",
]

T = TypeVar("T")
C = TypeVar("C")

_SETTING = "meshcore.setting"
_NESTED = "meshcore.nested"
_PREFIX = "{prefix}"


class ConfigError(Exception):
    """One or more environment variables are missing or invalid; ``problems`` lists them all."""

    def __init__(self, problems: list[str]) -> None:
        self.problems: tuple[str, ...] = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{len(self.problems)} configuration problem(s):\n{lines}")


class SettingDoc(NamedTuple):
    """One documented variable: its name, default as typed in the environment (None = required), doc."""

    env: str
    default: str | None
    doc: str


@dataclass(frozen=True)
class _Setting:
    env: str
    parser: Parser[object]
    default: str | None
    doc: str
    secret: bool


@dataclass(frozen=True)
class _Nested:
    cls: type[Any]
    prefix: str
    defaults: Mapping[str, str]


def setting(env: str, parser: Parser[T], *, default: str | None = None, doc: str, secret: bool = False) -> T:
    """Declare a dataclass field read from ``env`` with ``parser``.

    ``default`` is the raw string used when the variable is unset (None makes it required);
    ``doc`` says what it is, with units. ``secret`` keeps the value out of error messages and
    :func:`describe`. Use ``@dataclass(frozen=True, kw_only=True)`` so required and defaulted
    fields can be declared in any order.
    """
    meta = {_SETTING: _Setting(env, cast(Parser[object], parser), default, doc, secret)}
    if default is None:
        return cast(T, dataclasses.field(metadata=meta))
    # Parsed now, at class definition, so a bad default fails at import instead of in production.
    return dataclasses.field(default=parser(default), metadata=meta)


def nested(cls: type[C], *, prefix: str, defaults: Mapping[str, str] | None = None) -> C:
    """Embed config class ``cls`` with ``{prefix}`` in its env names replaced by ``prefix``.

    ``defaults`` overrides field defaults by field name (as raw strings), which is how each
    service gives :class:`RuntimeConfig` its own ports. ``prefix`` may itself contain ``{prefix}``
    (``"{prefix}_CASSANDRA"``): it is then the embedding class's prefix, filled in when that one is.
    A ``ValueError`` from ``cls.__post_init__`` and a setting's doc may say ``{prefix}`` too.
    """
    overrides = dict(defaults or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"{cls.__name__} has no settings named {', '.join(unknown)}")
    meta = {_NESTED: _Nested(cls, prefix, overrides)}
    try:
        instance = _load(cls, {}, prefix, overrides)
    except ConfigError:
        return cast(C, dataclasses.field(metadata=meta))  # something is required: no default
    return dataclasses.field(default=instance, metadata=meta)


def _sub_prefix(sub: _Nested, prefix: str) -> str:
    return sub.prefix.replace(_PREFIX, prefix) if prefix else sub.prefix


def _env_name(template: str, prefix: str, cls: type[Any]) -> str:
    if _PREFIX in template and not prefix:
        raise TypeError(f"{cls.__name__}: {template} needs a prefix; embed it with nested() or pass prefix=")
    return template.replace(_PREFIX, prefix)


def _collect(
    cls: type[Any], environ: Mapping[str, str], prefix: str, overrides: Mapping[str, str], problems: list[str]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if _NESTED in f.metadata:
            sub: _Nested = f.metadata[_NESTED]
            values[f.name] = _collect(sub.cls, environ, _sub_prefix(sub, prefix), sub.defaults, problems)
            continue
        spec: _Setting | None = f.metadata.get(_SETTING)
        if spec is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with setting() or nested()")
        env = _env_name(spec.env, prefix, cls)
        raw = environ.get(env)
        if raw is None:
            raw = overrides.get(f.name, spec.default)
            if raw is None:
                problems.append(f"{env}: required but not set ({spec.doc})")
                continue
        try:
            values[f.name] = spec.parser(raw)
        except ValueError as err:
            shown = "<secret>" if spec.secret else repr(raw)
            problems.append(f"{env}={shown}: {err}")
    return values


def _build(cls: type[C], values: dict[str, Any], prefix: str) -> C:
    kwargs = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = values[f.name]
        if _NESTED in f.metadata:
            sub: _Nested = f.metadata[_NESTED]
            value = _build(sub.cls, value, _sub_prefix(sub, prefix))
        kwargs[f.name] = value
    try:
        return cls(**kwargs)
    except ValueError as err:
        if prefix and _PREFIX in str(err):  # name the variable as the operator spells it
            raise ValueError(str(err).replace(_PREFIX, prefix)) from err
        raise


def _load(cls: type[C], environ: Mapping[str, str], prefix: str, overrides: Mapping[str, str]) -> C:
    problems: list[str] = []
    values = _collect(cls, environ, prefix, overrides, problems)
    if problems:
        raise ConfigError(problems)
    try:
        return _build(cls, values, prefix)
    except ValueError as err:
        # Cross-field checks live in __post_init__ and raise ValueError; report them the same way.
        raise ConfigError([f"{cls.__name__}: {err}"]) from err


def load_config(cls: type[C], environ: Mapping[str, str] | None = None, *, prefix: str = "") -> C:
    """Build ``cls`` from ``environ`` (default: the process environment).

    Raises :class:`ConfigError` naming every missing or invalid variable at once.
    """
    return _load(cls, os.environ if environ is None else environ, prefix, {})


def describe(cls: type[Any], *, prefix: str = "") -> list[SettingDoc]:
    """List every variable ``cls`` reads, in declaration order, with its default and doc."""
    return _describe(cls, prefix, {})


def _describe(cls: type[Any], prefix: str, overrides: Mapping[str, str]) -> list[SettingDoc]:
    rows: list[SettingDoc] = []
    for f in dataclasses.fields(cls):
        if _NESTED in f.metadata:
            sub: _Nested = f.metadata[_NESTED]
            rows.extend(_describe(sub.cls, _sub_prefix(sub, prefix), sub.defaults))
            continue
        spec: _Setting = f.metadata[_SETTING]
        default = overrides.get(f.name, spec.default)
        if spec.secret and default:
            default = "<secret>"
        doc = spec.doc.replace(_PREFIX, prefix) if prefix else spec.doc
        rows.append(SettingDoc(_env_name(spec.env, prefix, cls), default, doc))
    return rows


def describe_markdown(cls: type[Any], *, prefix: str = "") -> str:
    """Render :func:`describe` as a Markdown table for a service README."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for row in describe(cls, prefix=prefix):
        default = "*(required)*" if row.default is None else f"`{row.default}`" if row.default else '`""`'
        doc = row.doc.replace("|", r"\|")  # a pipe would end the table cell
        lines.append(f"| `{row.env}` | {default} | {doc} |")
    return "\n".join(lines)


class FromEnv:
    """Mixin giving a config dataclass ``Config.from_env()`` (house style's spelling of load_config)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Load this config class from ``environ`` (default: the process environment)."""
        return load_config(cls, environ)


_parse_tokens: Parser[tuple[str, ...]] = parse_list(parse_token(min_length=16))


def _tokens(role: str, doc: str) -> tuple[str, ...]:
    return setting(
        f"MAILMESH_AUTH_{role}_TOKENS",
        _parse_tokens,
        default="",
        secret=True,
        doc=f"Comma-separated bearer tokens (>= 16 characters each) {doc}; added to those in "
        f"MAILMESH_AUTH_{role}_TOKENS_FILE.",
    )


def _tokens_file(role: str) -> str:
    return setting(
        f"MAILMESH_AUTH_{role}_TOKENS_FILE",
        parse_optional_file(),
        default="",
        doc=f"File with MAILMESH_AUTH_{role}_TOKENS, one per line (blank lines and # comments ignored; a "
        "mounted Secret); empty = none.",
    )


@dataclass(frozen=True, kw_only=True)
class SecurityConfig:
    """Transport security and credentials: one configuration shared by every service (docs/security.md).

    Mutual TLS is on when the three TLS files are set: every gRPC port requires a client certificate signed
    by the CA and every channel presents this service's. Token auth (``MAILMESH_AUTH=token``) makes every
    RPC except ``grpc.health.v1`` carry ``authorization: Bearer <token>`` of a role high enough for it
    (client < service < admin, :mod:`meshcore.auth`); services send the first service token.
    """

    tls_cert: str = setting(
        "MAILMESH_TLS_CERT",
        parse_optional_file(),
        default="",
        doc="PEM certificate chain this service presents as server and as client; with MAILMESH_TLS_KEY "
        "and MAILMESH_TLS_CA it turns on mutual TLS on every gRPC port and channel; empty = plaintext.",
    )
    tls_key: str = setting(
        "MAILMESH_TLS_KEY", parse_optional_file(), default="", doc="PEM private key of MAILMESH_TLS_CERT."
    )
    tls_ca: str = setting(
        "MAILMESH_TLS_CA",
        parse_optional_file(),
        default="",
        doc="PEM CA bundle: servers accept only client certificates it signed, clients only such servers.",
    )
    tls_server_name: str = setting(
        "MAILMESH_TLS_SERVER_NAME",
        parse_str(),
        default="",
        doc="Name clients check in server certificates instead of the target's host (one certificate "
        "for every service); empty = the target's host.",
    )
    auth: str = setting(
        "MAILMESH_AUTH",
        parse_choice("off", "token"),
        default="off",
        doc="off, or token: every RPC but grpc.health.v1 needs a bearer token of its role "
        "(UNAUTHENTICATED without a known one, PERMISSION_DENIED below the role).",
    )
    client_tokens: tuple[str, ...] = _tokens(
        "CLIENT", "of Messaging API clients (send, subscription, health)"
    )
    client_tokens_file: str = _tokens_file("CLIENT")
    service_tokens: tuple[str, ...] = _tokens("SERVICE", "of the services themselves; the first is sent")
    service_tokens_file: str = _tokens_file("SERVICE")
    admin_tokens: tuple[str, ...] = _tokens("ADMIN", "of operators; required by the admin RPCs")
    admin_tokens_file: str = _tokens_file("ADMIN")

    @property
    def tls(self) -> bool:
        """Whether mutual TLS is configured."""
        return bool(self.tls_cert)

    def __post_init__(self) -> None:
        tls = [self.tls_cert, self.tls_key, self.tls_ca]
        if any(tls) and not all(tls):
            raise ValueError("set MAILMESH_TLS_CERT, MAILMESH_TLS_KEY and MAILMESH_TLS_CA together or none")
        if self.auth == "token":
            for role in ("SERVICE", "ADMIN"):
                field = role.lower() + "_tokens"
                if not getattr(self, field) and not getattr(self, field + "_file"):
                    raise ValueError(f"MAILMESH_AUTH=token needs MAILMESH_AUTH_{role}_TOKENS or its _FILE")


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig:
    """What every service needs to run: listen address, metrics, logging, tracing, shutdown, security.

    Embed it with :func:`runtime_settings`; per-service names carry the service's prefix, the
    log and tracing variables are shared by the whole mesh.
    """

    service_name: str = setting(
        "{prefix}_SERVICE_NAME",
        parse_str(allow_empty=False),
        default="mailmesh",
        doc="Service name in logs, traces (service.name) and metrics.",
    )
    grpc_host: str = setting(
        "{prefix}_GRPC_HOST",
        parse_str(allow_empty=False),
        default="127.0.0.1",
        doc="Address the gRPC and metrics servers listen on: loopback, so a local run exposes nothing; "
        "0.0.0.0 (or the pod IP) in a cluster, which the chart sets.",
    )
    grpc_port: int = setting(
        "{prefix}_GRPC_PORT", parse_int(0, 65535), default="50051", doc="gRPC port; 0 picks a free port."
    )
    probe_port: int = setting(
        "{prefix}_GRPC_PROBE_PORT",
        parse_int(-1, 65535),
        default="-1",
        doc="With mutual TLS: a plaintext port serving only grpc.health.v1, for the kubelet's gRPC probes "
        "(they cannot do TLS); -1 = none, 0 picks a free port.",
    )
    metrics_port: int = setting(
        "{prefix}_METRICS_PORT",
        parse_int(-1, 65535),
        default="9090",
        doc="Prometheus /metrics port; 0 picks a free port, -1 disables it.",
    )
    max_message_bytes: int = setting(
        "{prefix}_GRPC_MAX_MESSAGE_BYTES",
        parse_int(1024, 2**31 - 1),
        default=str(16 * 1024 * 1024),
        doc="Largest gRPC message accepted or sent, in bytes (both directions).",
    )
    max_concurrent_rpcs: int = setting(
        "{prefix}_GRPC_MAX_CONCURRENT_RPCS",
        parse_int(0),
        default="0",
        doc="RPCs handled at once before new ones get RESOURCE_EXHAUSTED; 0 = unlimited.",
    )
    shutdown_grace_s: float = setting(
        "{prefix}_SHUTDOWN_GRACE_SECONDS",
        parse_duration(0, 600),
        default="10",
        doc="Seconds in-flight RPCs get to finish on SIGTERM (keep below the pod's termination grace).",
    )
    log_level: str = setting(
        "MAILMESH_LOG_LEVEL",
        parse_choice("DEBUG", "INFO", "WARNING", "ERROR"),
        default="INFO",
        doc="Lowest log level written.",
    )
    log_format: str = setting(
        "MAILMESH_LOG_FORMAT",
        parse_choice("json", "text"),
        default="json",
        doc="json (one object per line) or text.",
    )
    grpc_keepalive_s: float = setting(
        "MAILMESH_GRPC_KEEPALIVE_SECONDS",
        parse_duration(1, 3600),
        default="10",
        doc="gRPC keepalive: a connection without traffic is pinged after this many seconds (both ways); "
        "servers accept pings twice as often.",
    )
    grpc_keepalive_timeout_s: float = setting(
        "MAILMESH_GRPC_KEEPALIVE_TIMEOUT_SECONDS",
        parse_duration(0.5, 600),
        default="5",
        doc="A connection whose ping is not answered within this many seconds is dropped and its calls "
        "fail UNAVAILABLE (a replica that went silent leaves the round-robin).",
    )
    grpc_max_connection_age_s: float = setting(
        "MAILMESH_GRPC_MAX_CONNECTION_AGE_SECONDS",
        parse_duration(0, 86400),
        default="300",
        doc="A server sends GOAWAY on a client connection this old (gRPC adds ±10 % jitter), so clients "
        "reconnect, re-resolve DNS names and spread calls over replicas added since; calls and streams open "
        "on it finish first. 0 = never.",
    )
    otlp_endpoint: str = setting(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        parse_url(allow_empty=True),
        default="",
        doc="OTLP/gRPC collector URL (http://host:4317 for plaintext); empty = no trace export.",
    )
    security: SecurityConfig = nested(SecurityConfig, prefix="")


def runtime_settings(prefix: str, *, service_name: str, grpc_port: int, metrics_port: int) -> RuntimeConfig:
    """Embed a :class:`RuntimeConfig` for one service: its env prefix, name and default ports."""
    return nested(
        RuntimeConfig,
        prefix=prefix,
        defaults={
            "service_name": service_name,
            "grpc_port": str(grpc_port),
            "metrics_port": str(metrics_port),
        },
    )
