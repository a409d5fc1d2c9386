"""Waku v1 / Whisper v6 wire codecs: pure, typed, bit-exact with go-ethereum and status-go.

Modules (one concept each):

- ``errors``          — the ``CodecError`` hierarchy every decoder raises.
- ``keccak``          — legacy Keccak-256 (not NIST SHA3).
- ``rlp``             — strict, canonical, size-bounded RLP.
- ``constants``       — protocol constants, written as formulas with their sources.
- ``envelope``        — the ``[Expiry, TTL, Topic, Data, Nonce]`` envelope, its hash and size.
- ``pow``             — proof of work and sealing.
- ``bloom``           — topic → bloom (Go assignment rule) and bloom matching.
- ``validation``      — envelope validation on receipt (status-go's order), shared by relay and ingest.
- ``secp``            — secp256k1 keys, recoverable signatures, raw-X ECDH.
- ``ecies``           — geth's ECIES (AES-128-CTR + HMAC-SHA256), shared with RLPx.
- ``symmetric``       — AES-256-GCM and password-derived keys (PBKDF2, 65356 iterations).
- ``payload``         — the Whisper v6 message inside ``Data`` (flags, padding, signature, seal/open).
- ``historyrequest``  — the dialect-independent history request and status-go's defaults/validation.
- ``requestdialects`` — every wire dialect of the history request payload, and disambiguation.
- ``requests``        — the whole 0x7e packet: decode (open, verify, detect dialect) and encode.
- ``responses``       — 0x7f / 0x7d payloads in every dialect, and byte-bounded bundling.
- ``wakumessage``     — 14/WAKU2-MESSAGE and its deterministic hash.
- ``contenttopic``    — content topics and the Waku v1 topic mapping.

Nothing here performs I/O or imports gRPC.
"""
