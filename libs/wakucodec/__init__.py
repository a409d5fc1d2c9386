"""Waku v1 / Whisper v6 wire codecs: pure, typed, bit-exact with go-ethereum and status-go.

Modules (one concept each):

- ``errors``      — the ``CodecError`` hierarchy every decoder raises.
- ``keccak``      — legacy Keccak-256 (not NIST SHA3).
- ``rlp``         — strict, canonical, size-bounded RLP.
- ``envelope``    — the ``[Expiry, TTL, Topic, Data, Nonce]`` envelope, its hash and size.
- ``pow``         — proof of work and sealing.
- ``bloom``       — topic → bloom and bloom matching.
- ``payload``     — the Whisper v6 message inside ``Data`` (flags, padding, signature).
- ``crypto``      — AES-256-GCM, ECIES, secp256k1 and password-derived keys.
- ``requests``    — mailserver history requests in every dialect.
- ``responses``   — 0x7f / 0x7d payloads in every dialect.
- ``wakumessage`` — 14/WAKU2-MESSAGE, its deterministic hash and content topics.

Nothing here performs I/O or imports gRPC.
"""
