"""0x7d P2P Request Complete payloads (wakucodec.responses.decode_completion), both wire forms.

status-go's RLP byte string ``requestID ‖ lastEnvelopeHash ‖ cursor`` or ``ERROR= ‖ requestID ‖ text``, and
RFC8's RLP list ``[requestId, lastEnvelopeHash, cursor]`` (protocol-notes §3.7, §9 item 7). Contract: only
InvalidResponse escapes; hashes are 32 bytes; a status-go cursor is empty or 36 bytes; encoding a decoded
completion in its own form and decoding it again gives the same completion.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec.errors import InvalidResponse
    from wakucodec.responses import (
        HASH_LENGTH,
        Completion,
        CompletionForm,
        decode_completion,
        encode_completion,
        encode_completion_error,
    )


def _reencode(done: Completion) -> bytes:
    if done.error is not None:
        return encode_completion_error(done.request_id, done.error, form=done.form)
    return encode_completion(done.request_id, done.last_envelope_hash, done.cursor, form=done.form)


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as a 0x7d payload; check the contract above."""
    try:
        done = decode_completion(data)
    except InvalidResponse:
        return
    assert len(done.request_id) == HASH_LENGTH and len(done.last_envelope_hash) == HASH_LENGTH
    if done.form is CompletionForm.CONCATENATED:
        assert len(done.cursor) in (0, 36)
    else:
        assert done.error is None
    assert decode_completion(_reencode(done)) == done


if __name__ == "__main__":
    fuzz_main(test_one_input)
