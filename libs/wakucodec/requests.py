"""Mailserver history requests at the packet level: decode any 0x7e payload, build one in any dialect.

The request model lives in :mod:`wakucodec.historyrequest` and the per-dialect wire forms in
:mod:`wakucodec.requestdialects`; both are re-exported here, so ``wakucodec.requests`` is the one import a
caller needs (docs/codec-apis.md).

:func:`decode_p2p_request` follows status-go's ``handleP2PRequestCode`` order (protocol-notes §3.7):

1. Decode the payload as an **envelope** (exactly 5 items, Go types). If that works it *is* an envelope
   request and never falls back: PoW check (skipped when ``min_pow <= 0``; an envelope with TTL 0, as NWAKU
   sends, has infinite PoW in Go's float arithmetic), open ``Data`` with each symmetric key in turn, then
   the private key; detect the inner dialect (:func:`~wakucodec.requestdialects.detect_payload_dialect`);
   require a signature for the status-go and geth dialects; the request ID is the envelope hash.
2. Otherwise decode it as status-go's plain 7-item ``MessagesRequest``; the request ID is
   ``BytesToHash(ID)`` (:func:`bytes_to_hash`).
3. Otherwise :class:`~wakucodec.errors.InvalidRequest` ("invalid p2p request message"), no ID to answer.

Once the request ID is known every failure is a :class:`RejectedRequest` carrying it, with status-go's
text (``"PoW too low"``, ``"failed to decrypt p2p request"``, ``"check message signature failed: …"``,
``"failed to decode data: …"``, ``"request is invalid: …"``) so the server can answer with a 0x7d
``ERROR=``.

**As sent, checked, not normalised.** The returned request is the one the peer sent: ``upper = 0`` and
``limit = 0`` stay 0 (they *are* the wire's explicit "use the default" markers), a limit above 1000 is kept,
and a bloom sent beside topics is kept. Applying the defaults is the query side's job (history-query,
:meth:`~wakucodec.historyrequest.HistoryRequest.normalize`), done once. The decoder still *checks* the request
against status-go's ``Validate`` (which needs the defaulted ``upper`` to compare with ``lower``): status-go's
``mailServer.DeliverMail`` refuses an invalid request ("request is invalid: …") before it consults the
per-peer rate limit, so the edge must know at decode time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

from wakucodec import payload as whisper_payload
from wakucodec import pow as envelope_pow
from wakucodec import secp
from wakucodec.constants import DEFAULT_TTL, MAX_MESSAGE_SIZE, TOPIC_LENGTH
from wakucodec.envelope import Envelope, decode_envelope, make_envelope
from wakucodec.errors import CodecError, DecryptionFailed, InvalidKey, InvalidPayload, InvalidRequest
from wakucodec.historyrequest import (
    CURSOR_LENGTH,
    MAX_QUERY_LIMIT,
    UPPER_SAFE_THRESHOLD,
    Dialect,
    HistoryRequest,
)
from wakucodec.requestdialects import (
    GETH_BINARY_LENGTHS,
    decode_payload,
    decode_plain,
    detect_payload_dialect,
    encode_payload,
    encode_plain,
    implied_batch,
)
from wakucodec.responses import VALIDATION_ERROR_PREFIX

__all__ = [
    "CURSOR_LENGTH",
    "GETH_BINARY_LENGTHS",
    "MAX_QUERY_LIMIT",
    "UPPER_SAFE_THRESHOLD",
    "DecodedRequest",
    "Dialect",
    "EncodedRequest",
    "HistoryRequest",
    "RejectedRequest",
    "bytes_to_hash",
    "decode_p2p_request",
    "decode_payload",
    "decode_plain",
    "detect_payload_dialect",
    "encode_p2p_request",
    "encode_payload",
    "encode_plain",
    "implied_batch",
]

_HASH_LENGTH = 32
_SYMMETRIC_KEY_LENGTH = 32
_ZERO_TOPIC = bytes(TOPIC_LENGTH)  # status-go's request envelopes left the topic unset (§4.1 B)


def bytes_to_hash(data: bytes) -> bytes:
    """Go ``common.BytesToHash``: right-align into 32 bytes (zero-padded on the left), or keep the last 32."""
    data = bytes(data)
    return data[-_HASH_LENGTH:] if len(data) > _HASH_LENGTH else data.rjust(_HASH_LENGTH, b"\x00")


class RejectedRequest(InvalidRequest):
    """A request that was identified (its ID is known) but refused; answer it with a 0x7d ``ERROR=``.

    ``message`` is the text status-go would put after ``ERROR=‖requestID``.
    """

    def __init__(self, message: str, *, request_id: bytes, dialect: Dialect | None = None) -> None:
        super().__init__(message)
        #: The 32-byte ID the 0x7d must carry.
        self.request_id = request_id
        #: The dialect, when decoding got that far (picks the 0x7d form); None → status-go's form.
        self.dialect = dialect


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    """A 0x7e request, decoded and checked."""

    #: The request as the peer sent it (``upper``/``limit`` 0 = the default; not normalised, see above).
    request: HistoryRequest
    #: The dialect it arrived in; the answer uses the matching response forms.
    dialect: Dialect
    #: The 32-byte ID to echo in the 0x7d.
    request_id: bytes
    #: 64-byte public key of the request's signer, None if unsigned or plain.
    signer: bytes | None = None


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    """A request built by :func:`encode_p2p_request`."""

    #: The 0x7e packet payload.
    payload: bytes
    #: The 32-byte ID the mailserver will answer with.
    request_id: bytes
    #: The request envelope (None for :attr:`Dialect.STATUS_PLAIN`).
    envelope: Envelope | None = None


def decode_p2p_request(
    packet_payload: bytes,
    *,
    symmetric_keys: Sequence[bytes],
    private_key: bytes | None,
    min_pow: float,
    now: int,
    max_size: int = MAX_MESSAGE_SIZE,
) -> DecodedRequest:
    """Decode and check a 0x7e payload in any dialect (order and errors in the module docstring).

    ``symmetric_keys`` are tried in order, then ``private_key``. A symmetric key that is not 32 bytes or an
    invalid private key raises :class:`~wakucodec.errors.InvalidKey` up front, whatever the input: it is a
    configuration error, not a bad request.
    """
    for key in symmetric_keys:
        if len(key) != _SYMMETRIC_KEY_LENGTH:
            raise InvalidKey(f"mailserver symmetric keys are {_SYMMETRIC_KEY_LENGTH} bytes, got {len(key)}")
    if private_key is not None:
        private_key = secp.validate_private_key(private_key)
    packet_payload = bytes(packet_payload)
    if len(packet_payload) > max_size:
        raise InvalidRequest(f"p2p request is {len(packet_payload)} bytes, limit is {max_size}")
    try:
        env = decode_envelope(packet_payload, max_size=max_size)
    except CodecError:
        try:
            req, raw_id = decode_plain(packet_payload)
        except InvalidRequest as plain_error:
            raise InvalidRequest("invalid p2p request message") from plain_error
        request_id = bytes_to_hash(raw_id)
        _check(req, now, request_id, Dialect.STATUS_PLAIN)
        return DecodedRequest(req, Dialect.STATUS_PLAIN, request_id)
    return _decode_enveloped(env, symmetric_keys, private_key, min_pow, now)


def _decode_enveloped(
    env: Envelope, symmetric_keys: Sequence[bytes], private_key: bytes | None, min_pow: float, now: int
) -> DecodedRequest:
    request_id = env.hash
    if min_pow > 0 and envelope_pow.calculate_pow(env) < min_pow:
        raise RejectedRequest("PoW too low", request_id=request_id)
    message = _open(env.data, symmetric_keys, private_key)
    if message is None:
        raise RejectedRequest("failed to decrypt p2p request", request_id=request_id)
    try:
        req, dialect = decode_payload(message.payload)
    except InvalidRequest as err:
        raise RejectedRequest(f"failed to decode data: {err.message}", request_id=request_id) from err
    if dialect.requires_signature and message.signer is None:
        raise RejectedRequest(
            "check message signature failed: Wrong signature of p2p request",
            request_id=request_id,
            dialect=dialect,
        )
    _check(req, now, request_id, dialect)
    return DecodedRequest(req, dialect, request_id, message.signer)


def _open(
    data: bytes, symmetric_keys: Sequence[bytes], private_key: bytes | None
) -> whisper_payload.Message | None:
    """Open ``data`` with the first key that works; None if none does.

    A wrong key raises DecryptionFailed, garbled plaintext InvalidPayload; both mean "try the next key".
    """
    for key in symmetric_keys:
        try:
            return whisper_payload.open_symmetric(data, key)
        except (DecryptionFailed, InvalidPayload):
            continue
    if private_key is not None:
        try:
            return whisper_payload.open_asymmetric(data, private_key)
        except (DecryptionFailed, InvalidPayload):
            return None
    return None


def _check(req: HistoryRequest, now: int, request_id: bytes, dialect: Dialect) -> None:
    """Refuse what the query side would refuse, with status-go's text; the normalised form is not kept."""
    try:
        req.normalize(now)
    except InvalidRequest as err:
        raise RejectedRequest(
            VALIDATION_ERROR_PREFIX + err.message, request_id=request_id, dialect=dialect
        ) from err


