"""Waku v1 / Whisper v6 subprotocols on top of :mod:`devp2p`: waku/1 (preferred), waku/0 and shh/6.

Both roles: the mailserver/relay node (:class:`WakuNode`, handed to ``devp2p.Server`` through
:attr:`WakuNode.protocols`) and the requesting client (:class:`WakuClient`). Modules, one concept each::

    constants    message codes, defaults                 status_options  Status / Status Update encodings
    config       NodeConfig, RateLimiterConfig, …        errors       WakuError tree (0x10 disconnects)
    ports        EnvelopeSink, HistoryBackend, Clock     metrics      waku_* / mailserver_* counters
    cache        seen/expiry cache, known-sets
    peerstate    per-session state, PeerInfo             relay        acceptance and 300 ms forwarding
    protocol     the SubProtocol: handshake, dispatch    mailserver   0x7e → 0x7f / 0x7d
    ratelimit    token buckets, request limiter          confirmations  codes 11 / 12
    node         WakuNode                                client       WakuClient
    publish      local publishing and its results        policy       acceptance policy, its announcements
    memory       in-memory HistoryBackend and sink (tests, benchmarks)

Imports asyncio, the standard library, :mod:`devp2p` and :mod:`wakucodec` only — never gRPC, generated
protos or services. docs/wakunode.md explains the roles, hooks and limits.
"""

from __future__ import annotations

from wakunode.client import CLIENT_CONFIG, HistoryPage, HistoryWalk, PostResult, WakuClient
from wakunode.config import CAPABILITIES, MailserverConfig, NodeConfig, RateLimiterConfig
from wakunode.errors import (
    BadStatus,
    NotConnected,
    OversizedPacket,
    RateLimitExceeded,
    RequestFailed,
    RequestTimeout,
    WakuError,
    WakuProtocolError,
)
from wakunode.metrics import Histogram, MailserverMetrics, WakuMetrics
from wakunode.node import WakuNode
from wakunode.peerstate import Flavor, PeerInfo
from wakunode.ports import (
    Clock,
    EnvelopeSink,
    HistoryBackend,
    HistoryBatch,
    HistoryComplete,
    HistoryFailure,
    HistoryItem,
    MailserverQuery,
    P2PListener,
    PeerDirectory,
    SystemClock,
)
from wakunode.publish import PublishResult, PublishStatus
from wakunode.status_options import RateLimits, StatusOptions

__all__ = [
    "CAPABILITIES",
    "CLIENT_CONFIG",
    "BadStatus",
    "Clock",
    "EnvelopeSink",
    "Flavor",
    "Histogram",
    "HistoryBackend",
    "HistoryBatch",
    "HistoryComplete",
    "HistoryFailure",
    "HistoryItem",
    "HistoryPage",
    "HistoryWalk",
    "MailserverConfig",
    "MailserverMetrics",
    "MailserverQuery",
    "NodeConfig",
    "NotConnected",
    "OversizedPacket",
    "P2PListener",
    "PeerDirectory",
    "PeerInfo",
    "PostResult",
    "PublishResult",
    "PublishStatus",
    "RateLimitExceeded",
    "RateLimiterConfig",
    "RateLimits",
    "RequestFailed",
    "RequestTimeout",
    "StatusOptions",
    "SystemClock",
    "WakuClient",
    "WakuError",
    "WakuMetrics",
    "WakuNode",
    "WakuProtocolError",
]
