"""RLP (wakucodec.rlp): every other decoder's first step. Differential against pyrlp, the reference codec.

Contract: ``decode`` raises only MalformedRLP / SizeLimitExceeded; what it accepts re-encodes to exactly the
input (canonical form, protocol-notes §1.1) and is what pyrlp decodes; what pyrlp accepts and we refuse is
nesting deeper than our 32-level bound, nothing else. ``split_list`` agrees with ``decode`` on lists, and
``to_uint`` / ``to_bool`` keep Go's canonical rules (a value they return re-encodes to the same item).
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    import rlp as pyrlp

    from fuzz.support import fuzz_main
    from wakucodec import rlp
    from wakucodec.errors import MalformedRLP, SizeLimitExceeded

_MAX_DEPTH = 32


def _depth(item: object) -> int:
    if isinstance(item, list):
        return 1 + max((_depth(x) for x in item), default=0)
    return 0


def _check_scalars(item: rlp.Item) -> None:
    """to_uint / to_bool accept only canonical encodings: what they return encodes back to the item."""
    if isinstance(item, list):
        for child in item:
            _check_scalars(child)
        return
    try:
        value = rlp.to_uint(item, 64)
    except MalformedRLP:
        assert item[:1] == b"\x00" or len(item) > 8, item
    else:
        assert rlp.encode(value) == rlp.encode(item), item
    try:
        flag = rlp.to_bool(item)
    except MalformedRLP:
        assert item not in (b"", b"\x01")
    else:
        assert item == (b"\x01" if flag else b"")


def test_one_input(data: bytes) -> None:
    """Decode ``data`` with both codecs and check the contract above."""
    try:
        reference = pyrlp.decode(data, strict=True)
    except pyrlp.exceptions.DecodingError:
        reference = None
    except RecursionError:  # pyrlp recurses per nesting level; our bound refuses these anyway
        reference = None
    try:
        item = rlp.decode(data, max_size=len(data) + 1)
    except MalformedRLP:
        assert reference is None or _depth(reference) > _MAX_DEPTH, data.hex()
        return
    assert reference == item, data.hex()
    assert rlp.encode(item) == data
    if isinstance(item, list):
        parts = rlp.split_list(data)
        assert [rlp.decode(part) for part in parts] == item
        try:
            rlp.split_list(data, max_items=len(item) - 1)
        except SizeLimitExceeded:
            assert item
        else:
            assert not item
    _check_scalars(item)


if __name__ == "__main__":
    fuzz_main(test_one_input)
