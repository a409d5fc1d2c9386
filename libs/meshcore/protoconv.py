"""Small conversions every servicer and client needs between Python values and protobuf fields.

Kept here so each service does not grow its own copy: wall-clock seconds ⇄ ``google.protobuf.Timestamp`` /
``Duration``, and text cut to a proto field's byte bound (error details, rejection reasons) without
splitting a UTF-8 character.
"""

from __future__ import annotations

import math

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

__all__ = ["clip_utf8", "duration", "seconds", "timestamp"]


def timestamp(unix: float) -> Timestamp:
    """``unix`` (seconds since the epoch, fractional) as a Timestamp.

    Whole seconds and the fraction are converted apart: ``unix * 1e9`` exceeds a double's 53-bit mantissa
    today, so the product would lose the low nanoseconds.
    """
    seconds = math.floor(unix)
    nanos = round((unix - seconds) * 1e9)
    if nanos >= 1_000_000_000:
        seconds, nanos = seconds + 1, nanos - 1_000_000_000
    return Timestamp(seconds=seconds, nanos=nanos)


def seconds(stamp: Timestamp) -> float:
    """A Timestamp as UNIX seconds (fractional), the float nearest to the exact value.

    Integer nanoseconds over an integer divisor: CPython rounds that division once, correctly, where
    ``seconds + nanos / 1e9`` rounds twice (1.747 s would come back as 1.7469999999999999).
    """
    return (stamp.seconds * 1_000_000_000 + stamp.nanos) / 1_000_000_000


def duration(span_s: float) -> Duration:
    """``span_s`` seconds as a Duration, to the nearest nanosecond."""
    span = Duration()
    span.FromNanoseconds(round(span_s * 1e9))
    return span


def clip_utf8(text: str, limit: int, *, marker: str = "...") -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes; a cut text ends with ``marker`` (inside the limit).

    A character the cut would split is dropped whole, so the result is always valid UTF-8.
    """
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = max(limit - len(marker.encode("utf-8")), 0)
    return raw[:room].decode("utf-8", "ignore") + marker
