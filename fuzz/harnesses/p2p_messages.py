"""0x7f P2P Message payloads (wakucodec.responses.decode_p2p_messages), as a mailserver client receives them.

Both forms (protocol-notes §3.7): a list of envelopes (waku, the specs) or one bare envelope (geth shh/6).
Contract: only CodecError subclasses escape (InvalidResponse, SizeLimitExceeded); the list form re-encodes
to the input, the single form is the input itself with five items; every raw envelope returned decodes or
fails with a CodecError, as the protocol handler expects.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec import rlp
    from wakucodec.envelope import decode_envelope
    from wakucodec.errors import CodecError, SizeLimitExceeded
    from wakucodec.responses import MessageForm, decode_p2p_messages, encode_p2p_messages

_MAX_SIZE = 2048


def test_one_input(data: bytes) -> None:
    """Split ``data`` as a 0x7f payload and decode each envelope; check the contract above."""
    try:
        raws, form = decode_p2p_messages(data, max_size=_MAX_SIZE)
    except SizeLimitExceeded:
        assert len(data) > _MAX_SIZE
        return
    except CodecError:
        return
    if form is MessageForm.LIST:
        assert encode_p2p_messages(raws) == data
        assert all(raw[0] >= 0xC0 for raw in raws)  # list headers; the bodies are decode_envelope's job
    else:
        assert raws == [data] and len(rlp.split_list(data)) == 5
    for raw in raws:
        try:
            decode_envelope(raw)
        except CodecError:
            continue


if __name__ == "__main__":
    fuzz_main(test_one_input)
