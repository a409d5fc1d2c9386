"""History-request payloads (wakucodec.requestdialects): every 0x7e dialect's plaintext, and the plain form.

The input is read as the decrypted payload of an enveloped request (dialect told apart by shape: the four
RLP forms and geth's binary form, protocol-notes §4.1) and as status-go's plain ``MessagesRequest`` (the
whole 0x7e payload). Contract: only InvalidRequest escapes; an accepted RLP form re-encodes to the input byte
for byte, a binary one to a request that decodes the same (its shortest form); ``normalize`` (what the query
side serves) raises only InvalidRequest and returns a request within status-go's bounds.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec.errors import InvalidRequest
    from wakucodec.historyrequest import MAX_QUERY_LIMIT, Dialect, HistoryRequest
    from wakucodec.requestdialects import decode_payload, decode_plain, encode_payload, encode_plain

_NOW = 1_700_000_000


def _check_normalized(req: HistoryRequest) -> None:
    try:
        served = req.normalize(_NOW)
    except InvalidRequest:
        return
    assert 0 < served.limit <= MAX_QUERY_LIMIT and served.lower <= served.upper
    assert served.topics or served.bloom is not None
    assert not (served.topics and served.bloom is not None)


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as an envelope payload and as a plain request; check the contract above."""
    try:
        req, dialect = decode_payload(data)
    except InvalidRequest:
        pass
    else:
        encoded = encode_payload(req, dialect)
        if dialect is Dialect.GETH_BINARY:
            assert decode_payload(encoded) == (req, dialect), data.hex()
        else:
            assert encoded == data, data.hex()
        _check_normalized(req)
    try:
        plain, raw_id = decode_plain(data)
    except InvalidRequest:
        return
    assert encode_plain(plain, raw_id) == data
    _check_normalized(plain)


if __name__ == "__main__":
    fuzz_main(test_one_input)
