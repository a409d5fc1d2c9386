"""Capability negotiation and the message-id space (protocol-notes §5.6; geth ``matchProtocols``).

Ids 0x00–0x0f belong to the base protocol. The remote's capabilities are sorted by name, then version, and
every one we also support is packed upward from 0x10, each taking its protocol's ``length`` ids; when several
versions of one name match, the later (higher) one replaces the earlier and takes its slot. With waku/1
alone: waku 0x10–0x8f. With shh/6 and waku/1: shh 0x10–0x8f, waku 0x90–0x10f. Advertising waku/0 and waku/1
lets a peer that has both pick waku/1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from devp2p import constants as c
from devp2p.abc import SubProtocol
from devp2p.errors import InvalidMessageCode
from devp2p.hello import Capability

__all__ = ["CapabilityTable", "NegotiatedProtocol"]


@dataclass(frozen=True, slots=True)
class NegotiatedProtocol:
    """A subprotocol both sides support, and where its ids start on this session."""

    protocol: SubProtocol
    """Our handler for it."""
    offset: int
    """Wire id of the protocol's code 0."""

    @property
    def capability(self) -> Capability:
        """The negotiated ``(name, version)``."""
        return self.protocol.capability

    @property
    def end(self) -> int:
        """First wire id after the protocol's range."""
        return self.offset + self.protocol.length


class CapabilityTable:
    """The negotiated protocols of one session: maps wire ids to ``(protocol, local code)`` and back."""

    def __init__(self, negotiated: Iterable[NegotiatedProtocol]) -> None:
        self._by_offset = tuple(sorted(negotiated, key=lambda n: n.offset))
        self._by_name = {n.protocol.name: n for n in self._by_offset}

    @classmethod
    def negotiate(cls, local: Sequence[SubProtocol], remote: Iterable[Capability]) -> CapabilityTable:
        """Match our protocols against the remote's Hello capabilities exactly as geth ``matchProtocols``."""
        by_cap: dict[tuple[str, int], SubProtocol] = {}
        for proto in local:  # geth takes the first local protocol with that name and version
            by_cap.setdefault((proto.name, proto.version), proto)
        result: dict[str, NegotiatedProtocol] = {}  # insertion order = offset order
        offset = c.BASE_PROTOCOL_LENGTH
        for cap in sorted(remote):  # NamedTuple order: name, then version — geth capsByNameAndVersion
            match = by_cap.get((cap.name, cap.version))
            if match is None:
                continue
            old = result.pop(cap.name, None)
            if old is not None:  # an older version of this name matched: it gives its slot back
                offset -= old.protocol.length
            result[cap.name] = NegotiatedProtocol(match, offset)
            offset += match.length
        return cls(result.values())

    def __len__(self) -> int:
        return len(self._by_offset)

    def __iter__(self) -> Iterator[NegotiatedProtocol]:
        return iter(self._by_offset)

    @property
    def protocols(self) -> tuple[NegotiatedProtocol, ...]:
        """Negotiated protocols in id order."""
        return self._by_offset

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """Negotiated capabilities in id order."""
        return tuple(n.capability for n in self._by_offset)

    def get(self, protocol: SubProtocol | str) -> NegotiatedProtocol | None:
        """The negotiation entry for a protocol (by handler or by name), or None if not negotiated."""
        name = protocol if isinstance(protocol, str) else protocol.name
        entry = self._by_name.get(name)
        if entry is None or (not isinstance(protocol, str) and entry.protocol is not protocol):
            return None
        return entry

    def resolve(self, msg_id: int) -> tuple[NegotiatedProtocol, int]:
        """Map a received wire id (≥ 0x10) to ``(protocol, local code)``; InvalidMessageCode if unmapped."""
        for entry in self._by_offset:
            if entry.offset <= msg_id < entry.end:
                return entry, msg_id - entry.offset
        raise InvalidMessageCode(msg_id)

    def wire_id(self, protocol: SubProtocol | str, code: int) -> int:
        """Map ``(protocol, local code)`` to the wire id; ValueError if not negotiated or out of range."""
        entry = self.get(protocol)
        if entry is None:
            raise ValueError(f"protocol {protocol!r} was not negotiated with this peer")
        if not 0 <= code < entry.protocol.length:
            raise ValueError(f"code {code} is outside {entry.capability} (length {entry.protocol.length})")
        return entry.offset + code
