"""Every environment variable of the gateway (``GATEWAY_`` prefix), with defaults and docs.

The gateway answers REST on ``GATEWAY_HTTP_PORT`` (8645) and serves only ``grpc.health.v1`` on its gRPC port
(50058), so the process harness and Kubernetes gRPC probes treat it like every other service. Upstream
addresses are single gRPC targets: ``host:port`` or a load-balanced name such as ``dns:///send:50055``.

Authentication is not here: the REST API takes the bearer tokens the whole mesh is configured with
(``MAILMESH_AUTH`` and ``MAILMESH_AUTH_{CLIENT,SERVICE,ADMIN}_TOKENS[_FILE]``, in ``runtime.security``;
docs/security.md "Tokens and roles").
"""

from __future__ import annotations

from dataclasses import dataclass

from meshcore import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.parsers import (
    parse_bool,
    parse_duration,
    parse_float,
    parse_grpc_target,
    parse_int,
    parse_list,
    parse_str,
)

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "Config"]

#: Waku v1's default max message size (status-go ``DefaultMaxMessageSize``, 1 MiB; docs/protocol-notes.md
#: §1.6): an envelope carries at most this minus its 20-byte header of payload.
DEFAULT_MAX_MESSAGE_BYTES = 1 << 20


def _origin(raw: str) -> str:
    text = raw.strip().rstrip("/")
    if text != "*" and not (text.startswith(("http://", "https://")) and text.count("/") == 2):
        raise ValueError("must be * or an origin like https://app.example.org (scheme, host, optional port)")
    return text


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """Gateway settings; ``describe_markdown(Config)`` renders the README table."""

    runtime: RuntimeConfig = runtime_settings(
        "GATEWAY", service_name="gateway", grpc_port=50058, metrics_port=9158
    )
    http_host: str = setting(
        "GATEWAY_HTTP_HOST",
        parse_str(allow_empty=False),
        default="127.0.0.1",
        doc="Address the REST API listens on: loopback, so a local run exposes nothing (docs/security.md); "
        "0.0.0.0 in a cluster, which the chart sets.",
    )
    http_port: int = setting(
        "GATEWAY_HTTP_PORT", parse_int(0, 65535), default="8645", doc="REST API port; 0 picks a free port."
    )
    send_addr: str = setting(
        "GATEWAY_SEND_ADDR",
        parse_grpc_target,
        default="127.0.0.1:50055",
        doc="The send service (mailmesh.send.v1.SendService): host:port, replicas ip:port,ip:port or a gRPC "
        "target (dns:///name:port), balanced round-robin.",
    )
    subscription_addr: str = setting(
        "GATEWAY_SUBSCRIPTION_ADDR",
        parse_grpc_target,
        default="127.0.0.1:50056",
        doc="The subscription service (mailmesh.subscription.v1.SubscriptionService); replicas as for "
        "GATEWAY_SEND_ADDR.",
    )
    health_addr: str = setting(
        "GATEWAY_HEALTH_ADDR",
        parse_grpc_target,
        default="127.0.0.1:50057",
        doc="The health service (mailmesh.health.v1.HealthService); replicas as for GATEWAY_SEND_ADDR.",
    )
    send_timeout_s: float = setting(
        "GATEWAY_SEND_TIMEOUT_SECONDS",
        parse_duration(0.05, 600),
        default="5",
        doc="Deadline of each call to the send service, seconds (a timeout answers 504).",
    )
    subscription_timeout_s: float = setting(
        "GATEWAY_SUBSCRIPTION_TIMEOUT_SECONDS",
        parse_duration(0.05, 600),
        default="10",
        doc="Deadline of each call to the subscription service, seconds; long polls get their wait on top.",
    )
    health_timeout_s: float = setting(
        "GATEWAY_HEALTH_TIMEOUT_SECONDS",
        parse_duration(0.05, 600),
        default="2",
        doc="Deadline of each call to the health service, seconds; long polls get their wait on top.",
    )
    max_wait_s: float = setting(
        "GATEWAY_MAX_WAIT_SECONDS",
        parse_duration(0, 60),
        default="60",
        doc="Longest `wait=` a long poll may ask for (GET /events, /messages, /health), seconds; larger "
        "values are lowered to it (the subscription service waits at most 60 s).",
    )
    sse_heartbeat_s: float = setting(
        "GATEWAY_SSE_HEARTBEAT_SECONDS",
        parse_duration(0.05, 3600),
        default="15",
        doc="An SSE stream with nothing to send writes a `: heartbeat` comment this often, seconds (keeps "
        "proxies from closing idle streams).",
    )
    sse_client_buffer: int = setting(
        "GATEWAY_SSE_CLIENT_BUFFER",
        parse_int(1, 1_000_000),
        default="1024",
        doc="Events queued for one SSE client before it counts as too slow and is disconnected (it "
        "resumes with Last-Event-ID).",
    )
    max_message_bytes: int = setting(
        "GATEWAY_MAX_MESSAGE_BYTES",
        parse_int(1024, 10 * DEFAULT_MAX_MESSAGE_BYTES),
        default=str(DEFAULT_MAX_MESSAGE_BYTES),
        doc="The node's max message size, bytes (Waku v1 default 1 MiB): a payload may be 20 bytes less; a "
        "request body may be as long as that payload in base64 plus 16 KiB of JSON, longer ones get 413.",
    )
    cors_origins: tuple[str, ...] = setting(
        "GATEWAY_CORS_ORIGINS",
        parse_list(_origin),
        default="",
        doc="Browser origins allowed to call the API (CORS), comma-separated; * = any; empty = no CORS "
        "headers (same-origin only).",
    )
    rate_limit_per_s: float = setting(
        "GATEWAY_RATE_LIMIT_PER_SECOND",
        parse_float(0, 1_000_000),
        default="0",
        doc="Requests per second one client may make on average (token bucket; over it: 429 with "
        "Retry-After); 0 = no limit. A client is its bearer token (MAILMESH_AUTH=token), or its address.",
    )
    rate_limit_burst: int = setting(
        "GATEWAY_RATE_LIMIT_BURST",
        parse_int(1, 1_000_000),
        default="50",
        doc="Requests a client may make at once above the average rate (the bucket's size).",
    )
    forwarded_allow_ips: str = setting(
        "GATEWAY_FORWARDED_ALLOW_IPS",
        parse_str(),
        default="127.0.0.1",
        doc="Proxies whose X-Forwarded-For / X-Forwarded-Proto are trusted for the client address "
        "(comma-separated IPs or CIDRs, * = any; uvicorn's forwarded_allow_ips).",
    )
    access_log: bool = setting(
        "GATEWAY_ACCESS_LOG",
        parse_bool(),
        default="true",
        doc="Log one INFO line per request (method, route, status, duration, client; never a token, body or "
        "query string).",
    )

    def __post_init__(self) -> None:
        if self.http_port and self.http_port == self.runtime.grpc_port:
            raise ValueError("GATEWAY_HTTP_PORT and GATEWAY_GRPC_PORT must differ")

    @property
    def max_payload_bytes(self) -> int:
        """The largest payload one envelope carries: the max message size minus the 20-byte header."""
        return self.max_message_bytes - 20

    @property
    def max_body_bytes(self) -> int:
        """The request body cap: the largest payload in padded base64 plus 16 KiB for the other fields."""
        return 4 * ((self.max_payload_bytes + 2) // 3) + 16 * 1024
