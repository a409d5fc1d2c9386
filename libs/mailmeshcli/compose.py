"""Building envelopes the way a Waku v1 / Whisper v6 client does: payload → signed, padded, encrypted ``Data``
(symmetric with a password or key, or asymmetric to a public key) → envelope with PoW sealed.

Used by ``mailmesh post`` and by tests and benchmarks that need real traffic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

from wakucodec import payload as whisper_payload
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import seal
from wakucodec.symmetric import key_from_password

__all__ = ["Encryption", "compose_envelope", "compose_many", "packets"]


@dataclass(frozen=True, slots=True)
class Encryption:
    """How ``Data`` is encrypted: exactly one of a symmetric key or a recipient public key."""

    symmetric_key: bytes | None = None
    public_key: bytes | None = None

    def __post_init__(self) -> None:
        if (self.symmetric_key is None) == (self.public_key is None):
            raise ValueError("give exactly one of symmetric_key and public_key")
        if self.symmetric_key is not None and len(self.symmetric_key) != 32:
            raise ValueError("a symmetric key is 32 bytes")
        if self.public_key is not None and len(self.public_key) != 64:
            raise ValueError("a public key is 64 bytes (uncompressed, without the 0x04 prefix)")

    @classmethod
    def from_password(cls, password: str) -> Encryption:
        """Symmetric, with the PBKDF2 key of ``password`` (shh_generateSymKeyFromPassword)."""
        return cls(symmetric_key=key_from_password(password))

    def seal(self, plaintext: bytes, signing_key: bytes | None) -> bytes:
        """The envelope ``Data`` for ``plaintext`` (signed when a key is given)."""
        if self.symmetric_key is not None:
            return whisper_payload.seal_symmetric(plaintext, self.symmetric_key, signing_key=signing_key)
        assert self.public_key is not None
        return whisper_payload.seal_asymmetric(plaintext, self.public_key, signing_key=signing_key)


def compose_envelope(
    plaintext: bytes,
    *,
    topic: bytes,
    ttl: int,
    pow_target: float,
    encryption: Encryption | None,
    signing_key: bytes | None = None,
    sent: int | None = None,
    work_time_s: float = 5.0,
) -> Envelope:
    """One envelope: encrypt (unless ``encryption`` is None: ``plaintext`` is the raw Data), seal the PoW.

    ``sent`` defaults to now; ``expiry = sent + ttl``. PowTargetNotReached if the target is not met in time.
    """
    data = encryption.seal(plaintext, signing_key) if encryption is not None else plaintext
    start = int(time.time()) if sent is None else sent
    if pow_target <= 0:
        return make_envelope(expiry=start + ttl, ttl=ttl, topic=topic, data=data)
    return seal(start + ttl, ttl, topic, data, target_pow=pow_target, work_time_s=work_time_s)


def compose_many(
    plaintext: bytes,
    count: int,
    *,
    topic: bytes,
    ttl: int,
    pow_target: float,
    encryption: Encryption | None,
    signing_key: bytes | None = None,
    work_time_s: float = 5.0,
) -> Iterator[Envelope]:
    """``count`` envelopes of the same plaintext (distinct by encryption nonce and padding, or by an index
    suffix when unencrypted)."""
    for index in range(count):
        body = plaintext if encryption is not None or count == 1 else plaintext + index.to_bytes(4, "big")
        yield compose_envelope(
            body,
            topic=topic,
            ttl=ttl,
            pow_target=pow_target,
            encryption=encryption,
            signing_key=signing_key,
            work_time_s=work_time_s,
        )


def packets(envelopes: list[Envelope], *, max_envelopes: int, max_bytes: int) -> Iterator[list[Envelope]]:
    """Split ``envelopes`` into Messages packets of at most ``max_envelopes`` and about ``max_bytes``."""
    batch: list[Envelope] = []
    size = 0
    for env in envelopes:
        if batch and (len(batch) >= max_envelopes or size + len(env.raw) > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(env)
        size += len(env.raw)
    if batch:
        yield batch
