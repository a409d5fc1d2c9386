"""Incremental 0x7f bundling: raw envelopes in, batches out, as they arrive. Pure.

The rule is :func:`wakucodec.responses.bundle_envelopes`' (reference/wire-protocol.md §4.6, tightened): a
batch's whole RLP list payload, header included, stays ``<= max_bytes``; an envelope that does not fit even
alone goes alone. On top of it ``max_envelopes`` caps the envelopes per batch (1 = status-go's
``Batch = false``). ``bundle_envelopes`` needs the whole input up front; this one is fed envelope by envelope
so a query's first batch leaves before its last page is read. The unit tests pin the two to the same output.
"""

from __future__ import annotations

__all__ = ["Bundler", "rlp_list_size"]


def rlp_list_size(body: int) -> int:
    """Size of an RLP list whose items take ``body`` bytes: the header plus the body."""
    if body <= 55:
        return 1 + body
    return 1 + (body.bit_length() + 7) // 8 + body


class Bundler:
    """Greedy, order-preserving grouping of raw envelopes into batches within a byte and count budget."""

    def __init__(self, max_bytes: int, max_envelopes: int = 0) -> None:
        if max_bytes < 0 or max_envelopes < 0:
            raise ValueError("max_bytes and max_envelopes must be >= 0")
        self.max_bytes = max_bytes
        self.max_envelopes = max_envelopes
        self._batch: list[bytes] = []
        self._body = 0

    def add(self, raw: bytes) -> list[bytes] | None:
        """Add one envelope; returns the batch it closed (the envelope then starts the next one), or None."""
        closed: list[bytes] | None = None
        grown = self._body + len(raw)
        if self._batch and (
            rlp_list_size(grown) > self.max_bytes
            or (self.max_envelopes and len(self._batch) >= self.max_envelopes)
        ):
            closed, self._batch, grown = self._batch, [], len(raw)
        self._batch.append(raw)
        self._body = grown
        return closed

    def flush(self) -> list[bytes] | None:
        """Close and return the open batch, or None when it is empty."""
        if not self._batch:
            return None
        closed, self._batch, self._body = self._batch, [], 0
        return closed
