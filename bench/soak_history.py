"""Soak role ``history``: good requesters paging recent history over RLPx while the load runs.

Each of :attr:`~bench.soak_settings.SoakSettings.history_clients` clients keeps one RLPx session (waku/1,
the edge peer trusted as its mailserver) and walks, again and again, a
:attr:`~bench.soak_settings.SoakSettings.history_window_s`-second window of two soak topics, placed at
random between the start of the load and a moment ago (an offline peer catching up on part of the day, not
a live tail: a window of the last seconds would be empty whenever the archive lags the relay, and the
history load would vanish exactly when the archive is busiest): a 0x7e with those topics and ``limit``
(MAILSERVER "Request"), every 0x7f batch, the 0x7d, then the next page with the 0x7d's cursor until none
comes back, one page per :attr:`~bench.soak_settings.SoakSettings.history_page_interval_s`. Clients use the
request dialects that carry topics and cursors (status-go plain, status-go in an envelope sealed with the
mailserver password, Waku v1 spec 6 with topics), one each, in turn.

Every envelope delivered is checked, as a client would want it: it belongs to this run (the data tag), its
topic is one asked for, its sent time is inside the window, and it comes strictly after the previous one of
the walk in the archive's ``(sent, hash)`` order (no duplicates across pages, nothing out of order); a page
holds at most ``limit``. The archive fills while the walks run, so a walk may miss what is archived behind
its cursor: completeness is checked exactly once the archive is complete (``bench/soak_verify.py``).
Errors of a good client: any violation above, an ``ERROR=`` 0x7d, a page not complete within
:attr:`~bench.soak_settings.SoakSettings.page_timeout_s`, a lost session.
"""

from __future__ import annotations

import asyncio
import random
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from bench.soak_settings import CLIENT_SERVER, WAKU1_CLIENT, SoakSettings, soak_topics, tag_of
from bench.support import summarize_ms
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.symmetric import key_from_password
from wakunode.client import WakuClient
from wakunode.errors import RequestFailed, RequestTimeout

__all__ = ["DIALECTS", "PASSWORD", "HistoryTally", "check_envelope", "run_history"]

#: The request forms the clients use, by client index modulo 3 (all carry topics and a cursor).
DIALECTS = (Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE, Dialect.SPEC_6_TOPICS)
#: Status's mailserver password (the soak's edge peer gets it as EDGE_MAILSERVER_PASSWORDS).
PASSWORD = "status-offline-inbox"
#: Windows end at least this many seconds before now: whole past seconds only.
WINDOW_LAG_S = 2


@dataclass
class HistoryTally:
    """What the history clients did."""

    walks: int = 0
    walks_complete: int = 0
    pages: int = 0
    envelopes: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    page_s: array[float] = field(default_factory=lambda: array("d"))
    envelopes_per_s: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "walks": self.walks,
            "walks_complete": self.walks_complete,
            "pages": self.pages,
            "envelopes": self.envelopes,
            "errors": dict(self.errors),
            "page": summarize_ms(self.page_s),
            "envelopes_per_s": self.envelopes_per_s,
        }


def check_envelope(
    env: Envelope, tag: bytes, request: HistoryRequest, previous: tuple[int, bytes] | None
) -> str | None:
    """Why ``env`` may not follow ``previous`` (``(sent, hash)``) in a walk of ``request``; None if it may."""
    if not env.data.startswith(tag):
        return "not a soak envelope of this run"
    if env.topic not in request.topics:
        return "topic not asked for"
    if not request.lower <= env.sent <= request.upper:
        return "sent time outside the window"
    if previous is not None and (env.sent, env.hash) <= previous:
        return "out of (sent, hash) order or repeated"
    return None


class _Requester:
    def __init__(self, index: int, settings: SoakSettings, enode: str, tally: HistoryTally) -> None:
        self.index, self.settings, self.enode, self.tally = index, settings, enode, tally
        self.client = WakuClient(config=WAKU1_CLIENT, server_config=CLIENT_SERVER)
        self.dialect = DIALECTS[index % len(DIALECTS)]
        self.rng = random.Random(settings.run_id * 1000 + index)
        self.topics = soak_topics(settings.topics)
        self.tag = tag_of(settings.run_id)
        self.pubkey = b""
        self.oldest = 0
        self.key = key_from_password(PASSWORD)  # PBKDF2 once, not per page

    async def connect(self) -> None:
        await self.client.start()
        self.pubkey = (await self.client.connect(self.enode, timeout=60)).pubkey

    async def run(self, began: float, end: float) -> None:
        self.oldest = int(time.time())
        while time.monotonic() < end:
            try:
                await self._walk(began, end)
            except RequestFailed as err:
                self.tally.errors[f"ERROR={err.text}"] += 1
            except RequestTimeout:
                self.tally.errors["page timeout"] += 1
            except Exception as err:  # a lost session or a failed write: count it and reconnect
                self.tally.errors[f"session: {type(err).__name__}"] += 1
                try:
                    self.pubkey = (await self.client.connect(self.enode, timeout=60)).pubkey
                except Exception as again:
                    self.tally.errors[f"reconnect: {type(again).__name__}"] += 1
            await self._pause(end)

    async def _pause(self, end: float) -> None:
        delay = min(self.settings.history_page_interval_s, end - time.monotonic())
        if delay > 0:
            await asyncio.sleep(delay)  # the clients' pace, not synchronisation

    async def _walk(self, began: float, end: float) -> None:
        s = self.settings
        newest = int(time.time()) - WINDOW_LAG_S - s.history_window_s + 1
        lower = self.rng.randint(min(self.oldest, newest), newest)
        topics = tuple(self.rng.sample(self.topics, s.history_topics))
        request = HistoryRequest(lower, lower + s.history_window_s - 1, None, topics, s.history_limit)
        previous: tuple[int, bytes] | None = None
        self.tally.walks += 1
        while True:
            page = self.client.request_history(
                self.pubkey, request, self.dialect, symmetric_key=self.key, timeout=s.page_timeout_s
            )
            started = time.monotonic()
            delivered = 0
            async for env in page:
                delivered += 1
                fault = check_envelope(env, self.tag, request, previous)
                if fault is not None:
                    self.tally.errors[fault] += 1
                previous = (env.sent, env.hash)
            now = time.monotonic()
            self.tally.page_s.append(now - started)
            self.tally.pages += 1
            self.tally.envelopes += delivered
            second = int(now - began)
            series = self.tally.envelopes_per_s
            series.extend([0] * (second + 1 - len(series)))
            series[second] += delivered
            if delivered > s.history_limit:
                self.tally.errors["page over the limit"] += 1
            assert page.result is not None
            if not page.result.cursor:
                self.tally.walks_complete += 1
                return
            if time.monotonic() >= end:
                return  # the load is over: leave the rest of this walk
            request = replace(request, cursor=page.result.cursor)
            await self._pause(end)


async def run_history(
    settings: SoakSettings, enode: str, ready: asyncio.Event, go: asyncio.Future[float]
) -> dict[str, Any]:
    """Connect every requester, set ``ready``, wait for ``go`` (the load's length), walk until it ends."""
    tally = HistoryTally()
    requesters = [_Requester(i, settings, enode, tally) for i in range(settings.history_clients)]
    try:
        for r in requesters:
            await r.connect()
        ready.set()
        duration = await go
        began = time.monotonic()
        await asyncio.gather(*(r.run(began, began + duration) for r in requesters))
        elapsed = time.monotonic() - began
    finally:
        for r in requesters:
            await r.client.stop()
    return {**tally.to_json(), "dialects": [d.value for d in DIALECTS], "load_s": round(elapsed, 2)}
