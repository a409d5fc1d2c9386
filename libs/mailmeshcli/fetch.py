"""Fetching history from a mailserver for the CLI (``mailmesh history``): dialect names, building the 0x7e
request, walking cursors, JSON records."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace

from wakucodec.bloom import FULL_BLOOM, topic_to_hex, topics_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.symmetric import MAILSERVER_PASSWORD, key_from_password
from wakunode.client import IdleEnd, WakuClient

__all__ = [
    "DIALECTS",
    "TOPIC_DIALECTS",
    "HistoryOptions",
    "HistoryRun",
    "build_request",
    "envelope_record",
    "fetch",
]

#: CLI spelling → dialect.
DIALECTS: dict[str, Dialect] = {
    "status-plain": Dialect.STATUS_PLAIN,
    "status-envelope": Dialect.STATUS_ENVELOPE,
    "status-legacy6": Dialect.STATUS_LEGACY_6,
    "spec5": Dialect.SPEC_5,
    "spec6": Dialect.SPEC_6_TOPICS,
    "geth-binary": Dialect.GETH_BINARY,
}
#: Dialects whose wire form carries exact topics (and a bloom); the others get only the topics' bloom.
TOPIC_DIALECTS = frozenset({Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE, Dialect.SPEC_6_TOPICS})


def build_request(
    dialect: Dialect,
    *,
    lower: int,
    upper: int,
    topics: Sequence[bytes] = (),
    bloom: bytes | None = None,
    limit: int = 0,
    cursor: bytes = b"",
) -> tuple[HistoryRequest, str]:
    """The request and a word for the filter used (``topics``, ``bloom``, ``bloom-from-topics``, ``all``).

    Topics win over a bloom. A dialect that carries topics gets them *and* a bloom: ``bloom`` if given, else
    the topics' bloom — what status-go clients of the envelope era sent, because status-go ≤ v0.5x servers
    refuse a request whose bloom is empty ("bloom filter is empty"); newer servers (and ours) accept both
    and filter by the topics. A dialect that cannot carry topics gets their bloom instead (a superset
    match); nothing at all means every topic (the full bloom).
    """
    if topics and dialect in TOPIC_DIALECTS:
        compat = bloom if bloom is not None else topics_to_bloom(topics)
        return HistoryRequest(lower, upper, compat, tuple(topics), limit, cursor), "topics"
    if topics:
        return HistoryRequest(lower, upper, topics_to_bloom(topics), (), limit, cursor), "bloom-from-topics"
    if bloom is not None:
        return HistoryRequest(lower, upper, bloom, (), limit, cursor), "bloom"
    return HistoryRequest(lower, upper, FULL_BLOOM, (), limit, cursor), "all"


def envelope_record(env: Envelope) -> dict[str, object]:
    """The JSON line for one envelope."""
    return {
        "hash": "0x" + env.hash.hex(),
        "sent": env.sent,
        "topic": topic_to_hex(env.topic),
        "expiry": env.expiry,
        "ttl": env.ttl,
        "nonce": env.nonce,
        "size": len(env.raw),
        "data": "0x" + env.data.hex(),
    }


@dataclass(frozen=True, slots=True)
class HistoryOptions:
    """How to ask: dialect, keys, paging."""

    dialect: Dialect
    password: str | None = None
    symmetric_key: bytes | None = None
    server_public_key: bytes | None = None
    signing_key: bytes | None = None
    follow: bool = True
    max_pages: int = 10_000
    page_timeout: float = 30.0
    page_interval: float = 0.0
    idle_end: IdleEnd = "auto"
    """End a page after this many seconds without a 0x7f and no 0x7d (wakunode ``complete_after_idle``)."""


@dataclass
class HistoryRun:
    """What a fetch did: pages, envelopes, the last cursor, how the last page ended, time."""

    pages: int = 0
    envelopes: int = 0
    next_cursor: bytes = b""
    last_envelope_hash: bytes = b""
    elapsed_s: float = 0.0
    page_sizes: list[int] = field(default_factory=list)
    ended_by: str = ""
    """How the last page ended: ``completion`` (the server's 0x7d) or ``idle`` (no 0x7d; no cursor)."""


async def fetch(
    client: WakuClient, pubkey: bytes, request: HistoryRequest, options: HistoryOptions, run: HistoryRun
) -> AsyncIterator[Envelope]:
    """Yield every envelope of the first page, or (``follow``) of every page until no cursor is returned.

    ``run`` is filled in as pages complete. Raises wakunode's RequestFailed / RequestTimeout.
    """
    started = time.perf_counter()
    public_key = options.server_public_key
    symmetric_key = options.symmetric_key
    if options.dialect.in_envelope and public_key is None and symmetric_key is None:
        symmetric_key = key_from_password(options.password or MAILSERVER_PASSWORD)  # derived once
    current = request
    while run.pages < options.max_pages:
        if run.pages and options.page_interval > 0:
            await asyncio.sleep(options.page_interval)  # pacing for a server's request rate limit
        page = client.request_history(
            pubkey,
            current,
            options.dialect,
            symmetric_key=symmetric_key if public_key is None else None,
            public_key=public_key,
            signing_key=options.signing_key,
            timeout=options.page_timeout,
            complete_after_idle=options.idle_end,
        )
        count = 0
        async for env in page:
            count += 1
            run.envelopes += 1
            yield env
        result = page.result
        assert result is not None
        run.pages += 1
        run.page_sizes.append(count)
        run.next_cursor = result.cursor
        run.last_envelope_hash = result.last_envelope_hash
        run.ended_by = result.end.value
        run.elapsed_s = time.perf_counter() - started
        if not options.follow or not result.cursor:
            return
        current = replace(current, cursor=result.cursor)
