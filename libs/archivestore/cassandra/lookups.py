"""Point reads through ``envelope_keys``: ``get``, ``contains`` and the DUPLICATE pre-read of ``put``.

A key row (envelope hash or message hash → sent, topic, envelope hash) is written only after the envelope's
data rows were acknowledged (:mod:`~archivestore.cassandra.writes`), so a visible key row means a readable
envelope. Keys are read ``IN`` chunks of ``KEYS_PER_READ``, the chunks concurrently.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from archivestore.cassandra.catalog import Catalog
from archivestore.cassandra.query import to_envelope
from archivestore.cassandra.schema import TIME_TABLE
from archivestore.cassandra.writes import KIND_ENVELOPE, KIND_MESSAGE
from archivestore.errors import StoreCorrupt
from archivestore.types import StoredEnvelope
from archivestore.visibility import Erasures, visible
from wakucodec.keccak import keccak256

#: Keys per ``IN (...)`` read of envelope_keys (one request each; they run concurrently).
KEYS_PER_READ = 100


async def key_rows(cat: Catalog, keys: Sequence[bytes]) -> list[Any]:
    """Every envelope_keys row of ``keys``: key, sent, envelope_hash, kind, topic, expires_at, write time."""
    unique = sorted(set(keys))
    chunks = [unique[i : i + KEYS_PER_READ] for i in range(0, len(unique), KEYS_PER_READ)]
    pages = await asyncio.gather(
        *(cat.bridge.fetch_all(cat.q.sel_keys, (c,), what="key read") for c in chunks)
    )
    return [row for page in pages for row in page]


async def stored_envelopes(cat: Catalog, hashes: Sequence[bytes]) -> set[bytes]:
    """Envelope hashes a previous put acknowledged (key row present and not erased; expiry ignored, as the
    protocol's model counts a stored-but-expired envelope as a duplicate)."""
    rows, erasures = await asyncio.gather(key_rows(cat, hashes), cat.erasures())
    return {
        key
        for key, sent, env_hash, kind, topic, _exp, written in rows
        if kind == KIND_ENVELOPE and not erasures.hides(sent, topic, env_hash, written)
    }


async def contains(cat: Catalog, hashes: Sequence[bytes], now: int) -> list[bool]:
    """Per hash (envelope or message hash), whether a visible envelope has it."""
    if not hashes:
        return []
    rows, erasures = await asyncio.gather(key_rows(cat, hashes), cat.erasures())
    present = {
        key
        for key, sent, env_hash, _kind, topic, expires_at, written in rows
        if visible(sent, topic, env_hash, expires_at, written, now, erasures)
    }
    return [h in present for h in hashes]


async def get(cat: Catalog, key: bytes, *, message: bool, now: int) -> StoredEnvelope | None:
    """The visible envelope with this envelope hash, or the first (in order) with this message hash."""
    kind = KIND_MESSAGE if message else KIND_ENVELOPE
    rows, erasures = await asyncio.gather(key_rows(cat, [key]), cat.erasures())
    for _key, sent, env_hash, row_kind, topic, expires_at, written in rows:  # (sent, hash) order
        if row_kind != kind or not visible(sent, topic, env_hash, expires_at, written, now, erasures):
            continue
        found = await _time_row(cat, sent, env_hash, now, erasures)
        if found is not None:
            return found
    return None


async def _time_row(
    cat: Catalog, sent: int, env_hash: bytes, now: int, erasures: Erasures
) -> StoredEnvelope | None:
    """The envelope's row in the time table, looked for in every shard generation of its bucket."""
    bucket = sent // cat.bucket_seconds
    plan = await cat.plan(TIME_TABLE, bucket, bucket)
    pages = await asyncio.gather(
        *(
            cat.bridge.fetch(cat.q.sel_time_row, (bucket, shard, sent, env_hash), what="get")
            for shard in plan.shards_for(bucket, env_hash)
        )
    )
    for r in (r for page in pages for r in page.rows):
        if visible(r[0], r[2], r[1], r[6], r[7], now, erasures):
            envelope = to_envelope(r)
            if keccak256(envelope.raw) != envelope.hash:
                raise StoreCorrupt(f"stored envelope {envelope.hash.hex()} no longer hashes to its key")
            return envelope
    return None
