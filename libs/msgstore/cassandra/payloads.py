"""Message payloads on Cassandra: one immutable row per message hash, shared by outbox and records.

Written (idempotently) before the logged batch that refers to it, so a batch holds only small rows and
stays far below ``batch_size_fail_threshold``. Its TTL covers the longest-lived row that can name it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from msgstore.cassandra.session import Cql
from msgstore.settings import StoreSettings

__all__ = ["Payloads"]

_GROUP = 50  # keys per IN read: one coordinator fans out to at most this many partitions


class Payloads:
    """Payload rows of one keyspace."""

    def __init__(self, cql: Cql, settings: StoreSettings) -> None:
        self._cql = cql
        # 0 = no TTL; record retention 0 means records (and so their payloads) are kept forever.
        longest = (
            0.0
            if settings.record_retention <= 0
            else max(settings.record_retention, settings.outbox_retention)
        )
        self._ttl = int(longest) + 3600 if longest else 0

    async def put(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        """Store (hash, payload) pairs."""
        await self._cql.execute_grouped(
            [
                (
                    "INSERT INTO {ks}.payloads (message_hash, payload) VALUES (?, ?) USING TTL ?",
                    (h, p, self._ttl),
                )
                for h, p in dict(items).items()
            ],
            "store payloads",
        )

    async def get(self, hashes: Sequence[bytes]) -> dict[bytes, bytes]:
        """Payloads of ``hashes`` (missing ones are left out)."""
        unique = list(dict.fromkeys(hashes))
        groups = [unique[i : i + _GROUP] for i in range(0, len(unique), _GROUP)]
        results = await asyncio.gather(
            *(
                self._cql.rows(
                    "SELECT message_hash, payload FROM {ks}.payloads WHERE message_hash IN ?",
                    (g,),
                    "read payloads",
                )
                for g in groups
            )
        )
        return {h: p for rows in results for h, p in rows}
