"""Fair shares of outbox shards: the targets add up to the shard count and the preferred blocks of the
ranks tile the shards (pure parts of services.send.ownership)."""

from __future__ import annotations

import time

import pytest

from msgstore.types import Member
from services.send.ownership import ShardOwnership, fair_share


@pytest.mark.parametrize(("shards", "replicas"), [(16, 1), (16, 2), (16, 3), (16, 5), (4, 3), (3, 4), (1, 2)])
def test_fair_shares_add_up_and_differ_by_at_most_one(shards: int, replicas: int) -> None:
    names = [f"replica-{i}" for i in range(replicas)]
    targets = [fair_share(shards, names, me) for me in names]
    assert sum(targets) == shards and max(targets) - min(targets) <= 1


def test_a_member_missing_from_the_view_counts_itself() -> None:
    assert fair_share(16, [], "me") == 16
    assert fair_share(16, ["other"], "me") == 8


def test_the_preferred_blocks_of_the_ranks_tile_the_shards() -> None:
    names = ["a", "b", "c"]
    blocks = []
    for me in names:
        ownership = ShardOwnership(None, 16, me, 10.0, time.time)  # type: ignore[arg-type]  # no store used
        ownership._members = [Member("send", n, "", 0.0) for n in names]
        blocks.append(ownership._preference()[: ownership.target])
    assert sorted(s for block in blocks for s in block) == list(range(16))
    assert blocks == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10], [11, 12, 13, 14, 15]]
