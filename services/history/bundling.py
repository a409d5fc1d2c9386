"""0x7f bundling over envelope sizes: where each batch of an archive chunk ends. Pure.

The rule is :func:`wakucodec.responses.bundle_envelopes`' (docs/protocol-notes.md §4.6, tightened): a
batch's whole RLP list payload, header included, stays ``<= max_bytes``; an envelope that does not fit even
alone goes alone. On top of it ``max_envelopes`` caps the envelopes per batch (1 = status-go's
``Batch = false``). History bundles each archive chunk as it arrives (a batch never spans two chunks), so a
query's first batch leaves before its last chunk is read. The unit tests pin the output to
``bundle_envelopes``'.

Why sizes and bisection instead of an envelope-by-envelope loop: a chunk is up to 1000 envelopes and the
history hot path is Python object churn (docs/benchmarks.md); prefix sums plus one bisection per batch keep
the per-envelope work in C.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

__all__ = ["batch_ends", "max_list_body", "rlp_list_size"]


def rlp_list_size(body: int) -> int:
    """Size of an RLP list whose items take ``body`` bytes: the header plus the body."""
    if body <= 55:
        return 1 + body
    return 1 + (body.bit_length() + 7) // 8 + body


def max_list_body(max_bytes: int) -> int:
    """The largest ``body`` with ``rlp_list_size(body) <= max_bytes``; -1 when there is none."""
    if max_bytes <= 56:
        return max_bytes - 1
    for length_bytes in range(1, 9):
        body = max_bytes - 1 - length_bytes
        if (body.bit_length() + 7) // 8 <= length_bytes:
            return max(body, 55)
    raise ValueError(f"max_bytes out of range: {max_bytes}")


def batch_ends(sizes: Sequence[int], max_bytes: int, max_envelopes: int = 0) -> list[int]:
    """Exclusive end index of each batch of envelopes with these RLP ``sizes``, greedy and order-preserving.

    ``max_envelopes = 0`` means no count cap. Every batch holds at least one envelope.
    """
    if max_bytes < 0 or max_envelopes < 0:
        raise ValueError("max_bytes and max_envelopes must be >= 0")
    body = max_list_body(max_bytes)
    prefix = [0, *accumulate(sizes)]
    total = len(sizes)
    ends: list[int] = []
    start = 0
    while start < total:
        end = bisect_right(prefix, prefix[start] + body, start + 1) - 1
        end = max(end, start + 1)
        if max_envelopes:
            end = min(end, start + max_envelopes)
        ends.append(end)
        start = end
    return ends
