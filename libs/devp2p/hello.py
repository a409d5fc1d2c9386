"""What a Hello carries: :class:`Capability` and :class:`HelloPayload` — plain values, no codec.

They sit in a module of their own, below every other devp2p module, because both the interfaces
(:mod:`devp2p.abc`: ``PeerAPI.hello``, ``SubProtocol.capability``) and the implementations (the codec
:class:`devp2p.p2p.Hello`, the connection, capability negotiation) name them; with the values here,
``abc.py`` depends on nothing concrete and ``p2p.py`` may implement ``abc.Command`` without an import loop.
The wire form is Hello (0x00) of the devp2p RLPx spec (``ethereum/devp2p`` ``rlpx.md``, "Hello"):
``[protocolVersion, clientId, [[capName, capVersion], …], listenPort, nodeId, …]`` (geth ``p2p/peer.go``
``protoHandshake``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["Capability", "HelloPayload"]


class Capability(NamedTuple):
    """A ``(name, version)`` pair from Hello, e.g. ``("waku", 1)``."""

    name: str
    """Capability name; wire bytes are decoded as Latin-1 so that str order equals Go's byte order."""
    version: int
    """Capability version (uint64)."""

    def __str__(self) -> str:
        return f"{self.name}/{self.version}"


@dataclass(frozen=True, slots=True)
class HelloPayload:
    """Hello contents (geth ``protoHandshake``)."""

    version: int
    """p2p protocol version; ≥ 5 means the remote speaks snappy."""
    client_id: str
    """Client name, e.g. ``Geth/v1.9.20-stable/linux-amd64/go1.15``. Untrimmed: log
    :func:`devp2p.p2p.loggable` of it."""
    capabilities: tuple[Capability, ...]
    """Advertised capabilities, in the sender's order."""
    listen_port: int
    """The sender's listening TCP port (0 if none)."""
    node_id: bytes
    """The sender's public key; must be 64 non-zero bytes equal to the handshake key."""
