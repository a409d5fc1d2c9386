"""Parsers for environment variable values, used with :func:`meshcore.config.setting`.

Each ``parse_*`` function returns a parser: a callable taking the raw string and returning the
typed value, or raising :class:`ValueError` with a short reason. Reasons never repeat the value
itself; :func:`meshcore.config.load_config` adds it (unless the setting is secret), so a bad
private key is reported without being printed.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar
from urllib.parse import urlsplit

__all__ = [
    "HostPort",
    "Parser",
    "is_grpc_uri",
    "parse_bool",
    "parse_choice",
    "parse_duration",
    "parse_float",
    "parse_grpc_target",
    "parse_hex_bytes",
    "parse_host_port",
    "parse_int",
    "parse_list",
    "parse_optional_file",
    "parse_path",
    "parse_str",
    "parse_targets",
    "parse_token",
    "parse_url",
]

T = TypeVar("T")
Parser = Callable[[str], T]
"""A function from the raw environment string to a typed value; raises ValueError when bad."""

# Strict on purpose: "on", "y", "enabled" and friends are rejected so that a typo is an error
# instead of silently meaning False (the mixed-polarity trap docs/design.md "Configuration" warns about).
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})

_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d)?\s*$")


class HostPort(NamedTuple):
    """A ``host:port`` pair; ``str()`` gives it back in a form gRPC and sockets accept."""

    host: str
    port: int

    def __str__(self) -> str:
        # IPv6 literals need brackets or the last colon would be read as the port separator.
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _check_range(value: float, lo: float | None, hi: float | None) -> None:
    if lo is not None and value < lo:
        raise ValueError(f"must be >= {lo}")
    if hi is not None and value > hi:
        raise ValueError(f"must be <= {hi}")


def parse_int(min_value: int | None = None, max_value: int | None = None) -> Parser[int]:
    """Parse a base-10 integer, optionally bounded (inclusive)."""

    def parse(raw: str) -> int:
        try:
            value = int(raw.strip(), 10)
        except ValueError:
            raise ValueError("must be an integer") from None
        _check_range(value, min_value, max_value)
        return value

    return parse


def parse_float(min_value: float | None = None, max_value: float | None = None) -> Parser[float]:
    """Parse a finite decimal number, optionally bounded (inclusive)."""

    def parse(raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError("must be a number") from None
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        _check_range(value, min_value, max_value)
        return value

    return parse


def parse_bool() -> Parser[bool]:
    """Parse exactly true/false, 1/0 or yes/no (any case); anything else is an error."""

    def parse(raw: str) -> bool:
        word = raw.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise ValueError("must be one of true/false, 1/0, yes/no")

    return parse


def parse_str(*, allow_empty: bool = True) -> Parser[str]:
    """Return the value with surrounding whitespace removed; optionally reject an empty one."""

    def parse(raw: str) -> str:
        value = raw.strip()
        if not value and not allow_empty:
            raise ValueError("must not be empty")
        return value

    return parse


def parse_choice(*choices: str, case_sensitive: bool = False) -> Parser[str]:
    """Accept one of ``choices``; returns the spelling given in ``choices``."""
    by_key = {(c if case_sensitive else c.lower()): c for c in choices}

    def parse(raw: str) -> str:
        key = raw.strip() if case_sensitive else raw.strip().lower()
        if key not in by_key:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return by_key[key]

    return parse


def parse_host_port(*, default_port: int | None = None) -> Parser[HostPort]:
    """Parse ``host:port`` (``[v6]:port`` for IPv6); the port may be omitted if a default is given."""

    def parse(raw: str) -> HostPort:
        text = raw.strip()
        if text.startswith("["):
            host, sep, rest = text[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise ValueError("must be host:port or [ipv6]:port")
            port_text = rest[1:] if rest else ""
        elif text.count(":") == 1:
            host, _, port_text = text.partition(":")
        elif ":" in text:
            raise ValueError("an IPv6 address must be written as [addr]:port")
        else:
            host, port_text = text, ""
        if not host:
            raise ValueError("host must not be empty")
        if not port_text:
            if default_port is None:
                raise ValueError("must be host:port")
            return HostPort(host, default_port)
        if not port_text.isdigit() or not 0 < int(port_text) <= 65535:
            raise ValueError("port must be an integer in 1..65535")
        return HostPort(host, int(port_text))

    return parse


def parse_targets(raw: str) -> tuple[str, ...]:
    """Comma-separated gRPC targets ``host:port`` (``[v6]:port`` for IPv6), each at most once.

    For services that address each instance of another service by itself (the health service checks every
    replica; the send service publishes through every edge peer), where a load-balanced ``dns:///`` name
    would hide which instance answered.
    """
    targets = tuple(str(t) for t in parse_list(parse_host_port())(raw))
    if len(set(targets)) != len(targets):
        raise ValueError("a target is listed twice")
    return targets


# A gRPC name-syntax URI (grpc doc/naming.md); "dns:50053" alone is host "dns" and port 50053, not a URI.
_GRPC_URI = re.compile(r"^(dns|ipv4|ipv6|unix|unix-abstract):(?![0-9]+$)")


def is_grpc_uri(target: str) -> bool:
    """Whether ``target`` is a gRPC URI (``dns:///svc:1``, ``ipv4:…``, ``unix:…``), not ``host:port``."""
    return _GRPC_URI.match(target.strip()) is not None


def _ip_family(host: str) -> int | None:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return None  # a host name


def parse_grpc_target(raw: str) -> str:
    """The address of one service that may run several replicas, which the client balances over.

    - ``host:port`` (``[v6]:port``): one address; a name that resolves to several addresses (a headless
      Service) is balanced over all of them;
    - ``10.0.0.1:50053,10.0.0.2:50053``: the replicas themselves, IP literals of one family (gRPC's
      ``ipv4:``/``ipv6:`` multi-address targets take no names — give named replicas one DNS name instead);
    - a gRPC URI as is: ``dns:///archive-headless:50053``, ``ipv4:…``, ``unix:/run/archive.sock``.

    Returns the value normalised (``meshcore.balancing.channel_target`` turns it into a channel target).
    """
    text = raw.strip()
    if is_grpc_uri(text):
        if not text.split(":", 1)[1].strip("/"):
            raise ValueError("target URI has no address")
        return text
    addresses = parse_list(parse_host_port())(text)
    if not addresses:
        raise ValueError("must be host:port, a comma-separated list of ip:port, or a gRPC URI (dns:///…)")
    if len(addresses) == 1:
        return str(addresses[0])
    if len(set(addresses)) != len(addresses):
        raise ValueError("an address is listed twice")
    families = {_ip_family(a.host) for a in addresses}
    if None in families:
        raise ValueError(
            "several addresses must be IP addresses; name replicas by one DNS name (dns:///name:port)"
        )
    if len(families) > 1:
        raise ValueError("several addresses must be all IPv4 or all IPv6")
    return ",".join(str(a) for a in addresses)


def parse_list(item: Parser[T], *, separator: str = ",") -> Parser[tuple[T, ...]]:
    """Parse a separated list (blank items dropped) with ``item`` for each element.

    Returns a tuple so the config object stays immutable and hashable. The first bad element
    is reported by position.
    """

    def parse(raw: str) -> tuple[T, ...]:
        parts = [p.strip() for p in raw.split(separator)]
        values: list[T] = []
        for index, part in enumerate(p for p in parts if p):
            try:
                values.append(item(part))
            except ValueError as err:
                raise ValueError(f"item {index + 1}: {err}") from None
        return tuple(values)

    return parse


def parse_duration(min_value: float = 0.0, max_value: float | None = None) -> Parser[float]:
    """Parse a duration into seconds: a bare number is seconds; ms, s, m, h and d suffixes work."""

    def parse(raw: str) -> float:
        match = _DURATION_RE.match(raw)
        if match is None:
            raise ValueError("must be a duration in seconds, e.g. 10, 1.5, 500ms, 2m")
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2) or "s"]
        _check_range(seconds, min_value, max_value)
        return seconds

    return parse


