"""enode URLs: ``enode://<128 hex public key>@<host>:<tcp port>[?discport=<udp port>]`` (geth ``ParseV4``).

The "node id" in the URL is the 64-byte secp256k1 public key; geth's 32-byte ``enode.ID`` is its Keccak-256
(:attr:`Enode.id_hash`). Hosts may be IPv4, IPv6 (in brackets) or DNS names (resolved when dialled, as geth
v1.10+ does); incomplete URLs without ``@host:port`` are refused because there is nothing to dial.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from devp2p import constants as c
from devp2p.errors import InvalidEnode
from wakucodec import secp
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256

__all__ = ["Enode", "format_enode", "parse_enode"]


@dataclass(frozen=True, slots=True)
class Enode:
    """A dialable node: public key and TCP endpoint."""

    pubkey: bytes
    """64-byte public key (the URL's node id)."""
    host: str
    """IP address or DNS name, without brackets."""
    port: int
    """TCP port."""
    discport: int | None = None
    """UDP discovery port when it differs from ``port`` (``?discport=``)."""

    @property
    def id_hash(self) -> bytes:
        """keccak256 of the public key: geth's 32-byte ``enode.ID``."""
        return keccak256(self.pubkey)

    def __str__(self) -> str:
        return format_enode(self.pubkey, self.host, self.port, discport=self.discport)


def format_enode(pubkey: bytes, host: str, port: int, *, discport: int | None = None) -> str:
    """Format an enode URL; IPv6 addresses are bracketed, ``discport`` added only when it differs."""
    if len(pubkey) != c.PUBKEY_LENGTH:
        raise ValueError(f"public key must be {c.PUBKEY_LENGTH} bytes")
    try:
        bracket = ipaddress.ip_address(host).version == 6
    except ValueError:
        bracket = False
    address = f"[{host}]" if bracket else host
    query = f"?discport={discport}" if discport is not None and discport != port else ""
    return f"enode://{pubkey.hex()}@{address}:{port}{query}"


def parse_enode(url: str) -> Enode:
    """Parse an enode URL; :class:`~devp2p.errors.InvalidEnode` (a ValueError) if anything is off."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as err:  # bad port or bracket syntax
        raise InvalidEnode(url, str(err)) from err
    if parts.scheme != "enode":
        raise InvalidEnode(url, "scheme must be enode://")
    if parts.username is None or parts.password is not None:
        raise InvalidEnode(url, "missing <node id>@ (incomplete enode URLs cannot be dialled)")
    key_hex = parts.username
    if len(key_hex) != 2 * c.PUBKEY_LENGTH:
        raise InvalidEnode(url, f"node id must be {2 * c.PUBKEY_LENGTH} hex characters")
    try:
        pubkey = secp.validate_public_key(bytes.fromhex(key_hex))
    except (ValueError, CodecError) as err:
        raise InvalidEnode(url, f"node id is not a secp256k1 public key: {err}") from err
    host = parts.hostname
    if not host:
        raise InvalidEnode(url, "missing host")
    if port is None or port == 0:
        raise InvalidEnode(url, "missing or zero TCP port")
    discport: int | None = None
    query = parse_qs(parts.query)
    if "discport" in query:
        try:
            discport = int(query["discport"][0])
        except ValueError as err:
            raise InvalidEnode(url, "discport is not a number") from err
        if not 0 <= discport <= 65535:
            raise InvalidEnode(url, "discport out of range")
    return Enode(pubkey, host, port, discport)
