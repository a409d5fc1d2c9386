"""Envelopes (wakucodec.envelope): one envelope, a Messages (0x01) packet payload, and validation on receipt.

The input is read twice: as one envelope ``[Expiry, TTL, Topic, Data, Nonce]`` and as the payload of a
Messages packet (a list of envelopes). Contract: only CodecError subclasses escape the decoders; an accepted
envelope re-encodes byte for byte (``make_envelope`` of its fields gives the input, so its hash is the hash of
what was received, protocol-notes §1.2); an accepted packet re-encodes to the input; ingest's ``validate``
(status-go ``add``: time, size, PoW, interest) returns a verdict for any bytes and never raises.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from services.ingest.validation import Invalid, Rules, Valid, validate
    from wakucodec.envelope import (
        Envelope,
        decode_envelope,
        decode_envelopes,
        encode_envelopes,
        make_envelope,
    )
    from wakucodec.errors import CodecError
    from wakucodec.keccak import keccak256

_RULES = Rules(max_message_size=1024, min_pow=0.002, topic_allowlist=frozenset({b"\xf2\x6e\x77\x79"}))


def _check_envelope(env: Envelope, raw: bytes) -> None:
    assert env.raw == raw and env.hash == keccak256(raw)
    rebuilt = make_envelope(expiry=env.expiry, ttl=env.ttl, topic=env.topic, data=env.data, nonce=env.nonce)
    assert rebuilt.raw == raw, raw.hex()
    assert env.size == 20 + len(env.data)
    # Receipt times around the sent time reach every time rule (future, expired, very old); the choice
    # depends only on the input, so a finding replays.
    now = (env.sent + len(raw) % 64 - 32) & 0xFFFFFFFF
    verdict = validate(raw, now, _RULES)
    assert isinstance(verdict, Valid | Invalid)
    if isinstance(verdict, Valid):
        assert verdict.envelope == env


def test_one_input(data: bytes) -> None:
    """Decode ``data`` as one envelope and as a Messages payload; check the contract above."""
    try:
        env = decode_envelope(data)
    except CodecError:
        verdict = validate(data, 0, _RULES)
        assert isinstance(verdict, Invalid) and verdict.hash == keccak256(data)
    else:
        _check_envelope(env, data)
    try:
        envelopes = decode_envelopes(data, max_count=64)
    except CodecError:
        return
    assert encode_envelopes(envelopes) == data
    for env in envelopes:
        _check_envelope(env, env.raw)


if __name__ == "__main__":
    fuzz_main(test_one_input)
