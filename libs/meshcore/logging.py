"""Structured logging for every service: JSON lines to stdout, or text for humans.

Each JSON line is one object with ``ts`` (RFC 3339, UTC), ``level``, ``logger``, ``msg``,
``service``, the current OpenTelemetry ``trace_id``/``span_id`` when a span is active, the
``rpc`` and ``peer`` of the gRPC call being handled (bound by the server interceptor), any
``extra={...}`` fields, and ``exc`` with the traceback when there is one.

Anything a peer controls (names, topics, error strings, addresses) goes through :func:`trim`
before it is logged: it bounds the length and escapes control and formatting characters, so a
hostile peer can neither flood the log nor forge extra lines (the lesson of trinity's
``p2p/logging.py``).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from opentelemetry import trace

__all__ = [
    "JsonFormatter",
    "TextFormatter",
    "bind_rpc",
    "setup_logging",
    "trim",
]

DEFAULT_TRIM = 256
"""Default bound for :func:`trim`: long enough for a hex hash or an enode URL, short of a flood."""

# Attributes every LogRecord has; anything else on a record came from ``extra=`` and is emitted.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

_rpc: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("meshcore_rpc", default=None)


def trim(value: object, max_len: int = DEFAULT_TRIM) -> str:
    """Render ``value`` for a log line: printable, single-line, at most about ``max_len`` chars.

    Bytes are shown as hex. Non-printable characters (newlines, ANSI escapes, bidi overrides,
    other Unicode control or format characters) become ``\\xNN``/``\\uNNNN`` escapes. Only the
    first ``max_len`` characters of the input are ever examined, so the cost is bounded too; a
    cut is marked with the number of characters left out.
    """
    if isinstance(value, bytes | bytearray | memoryview):
        # Hex only the prefix we can show: a multi-megabyte payload must not be copied whole.
        text, total = bytes(value[:max_len]).hex(), 2 * len(value)
    else:
        text = str(value)
        total = len(text)
    if total <= max_len and text.isprintable():
        # Nothing to escape or cut (every call's peer address): one C-level scan, not a loop per character.
        return text
    out: list[str] = []
    used = 0
    consumed = 0
    for ch in text[:max_len]:
        piece = ch if ch.isprintable() else _escape(ch)
        if used + len(piece) > max_len:
            break
        out.append(piece)
        used += len(piece)
        consumed += 1
    if consumed < total:
        out.append(f"…(+{total - consumed} chars)")
    return "".join(out)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def bind_rpc(rpc: str, peer: str) -> None:
    """Make every later log line of the current task carry ``rpc`` and ``peer``.

    The server interceptor calls this as a handler starts; gRPC runs each RPC in its own
    asyncio task (with its own copy of the context), so the binding ends with the call.
    """
    _rpc.set((rpc, trim(peer, 64)))


def _rfc3339(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _context_fields() -> dict[str, str]:
    fields: dict[str, str] = {}
    span_context = trace.get_current_span().get_span_context()
    if span_context.is_valid:
        fields["trace_id"] = trace.format_trace_id(span_context.trace_id)
        fields["span_id"] = trace.format_span_id(span_context.span_id)
    bound = _rpc.get()
    if bound is not None:
        fields["rpc"], fields["peer"] = bound
    return fields


def _extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRS and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON object per line (see the module docstring for the keys)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as a single line of JSON."""
        entry: dict[str, Any] = {
            "ts": _rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "service": self._service,
        }
        entry.update(_context_fields())
        for key, value in _extra_fields(record).items():
            # Our keys win; a colliding extra is kept under another name rather than lost.
            entry[f"extra_{key}" if key in entry else key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # default=str: an odd extra (a Path, an exception) must never make logging itself fail.
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """Formats a record as ``ts LEVEL logger: msg key=value …`` for people at a terminal."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self._service = service

    def format(self, record: logging.LogRecord) -> str:
        """Return the record as one human-readable line (plus a traceback if any)."""
        fields = {**_context_fields(), **_extra_fields(record)}
        # Extras are trimmed here because, unlike JSON, plain text has no escaping of its own.
        tail = "".join(f" {k}={trim(v)}" for k, v in fields.items())
        line = f"{_rfc3339(record.created)} {record.levelname:<7} {record.name}: {record.getMessage()}{tail}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def setup_logging(
    service: str, level: str = "INFO", fmt: str = "json", *, stream: TextIO | None = None
) -> None:
    """Send all logging to ``stream`` (default stdout) as JSON or text, at ``level`` and above.

    Replaces the root logger's handlers, so calling it twice does not double every line.
    """
    handler = logging.StreamHandler(stream if stream is not None else sys.stdout)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(service))
    elif fmt == "text":
        handler.setFormatter(TextFormatter(service))
    else:
        raise ValueError(f"unknown log format {fmt!r}; expected json or text")
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
