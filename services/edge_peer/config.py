"""Every environment variable of the edge-peer service (``EDGE_`` prefix), with defaults and docs.

The README/doc table is ``describe_markdown(Config)``. :func:`node_config`, :func:`server_config` turn the
settings into the library configs (``wakunode.NodeConfig``, ``devp2p.ServerConfig``); nothing else reads the
environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from devp2p.config import ServerConfig, SessionConfig
from devp2p.constants import SNAPPY_MAX_DECODED_SIZE
from devp2p.enode import parse_enode
from devp2p.messages import frame_size_for
from meshcore import FromEnv, RuntimeConfig, runtime_settings, setting
from meshcore.parsers import (
    parse_bool,
    parse_duration,
    parse_float,
    parse_grpc_target,
    parse_hex_bytes,
    parse_int,
    parse_list,
    parse_path,
    parse_str,
)
from wakucodec.constants import MAX_MESSAGE_SIZE
from wakucodec.symmetric import MAILSERVER_PASSWORD
from wakunode.config import CAPABILITIES, MailserverConfig, NodeConfig, RateLimiterConfig

__all__ = [
    "DEVP2P_MESSAGE_MARGIN",
    "Config",
    "devp2p_message_limit",
    "node_config",
    "parse_enode_url",
    "parse_target",
    "server_config",
]


def parse_enode_url(raw: str) -> str:
    """One enode URL (``enode://<128 hex>@host:port``), checked with devp2p's parser."""
    text = raw.strip()
    parse_enode(text)  # InvalidEnode is a ValueError: reported by load_config
    return text


def parse_target(raw: str) -> str:
    """A service's gRPC address: ``host:port``, its replicas ``ip:port,ip:port`` (balanced round-robin) or a
    URI such as ``dns:///svc:50052`` (:func:`meshcore.parsers.parse_grpc_target`)."""
    return parse_grpc_target(raw)


def _parse_capability(raw: str) -> str:
    value = raw.strip()
    if value not in CAPABILITIES:
        raise ValueError(f"must be one of {', '.join(CAPABILITIES)}")
    return value


def _parse_password(raw: str) -> str:
    if not raw:
        raise ValueError("must not be empty")
    return raw


@dataclass(frozen=True, kw_only=True)
class Config(FromEnv):
    """edge-peer settings."""

    runtime: RuntimeConfig = runtime_settings(
        "EDGE", service_name="edge-peer", grpc_port=50051, metrics_port=9151
    )
    instance: str = setting(
        "EDGE_INSTANCE",
        parse_str(),
        default="",
        doc="Instance name (pod name) in NodeInfo, ingest batches and logs; empty = the host name.",
    )
    listen_host: str = setting(
        "EDGE_LISTEN_HOST",
        parse_str(allow_empty=False),
        default="0.0.0.0",
        doc="Address the devp2p (RLPx) TCP listener binds.",
    )
    listen_port: int = setting(
        "EDGE_LISTEN_PORT",
        parse_int(0, 65535),
        default="30303",
        doc="devp2p TCP port; 0 picks a free port (the enode log line shows the real one).",
    )
    advertised_host: str = setting(
        "EDGE_ADVERTISED_HOST",
        parse_str(),
        default="",
        doc="Host put in our enode URL (public IP or DNS name); empty = the listen host (127.0.0.1 for a "
        "wildcard).",
    )
    node_key_file: Path = setting(
        "EDGE_NODE_KEY_FILE",
        parse_path(),
        default="var/edge-peer/nodekey",
        doc="Node key file (64 hex chars, geth format); created with mode 0600 if absent. Gives the "
        "enode URL its identity across restarts; every replica needs its own.",
    )
    client_id: str = setting(
        "EDGE_CLIENT_ID",
        parse_str(allow_empty=False),
        default="mailmesh/v0.1.0/python",
        doc="Client name sent in the devp2p Hello.",
    )
    static_peers: tuple[str, ...] = setting(
        "EDGE_STATIC_PEERS",
        parse_list(parse_enode_url),
        default="",
        doc="Comma-separated enode URLs kept connected (redialled with backoff); exempt from the packet "
        "rate limiter.",
    )
    bootnodes: tuple[str, ...] = setting(
        "EDGE_BOOTNODES",
        parse_list(parse_enode_url),
        default="",
        doc="Comma-separated enode URLs dialled once at start (not redialled).",
    )
    trusted_peers: tuple[str, ...] = setting(
        "EDGE_TRUSTED_PEERS",
        parse_list(parse_enode_url),
        default="",
        doc="Comma-separated enode URLs trusted from the start: exempt from the peer limit and the rate "
        "limiter, allowed to send us 0x7f/0x7d.",
    )
    max_peers: int = setting(
        "EDGE_MAX_PEERS", parse_int(0, 100000), default="50", doc="Connected peers allowed (trusted exempt)."
    )
    max_pending_peers: int = setting(
        "EDGE_MAX_PENDING_PEERS",
        parse_int(1, 100000),
        default="50",
        doc="Inbound connections in the handshake phase at once; more are closed at once.",
    )
    inbound_throttle_s: float = setting(
        "EDGE_INBOUND_THROTTLE_SECONDS",
        parse_duration(0, 3600),
        default="30",
        doc="Seconds between inbound attempts from one non-LAN IP (geth inboundThrottleTime); 0 = off.",
    )
    capabilities: tuple[str, ...] = setting(
        "EDGE_CAPABILITIES",
        parse_list(_parse_capability),
        default=",".join(CAPABILITIES),
        doc="Capabilities offered, in preference order (subset of waku/1,waku/0,shh/6).",
    )
    ingest_addr: str = setting(
        "EDGE_INGEST_ADDR",
        parse_target,
        default="127.0.0.1:50052",
        doc="Ingest service (mailmesh.ingest.v1.IngestService): host:port, replicas ip:port,ip:port, or a "
        "gRPC target (dns:///name:port); the stream goes to one replica, round-robin on each reconnect.",
    )
    history_addr: str = setting(
        "EDGE_HISTORY_ADDR",
        parse_target,
        default="127.0.0.1:50054",
        doc="History-query service (mailmesh.history.v1.HistoryQueryService): host:port, replicas "
        "ip:port,ip:port, or a gRPC target (dns:///name:port); queries are balanced round-robin.",
    )
    mailserver_passwords: tuple[str, ...] = setting(
        "EDGE_MAILSERVER_PASSWORDS",
        parse_list(_parse_password),
        default=MAILSERVER_PASSWORD,
        secret=True,
        doc="Comma-separated mailserver passwords; their PBKDF2 keys open envelope requests (Status: "
        "status-offline-inbox).",
    )
    mailserver_keys: tuple[bytes, ...] = setting(
        "EDGE_MAILSERVER_KEYS",
        parse_list(parse_hex_bytes(32)),
        default="",
        secret=True,
        doc="Comma-separated hex 32-byte symmetric keys that open envelope requests (tried first).",
    )
    min_pow: float = setting(
        "EDGE_MIN_POW",
        parse_float(0, 1e9),
        default="0.000002",
        doc="PoW requirement advertised and enforced on received envelopes and on envelope requests.",
    )
    max_message_size: int = setting(
        "EDGE_MAX_MESSAGE_SIZE",
        parse_int(1024, MAX_MESSAGE_SIZE),
        default=str(1024 * 1024),
        doc="Max message size in bytes: larger packets disconnect the peer (0x10; over it by more than "
        "64 KiB: refused by devp2p before decoding, 0x02); larger envelopes are refused; the budget of "
        "one 0x7f.",
    )
    confirmations: bool = setting(
        "EDGE_CONFIRMATIONS",
        parse_bool(),
        default="false",
        doc="Answer Messages packets with Message Response and Batch Ack (codes 12, 11).",
    )
    request_rate_limit_s: float = setting(
        "EDGE_REQUEST_RATE_LIMIT_SECONDS",
        parse_duration(0, 3600),
        default="0",
        doc="Seconds a peer must wait between 0x7e requests (status-go MailServerRateLimit); 0 = unlimited.",
    )
    request_timeout_s: float = setting(
        "EDGE_REQUEST_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="60",
        doc="Longest time to answer one 0x7e (history query + sending), then 0x7d ERROR.",
    )
    rate_limiter: bool = setting(
        "EDGE_RATE_LIMITER",
        parse_bool(),
        default="false",
        doc="Enable the packet/byte token buckets per IP and per peer (status-go EnableRateLimiter).",
    )
    packets_per_ip: int = setting(
        "EDGE_RATE_PACKETS_PER_IP", parse_int(0), default="10", doc="Packets/s per remote IP; 0 = no limit."
    )
    packets_per_peer: int = setting(
        "EDGE_RATE_PACKETS_PER_PEER", parse_int(0), default="5", doc="Packets/s per peer ID; 0 = no limit."
    )
    bytes_per_ip: int = setting(
        "EDGE_RATE_BYTES_PER_IP",
        parse_int(0),
        default=str(1024 * 1024),
        doc="Payload bytes/s per remote IP; 0 = no limit.",
    )
    bytes_per_peer: int = setting(
        "EDGE_RATE_BYTES_PER_PEER",
        parse_int(0),
        default=str(1024 * 1024),
        doc="Payload bytes/s per peer ID; 0 = no limit.",
    )
    rate_tolerance: int = setting(
        "EDGE_RATE_TOLERANCE",
        parse_int(0),
        default="0",
        doc="Rate-limit violations before the peer is disconnected (0x10); 0 = count only, never drop.",
    )
    relay_cache_bytes: int = setting(
        "EDGE_RELAY_CACHE_BYTES",
        parse_int(1024 * 1024),
        default=str(256 * 1024 * 1024),
        doc="Bound of the relay cache (sum of envelope sizes); the soonest-expiring are evicted first.",
    )
    ingest_buffer_envelopes: int = setting(
        "EDGE_INGEST_BUFFER_ENVELOPES",
        parse_int(1),
        default="50000",
        doc="Envelopes held for ingest (queued + unacknowledged) before the relay is pushed back.",
    )
    ingest_buffer_bytes: int = setting(
        "EDGE_INGEST_BUFFER_BYTES",
        parse_int(1024),
        default=str(128 * 1024 * 1024),
        doc="Envelope bytes held for ingest before the relay is pushed back (one batch larger than this "
        "waits until the buffer is empty).",
    )
    ingest_buffer_wait_s: float = setting(
        "EDGE_INGEST_BUFFER_WAIT_SECONDS",
        parse_duration(0.01, 60),
        default="4",
        doc="Longest a full buffer holds back a peer's packet; then the batch is counted in "
        "edge_ingest_dropped_envelopes_total{reason=buffer_full} and logged (never dropped silently).",
    )
    ingest_window: int = setting(
        "EDGE_INGEST_WINDOW",
        parse_int(1, 16),
        default="16",
        doc="Unacknowledged batches in flight on the Ingest stream (ingest reads at most 16).",
    )
    ingest_reconnect_max_s: float = setting(
        "EDGE_INGEST_RECONNECT_MAX_SECONDS",
        parse_duration(0.05, 300),
        default="5",
        doc="Cap of the exponential backoff between Ingest stream reconnects (starts at 0.1 s).",
    )
    stream_queue_envelopes: int = setting(
        "EDGE_STREAM_QUEUE_ENVELOPES",
        parse_int(1),
        default="10000",
        doc="Envelopes queued for one StreamEnvelopes subscriber; overflow ends its stream with "
        "RESOURCE_EXHAUSTED (SLOW_CONSUMER).",
    )
    stream_queue_bytes: int = setting(
        "EDGE_STREAM_QUEUE_BYTES",
        parse_int(1024),
        default=str(64 * 1024 * 1024),
        doc="Envelope bytes queued for one StreamEnvelopes subscriber (one envelope always fits); overflow "
        "ends its stream like EDGE_STREAM_QUEUE_ENVELOPES.",
    )
    stream_replay_envelopes: int = setting(
        "EDGE_STREAM_REPLAY_ENVELOPES",
        parse_int(0),
        default="20000",
        doc="Recent accepted envelopes kept for StreamEnvelopes resumption (also bounded by "
        "EDGE_STREAM_REPLAY_BYTES).",
    )
    stream_replay_bytes: int = setting(
        "EDGE_STREAM_REPLAY_BYTES",
        parse_int(0),
        default=str(64 * 1024 * 1024),
        doc="Bytes of recent envelopes kept for StreamEnvelopes resumption.",
    )
    handshake_timeout_s: float = setting(
        "EDGE_HANDSHAKE_TIMEOUT_SECONDS",
        parse_duration(0.1, 60),
        default="5",
        doc="RLPx encryption handshake + Hello, in total.",
    )
    status_timeout_s: float = setting(
        "EDGE_STATUS_TIMEOUT_SECONDS",
        parse_duration(0.1, 600),
        default="10",
        doc="Wait for the peer's waku/shh Status before disconnecting (0x10).",
    )

    def __post_init__(self) -> None:
        if not self.capabilities:
            raise ValueError("EDGE_CAPABILITIES must name at least one capability")
        if len(set(self.capabilities)) != len(self.capabilities):
            raise ValueError("EDGE_CAPABILITIES lists a capability twice")


def node_config(cfg: Config) -> NodeConfig:
    """The waku node settings the config describes (full bloom, not a light node)."""
    limiter = (
        RateLimiterConfig(
            packets_per_ip=cfg.packets_per_ip,
            packets_per_peer=cfg.packets_per_peer,
            bytes_per_ip=cfg.bytes_per_ip,
            bytes_per_peer=cfg.bytes_per_peer,
            tolerance=cfg.rate_tolerance,
        )
        if cfg.rate_limiter
        else None
    )
    return NodeConfig(
        capabilities=cfg.capabilities,
        pow_requirement=cfg.min_pow,
        confirmations=cfg.confirmations,
        max_message_size=cfg.max_message_size,
        status_timeout=cfg.status_timeout_s,
        # The sink waits at most ingest_buffer_wait_s itself (and counts what it could not buffer), so the
        # node's own abandonment never fires first.
        sink_timeout=cfg.ingest_buffer_wait_s + 1.0,
        max_cache_bytes=cfg.relay_cache_bytes,
        rate_limiter=limiter,
        mailserver=MailserverConfig(
            symmetric_keys=cfg.mailserver_keys,
            passwords=cfg.mailserver_passwords,
            min_pow=cfg.min_pow,
            request_rate_limit=cfg.request_rate_limit_s,
            request_timeout=cfg.request_timeout_s,
        ),
    )


#: How far above ``EDGE_MAX_MESSAGE_SIZE`` devp2p still reads, decrypts and decompresses a message.
DEVP2P_MESSAGE_MARGIN = 64 * 1024


def devp2p_message_limit(cfg: Config) -> int:
    """The largest message devp2p accepts: ``EDGE_MAX_MESSAGE_SIZE`` + :data:`DEVP2P_MESSAGE_MARGIN`.

    A packet over the waku limit by up to the margin reaches wakunode, which refuses it as status-go does
    (Disconnect 0x10, ``waku_peer_disconnects_total{cause="oversized"}``); one larger than that is refused by
    devp2p from its frame header or snappy length header, before its body is read or decompressed
    (Disconnect 0x02, ``devp2p_errors_total{class="MessageTooLarge"}``), instead of being decoded at up to
    16 MiB only to be refused.
    """
    return min(SNAPPY_MAX_DECODED_SIZE, cfg.max_message_size + DEVP2P_MESSAGE_MARGIN)


def server_config(cfg: Config) -> ServerConfig:
    """The devp2p server settings the config describes (message limits: :func:`devp2p_message_limit`)."""
    limit = devp2p_message_limit(cfg)
    return ServerConfig(
        host=cfg.listen_host,
        port=cfg.listen_port,
        advertised_host=cfg.advertised_host or None,
        client_id=cfg.client_id,
        max_peers=cfg.max_peers,
        max_pending_peers=cfg.max_pending_peers,
        inbound_throttle=cfg.inbound_throttle_s,
        session=SessionConfig(
            handshake_timeout=cfg.handshake_timeout_s,
            max_message_size=limit,
            max_frame_size=frame_size_for(limit),
        ),
    )
