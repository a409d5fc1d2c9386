"""Status and Status Update payloads (wakunode.status_options) in all three wire forms, as sessions read them.

The input's length modulo 3 picks the flavour it is read in (one flavour per run keeps the harness fast;
the seed corpus pads each seed with ignored elements to its flavour's residue): 0 → waku/1 Status and
Status Update (the same options list), 1 → waku/0 Status ``[0, options]`` and Status Update, 2 → shh/6
Status (positional list) (protocol-notes §3.1-§3.5). Inputs of at most 70 bytes are also read as shh/6's
PoW (2) and bloom (3) packets (9 and 66 bytes when valid).
Contract: only BadStatus escapes (a WakuProtocolError: the session ends with 0x10); what is accepted
validates; encoding it in the same form and decoding again gives the same options.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec import rlp
    from wakunode.errors import BadStatus
    from wakunode.peerstate import Flavor
    from wakunode.protocol import decode_status, encode_status
    from wakunode.status_options import (
        StatusOptions,
        decode_options,
        decode_shh_bloom,
        decode_shh_pow,
        encode_options,
        pow_to_bits,
    )

_SHH_PACKET_MAX = 70


def _status(flavor: Flavor, data: bytes) -> None:
    try:
        options = decode_status(flavor, data)
    except BadStatus:
        return
    options.validate()
    assert options.with_defaults() == options
    assert decode_status(flavor, encode_status(flavor, options)) == options, (flavor, data.hex())


def _update(version: int, data: bytes) -> None:
    try:
        update = decode_options(data, version=version)
    except BadStatus:
        return
    update.validate()
    assert decode_options(encode_options(update, version=version), version=version) == update
    try:
        StatusOptions().with_defaults().merged(update).validate()
    except BadStatus:  # a merge may pair a new bloom with the old interest; the handler refuses it, typed
        return


def test_one_input(data: bytes) -> None:
    """Decode ``data`` in the forms its length picks; check the contract above."""
    form = len(data) % 3
    if form < 2:
        _status(Flavor.WAKU1 if form == 0 else Flavor.WAKU0, data)
        _update(1 - form, data)
    else:
        _status(Flavor.SHH6, data)
    if len(data) > _SHH_PACKET_MAX:
        return
    try:
        pow_value = decode_shh_pow(data)
    except BadStatus:
        pass
    else:
        assert decode_shh_pow(rlp.encode(pow_to_bits(pow_value))) == pow_value
    try:
        bloom = decode_shh_bloom(data)
    except BadStatus:
        return
    assert rlp.encode(bloom) == data


if __name__ == "__main__":
    fuzz_main(test_one_input)