def encode_p2p_request(
    req: HistoryRequest,
    dialect: Dialect,
    *,
    request_id: bytes | None = None,
    symmetric_key: bytes | None = None,
    public_key: bytes | None = None,
    signing_key: bytes | None = None,
    now: int | None = None,
    ttl: int = DEFAULT_TTL,
    topic: bytes = _ZERO_TOPIC,
    pow_target: float = 0.0,
    pow_work_time: float = 5.0,
) -> EncodedRequest:
    """Build the 0x7e payload a client sends, in any dialect.

    - :attr:`Dialect.STATUS_PLAIN`: ``request_id`` is sent as the ``ID`` (default: 32 ASCII hex characters of
      a random 16-byte value, as status-go's UUID); keys are not used.
    - Envelope dialects: the payload is sealed with ``symmetric_key`` (the mailserver password key) or to
      ``public_key``, signed with ``signing_key`` when given, wrapped in an envelope with
      ``expiry = now + ttl`` and ``topic`` (status-go's client: TTL 50, zero topic). With ``pow_target != 0``
      the nonce is mined by :func:`wakucodec.pow.seal` within ``pow_work_time`` seconds (which raises
      ``PowTargetNotReached`` if it cannot). The request ID is the envelope hash. ``ttl=0`` reproduces
      NWAKU's request envelope (``expiry`` = ``now``; pass ``now=0`` for its zero expiry).

    Raises :class:`InvalidRequest` when ``req`` cannot be expressed in ``dialect``, and ``ValueError`` unless
    exactly one of ``symmetric_key`` / ``public_key`` is given for an envelope dialect.
    """
    if dialect is Dialect.STATUS_PLAIN:
        raw_id = os.urandom(16).hex().encode("ascii") if request_id is None else bytes(request_id)
        return EncodedRequest(encode_plain(req, raw_id), bytes_to_hash(raw_id))
    if (symmetric_key is None) == (public_key is None):
        raise ValueError("give exactly one of symmetric_key and public_key")
    inner = encode_payload(req, dialect)
    if symmetric_key is not None:
        data = whisper_payload.seal_symmetric(inner, symmetric_key, signing_key=signing_key)
    else:
        assert public_key is not None  # checked above; narrows the type
        data = whisper_payload.seal_asymmetric(inner, public_key, signing_key=signing_key)
    sent = int(time.time()) if now is None else now
    if pow_target == 0:
        env = make_envelope(expiry=sent + ttl, ttl=ttl, topic=topic, data=data)
    else:
        env = envelope_pow.seal(
            sent + ttl, ttl, topic, data, target_pow=pow_target, work_time_s=pow_work_time
        )
    return EncodedRequest(env.raw, env.hash, env)
