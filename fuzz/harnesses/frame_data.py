"""Frame data: ``RLP(message id) ‖ message data``, snappy-compressed after Hello (devp2p.messages; §5.5).

The input is the decrypted content of a frame, read with snappy off (before Hello, or a version < 5 peer) and
on. Contract: only MalformedMessage and MessageTooLarge escape; a message id is canonical; the declared
snappy length is checked against the limit before decompressing (the decoded message is never larger than
the limit); encoding the decoded message again decodes to the same pair.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p.errors import MalformedMessage, MessageTooLarge
    from devp2p.messages import decode_frame_data, encode_frame_data, snappy_decoded_length
    from fuzz.support import fuzz_main
    from wakucodec import rlp

#: A small limit, so the fuzzer meets it: real sessions use the max message size (1 MiB by default).
_MAX_SIZE = 4096


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as frame data with snappy off and on; check the contract above."""
    for snappy in (False, True):
        try:
            code, message = decode_frame_data(data, snappy=snappy, max_size=_MAX_SIZE)
        except MessageTooLarge as err:
            assert err.size > _MAX_SIZE and err.limit == _MAX_SIZE
            continue
        except MalformedMessage:
            continue
        assert len(message) <= _MAX_SIZE
        head = rlp.encode_uint(code)
        assert data.startswith(head)
        if snappy:
            assert snappy_decoded_length(data[len(head) :]) == len(message)
        else:
            assert data == head + message
        again = encode_frame_data(code, message, snappy=snappy)
        assert decode_frame_data(again, snappy=snappy, max_size=_MAX_SIZE) == (code, message)


if __name__ == "__main__":
    fuzz_main(test_one_input)
