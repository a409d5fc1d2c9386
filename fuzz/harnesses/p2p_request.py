"""Whole 0x7e packets (wakucodec.requests.decode_p2p_request), the way the edge peer decodes them.

Every input is decoded twice (protocol-notes §3.7, §4.1):

- *as received*: the bytes are the 0x7e payload — an envelope (PoW checked for odd lengths, then opening
  fails: the fuzzer cannot forge AES-GCM) or status-go's plain ``MessagesRequest``;
- *sealed*: the bytes are a request payload in some dialect, put inside a Whisper message (signed when
  the length is 1 modulo 4), sealed with the mailserver's symmetric key and wrapped in an envelope — the
  path a real client's request takes, which random bytes never reach.

Contract: only InvalidRequest escapes; once the envelope decodes, every answer or refusal (RejectedRequest)
names the envelope hash; an accepted request passes ``normalize``; a sealed request decodes to what
``decode_payload`` makes of its payload, with the signer when signed, or is refused for the same reason.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec import secp, symmetric
    from wakucodec.envelope import decode_envelope, make_envelope
    from wakucodec.errors import CodecError, InvalidRequest
    from wakucodec.payload import build
    from wakucodec.requestdialects import decode_payload
    from wakucodec.requests import DecodedRequest, Dialect, RejectedRequest, decode_p2p_request

_NOW = 1_700_000_000
_KEY = symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD)
_SERVER_KEY = bytes.fromhex("b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291")
_CLIENT_KEY = bytes.fromhex("49a7b37aa6f6645917e7b807e9d1c00d4fa71f18343b0d4122a4d2df64dd6fee")
_CLIENT_PUB = secp.public_key(_CLIENT_KEY)
_NONCE = bytes(12)


def _decode(payload: bytes, min_pow: float) -> DecodedRequest | InvalidRequest:
    try:
        return decode_p2p_request(
            payload, symmetric_keys=[_KEY], private_key=_SERVER_KEY, min_pow=min_pow, now=_NOW
        )
    except InvalidRequest as err:
        return err


def _as_received(data: bytes) -> None:
    outcome = _decode(data, 0.002 if len(data) % 2 else 0.0)
    try:
        env = decode_envelope(data)
    except CodecError:
        if isinstance(outcome, DecodedRequest):
            assert outcome.dialect is Dialect.STATUS_PLAIN and outcome.signer is None
    else:  # an envelope: every answer names its hash (the seeds include sealed requests that open)
        assert isinstance(outcome, DecodedRequest | RejectedRequest), outcome
        assert outcome.request_id == env.hash, outcome
    if isinstance(outcome, DecodedRequest):
        outcome.request.normalize(_NOW)


def _sealed(data: bytes) -> None:
    signed = len(data) % 4 == 1
    plaintext = build(data, signing_key=_CLIENT_KEY if signed else None, padding=b"\x00")
    sealed = symmetric.encrypt(_KEY, plaintext, nonce=_NONCE)
    env = make_envelope(expiry=_NOW + 50, ttl=50, topic=bytes(4), data=sealed)
    outcome = _decode(env.raw, 0.0)
    try:
        req, dialect = decode_payload(data)
    except InvalidRequest as err:
        assert isinstance(outcome, RejectedRequest) and outcome.request_id == env.hash
        assert outcome.message == f"failed to decode data: {err.message}", (outcome.message, err.message)
        return
    if isinstance(outcome, DecodedRequest):
        assert (outcome.request, outcome.dialect, outcome.request_id) == (req, dialect, env.hash)
        assert outcome.signer == (_CLIENT_PUB if signed else None)
        return
    assert isinstance(outcome, RejectedRequest) and outcome.request_id == env.hash
    assert outcome.message.startswith(("request is invalid: ", "check message signature failed: "))
    assert signed or not dialect.requires_signature or "signature" in outcome.message


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as a received 0x7e payload and as a sealed request payload."""
    _as_received(data)
    _sealed(data)


if __name__ == "__main__":
    fuzz_main(test_one_input)
