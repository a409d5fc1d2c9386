"""A 0x7e whose answer takes longer than ``request_timeout`` ends in a 0x7d ERROR, and the backend query is
closed: a slow (or hostile, never-ending) history read cannot hold a mailserver worker (docs/security.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from tests.unit.wakunode.test_wakunode_mailserver import ask, mailserver, request, requester
from wakucodec.historyrequest import Dialect
from wakucodec.requests import encode_p2p_request
from wakucodec.responses import decode_completion
from wakunode.memory import MemoryHistory
from wakunode.ports import HistoryItem, MailserverQuery


class StuckHistory(MemoryHistory):
    """A backend whose query never yields; records that the node closed it."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = asyncio.Event()

    async def query(self, query: MailserverQuery) -> AsyncIterator[HistoryItem]:
        """Wait forever (until the node gives up and closes the iterator)."""
        self.queries.append(query)
        try:
            await asyncio.Event().wait()
            yield  # type: ignore[misc]  # never reached: an async generator like the real backends
        finally:
            self.closed.set()


async def test_a_request_that_outlives_the_timeout_ends_in_error_and_closes_the_query() -> None:
    history = StuckHistory()
    node = mailserver(history, request_timeout=0.05)
    peer = await requester(node)
    encoded = encode_p2p_request(request(Dialect.STATUS_PLAIN), Dialect.STATUS_PLAIN)
    (completion,) = await ask(node, peer, encoded.payload)
    done = decode_completion(completion)
    assert done.request_id == encoded.request_id and done.error is not None and "timeout" in done.error
    await asyncio.wait_for(history.closed.wait(), 10)
    assert node.mailserver_metrics.delivery_failures_total == {"process": 1}