def parse_hex_bytes(length: int | None = None) -> Parser[bytes]:
    """Parse hex (an optional ``0x`` prefix allowed) into bytes, optionally of an exact length."""

    def parse(raw: str) -> bytes:
        text = raw.strip()
        if text[:2].lower() == "0x":
            text = text[2:]
        try:
            value = bytes.fromhex(text)
        except ValueError:
            raise ValueError("must be hex digits (an even number of them)") from None
        if length is not None and len(value) != length:
            raise ValueError(f"must be {length} bytes ({2 * length} hex digits), got {len(value)} bytes")
        return value

    return parse


def parse_path(*, must_exist: bool = False) -> Parser[Path]:
    """Parse a filesystem path; optionally require that it exists already."""

    def parse(raw: str) -> Path:
        text = raw.strip()
        if not text:
            raise ValueError("must not be empty")
        path = Path(text)
        if must_exist and not path.exists():
            raise ValueError("does not exist")
        return path

    return parse


def parse_optional_file() -> Parser[str]:
    """Accept an empty value (none) or the path of an existing regular file, returned stripped."""

    def parse(raw: str) -> str:
        text = raw.strip()
        if text and not Path(text).is_file():
            raise ValueError("is not an existing file")
        return text

    return parse


# What may appear in an HTTP/2 header value after "Bearer " (RFC 6750 section 2.1 "b64token") and
# never in a list separator or a blank.
_TOKEN_RE = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")


def parse_token(*, min_length: int) -> Parser[str]:
    """Parse one bearer token: RFC 6750 ``b64token`` characters, at least ``min_length`` of them."""

    def parse(raw: str) -> str:
        value = raw.strip()
        if len(value) < min_length:
            raise ValueError(f"a token must be at least {min_length} characters")
        if not _TOKEN_RE.match(value):
            raise ValueError("a token may hold only letters, digits and -._~+/ (then = padding)")
        return value

    return parse


def parse_url(schemes: Sequence[str] = ("http", "https"), *, allow_empty: bool = False) -> Parser[str]:
    """Parse an absolute URL with one of ``schemes`` and a host; optionally allow empty (= off).

    The scheme is required because the OTLP exporter picks TLS from it: ``collector:4317``
    without ``http://`` would silently try TLS against a plaintext collector.
    """

    def parse(raw: str) -> str:
        text = raw.strip()
        if not text and allow_empty:
            return ""
        parts = urlsplit(text)
        if parts.scheme not in schemes or not parts.netloc:
            raise ValueError(f"must be a URL like {schemes[0]}://host:port")
        return text

    return parse
