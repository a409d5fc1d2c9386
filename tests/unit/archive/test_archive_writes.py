"""PutEnvelopes write logic (services/archive/writes.py): each hash stored once, one outcome per item."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from archivestore.errors import StoreUnavailable
from archivestore.types import PutItem, PutOutcome, PutResult, StoredEnvelope
from services.archive.writes import (
    EXPIRED_DETAIL,
    Accepted,
    Candidate,
    ItemResult,
    Refused,
    WriteOutcome,
    write_batch,
)

INS, DUP, INV, EXP = WriteOutcome.INSERTED, WriteOutcome.DUPLICATE, WriteOutcome.INVALID, WriteOutcome.EXPIRED


def accepted(n: int, *, size: int = 100, retention_s: int | None = None) -> Accepted:
    h = hashlib.sha256(b"%d" % n).digest()
    row = StoredEnvelope(
        sent=1_700_000_000 + n, hash=h, topic=b"abcd", expiry=1_700_000_100 + n, raw=b"r%d" % n
    )
    return Accepted(row, size + n, retention_s)


class FakeStore:
    """A put that answers a scripted outcome per hash and records every call it got."""

    def __init__(self, outcomes: dict[bytes, PutOutcome] | None = None) -> None:
        self.outcomes = outcomes or {}
        self.calls: list[list[PutItem]] = []

    async def put(self, items: list[PutItem]) -> PutResult:
        self.calls.append(items)
        return PutResult(tuple(self.outcomes.get(i.envelope.hash, PutOutcome.INSERTED) for i in items))


def outcomes(results: Sequence[ItemResult]) -> list[WriteOutcome]:
    return [r.outcome for r in results]


async def test_each_hash_goes_to_the_store_once_in_one_call() -> None:
    a, b, c = accepted(1), accepted(2), accepted(3)
    store = FakeStore()
    report = await write_batch([a, b, a, c, b, a], store.put)
    assert len(store.calls) == 1
    assert [i.envelope.hash for i in store.calls[0]] == [a.envelope.hash, b.envelope.hash, c.envelope.hash]
    assert outcomes(report.results) == [INS, INS, DUP, INS, DUP, DUP]
    assert [r.hash for r in report.results] == [x.envelope.hash for x in (a, b, a, c, b, a)]
    assert report.stored == 3
    assert report.inserted_sizes == [a.size, b.size, c.size]  # the repeats are not counted again
    assert (report.count(INS), report.count(DUP), report.count(INV), report.count(EXP)) == (3, 3, 0, 0)


async def test_a_repeat_shares_the_fate_of_its_first_occurrence() -> None:
    present, expired, fresh = accepted(1), accepted(2), accepted(3)
    store = FakeStore(
        {present.envelope.hash: PutOutcome.DUPLICATE, expired.envelope.hash: PutOutcome.EXPIRED}
    )
    report = await write_batch([present, expired, fresh, present, expired, fresh], store.put)
    assert outcomes(report.results) == [DUP, EXP, INS, DUP, EXP, DUP]
    assert [r.detail for r in report.results] == ["", EXPIRED_DETAIL, "", "", EXPIRED_DETAIL, ""]
    assert report.inserted_sizes == [fresh.size]


async def test_refused_items_never_reach_the_store_and_keep_their_detail() -> None:
    good = accepted(1)
    bad = Refused(b"\x01" * 32, "hash: is not keccak256(rlp)")
    store = FakeStore()
    report = await write_batch([bad, good, bad], store.put)
    assert [i.envelope.hash for i in store.calls[0]] == [good.envelope.hash]
    assert report.results == [
        ItemResult(bad.hash, INV, bad.detail),
        ItemResult(good.envelope.hash, INS),
        ItemResult(bad.hash, INV, bad.detail),
    ]
    assert report.stored == 1


async def test_a_batch_with_nothing_valid_makes_no_store_call() -> None:
    store = FakeStore()
    report = await write_batch([Refused(b"", "rlp: required")] * 2, store.put)
    assert store.calls == [] and report.stored == 0 and outcomes(report.results) == [INV, INV]
    assert (await write_batch([], store.put)).results == []


async def test_the_retention_override_goes_to_the_store_with_its_envelope() -> None:
    store = FakeStore()
    await write_batch([accepted(1, retention_s=50), accepted(2)], store.put)
    assert [i.retention_s for i in store.calls[0]] == [50, None]


async def test_a_storage_error_propagates_with_nothing_reported() -> None:
    async def down(items: list[PutItem]) -> PutResult:
        raise StoreUnavailable("cassandra: no hosts available")

    candidates: list[Candidate] = [accepted(1), Refused(b"x", "hash: must be 32 bytes, got 1")]
    with pytest.raises(StoreUnavailable, match="no hosts"):
        await write_batch(candidates, down)
