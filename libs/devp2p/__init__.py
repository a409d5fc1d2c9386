"""devp2p / RLPx for talking to go-ethereum and status-go peers: transport and base protocol.

Layers (one module each, bottom up; interfaces in :mod:`devp2p.abc`)::

    transport     asyncio streams / in-memory pair            eip8, handshake  auth/ack packets, secrets
    frame         AES-CTR + Keccak MAC framing                messages    msg-id + snappy
    p2p           Hello, Disconnect, Ping, Pong               capabilities  message-id offsets
    connection    session set-up, timed I/O                   peer        read/ping loops, dispatch
    server        listener, dialler, limits, static peers     hello, enode, nodekey, config, stats, errors

Subprotocols implement :class:`SubProtocol` and are given to :class:`Server`. Imports only asyncio, the
standard library, :mod:`wakucodec`, ``cryptography`` and ``cramjam`` — never gRPC or the services.
"""

from __future__ import annotations

from devp2p.abc import PeerAPI, SubProtocol, TransportAPI
from devp2p.config import ServerConfig, SessionConfig
from devp2p.enode import Enode, format_enode, parse_enode
from devp2p.errors import DevP2PError, DisconnectReason, PeerDisconnected
from devp2p.hello import Capability, HelloPayload
from devp2p.nodekey import load_or_create_node_key
from devp2p.peer import Peer, SessionEnd
from devp2p.server import Server
from devp2p.stats import ServerStats

__all__ = [
    "Capability",
    "DevP2PError",
    "DisconnectReason",
    "Enode",
    "HelloPayload",
    "Peer",
    "PeerAPI",
    "PeerDisconnected",
    "Server",
    "ServerConfig",
    "ServerStats",
    "SessionConfig",
    "SessionEnd",
    "SubProtocol",
    "TransportAPI",
    "format_enode",
    "load_or_create_node_key",
    "parse_enode",
]
