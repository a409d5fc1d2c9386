"""A history query as a gRPC client (the edge peer, any caller) sends it, with its cursor (services/history).

The input is the serialized ``HistoryQueryRequest`` (history.proto); what protobuf refuses is protobuf's
business (DecodeError). The rest is ours: ``to_query`` (the servicer's translation) and
``HistoryService.prepare``, which checks the query and verifies the cursor (docs/archive.md "Cursor
format"). For every query ``prepare`` accepts without a cursor, a cursor is minted for it and replayed three
ways: as minted (it resumes where it says), with one bit flipped (refused), and for the other direction
(refused as such). Contract: ``prepare`` raises only InvalidQuery or a CursorError — INVALID_ARGUMENT
errors — never anything else, whatever the cursor bytes; a prepared query is within the service's bounds.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import atheris
from google.protobuf.message import DecodeError

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from archivestore.types import Direction
    from fuzz.support import fuzz_main
    from mailmesh.history.v1 import history_pb2
    from services.history.cursor import CursorCodec, CursorDirectionError, CursorError
    from services.history.logic import ArchivePort, HistoryQuery, HistoryService, InvalidQuery, PreparedQuery
    from services.history.servicer import to_query

_NOW = 1_700_000_000
_CODEC = CursorCodec([bytes(range(32)), bytes(32)])
# prepare() never reads the archive: it only validates and resolves.
_SERVICE = HistoryService(cast(ArchivePort, None), _CODEC, clock=lambda: _NOW)


def _prepare(query: HistoryQuery) -> PreparedQuery | None:
    try:
        prepared = _SERVICE.prepare(query)
    except (InvalidQuery, CursorError):
        return None
    settings = _SERVICE.settings
    assert prepared.lower <= prepared.upper and 0 < prepared.limit <= settings.max_limit
    assert not (prepared.topics and prepared.bloom is not None)
    assert 0 < prepared.max_batch_bytes <= settings.batch_bytes_ceiling
    return prepared


def _replay_cursors(query: HistoryQuery, prepared: PreparedQuery, data: bytes) -> None:
    sent = prepared.lower + len(data) % (prepared.upper - prepared.lower + 1)
    envelope_hash = (data * 32)[:32] if data else bytes(32)
    cursor = _CODEC.encode(sent, envelope_hash, prepared.direction, prepared.fingerprint)
    resumed = _prepare(dataclasses.replace(query, cursor=cursor))
    assert resumed is not None and resumed.after is not None and resumed.after.sent == sent
    bit = len(data) % (8 * len(cursor))
    tampered = bytearray(cursor)
    tampered[bit // 8] ^= 1 << (bit % 8)
    try:
        _SERVICE.prepare(dataclasses.replace(query, cursor=bytes(tampered)))
    except CursorError:
        pass
    else:
        raise AssertionError(f"a cursor with bit {bit} flipped was accepted")
    other = Direction.BACKWARD if prepared.direction is Direction.FORWARD else Direction.FORWARD
    try:
        _SERVICE.prepare(dataclasses.replace(query, cursor=cursor, direction=other))
    except CursorDirectionError:
        return
    raise AssertionError("a cursor was accepted for the other direction")


def test_one_input(data: bytes) -> None:
    """Parse ``data`` as a HistoryQueryRequest, prepare it, then replay minted cursors."""
    try:
        request = history_pb2.HistoryQueryRequest.FromString(data)
    except DecodeError:
        return
    try:
        query = to_query(request)
    except InvalidQuery:
        return
    prepared = _prepare(query)
    if prepared is None or query.cursor:
        return
    _replay_cursors(query, prepared, data)


if __name__ == "__main__":
    fuzz_main(test_one_input)
