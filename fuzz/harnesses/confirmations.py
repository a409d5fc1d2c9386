"""Message Response (12) and Batch Ack (11) payloads (wakunode.confirmations; protocol-notes §3.6).

Contract: only CodecError subclasses escape (the handler counts them and carries on); a decoded version-1
response re-encodes to a payload that decodes the same (descriptions are decoded leniently, so the bytes
may differ only there); a batch ack is a 32-byte string and re-encodes to the input.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec.errors import CodecError
    from wakunode.confirmations import (
        decode_batch_ack,
        decode_message_response,
        encode_batch_ack,
        encode_message_response,
    )


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as both confirmation packets; check the contract above."""
    try:
        response = decode_message_response(data)
    except CodecError:
        pass
    else:
        if response is not None:
            assert len(response.batch_hash) == 32
            again = decode_message_response(encode_message_response(response.batch_hash, response.errors))
            assert again == response
    try:
        batch = decode_batch_ack(data)
    except CodecError:
        return
    assert len(batch) == 32 and encode_batch_ack(batch) == data


if __name__ == "__main__":
    fuzz_main(test_one_input)
