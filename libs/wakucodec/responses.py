"""Mailserver responses: 0x7f (P2P Message) bundles and 0x7d (P2P Request Complete), every dialect.

0x7f payload (docs/protocol-notes.md §3.1, §3.2, §3.7, §4.12, §9 item 8):

- waku (status-go ``SendRawP2PDirect``) and the specs: an RLP **list** of raw envelopes, even for one;
- geth shh/6: the raw envelope itself (one envelope per packet);
- status-go's shh/6 receiver tries the list first, then a single envelope. :func:`decode_p2p_messages`
  does the same, deterministically: a top-level list whose items are all lists is the list form, anything
  else must be one envelope.

0x7d payload (§3.7, §9 item 7):

- status-go: one RLP **byte string** ``requestID(32) ‖ lastEnvelopeHash(32) ‖ cursor(0|36)``, or on
  failure ``"ERROR=" ‖ requestID(32) ‖ utf-8 text`` (SG ``waku/mailserver_response.go``);
- RFC8 / SSPEC 11 / NWAKU: an RLP **list** ``[requestId, lastEnvelopeHash, cursor]``. NWAKU has no error
  form; we answer a failed list-dialect request with an empty completion (zero last hash, no cursor) so its
  client stops waiting instead of timing out.

:func:`bundle_envelopes` splits the envelopes of one answer into 0x7f bundles (§4.6). status-go's rule
``bundleSize + len(env) < MaxMessageSize`` counts only the envelopes, so its bundle can exceed the limit by
the RLP list header; here each bundle's *whole* 0x7f payload (header included) is
``<= max_message_size``, because a peer drops the connection on an oversize packet. A single envelope too
large for the limit on its own is still sent, alone: the archive accepted it under its own size rule, and
dropping it silently would lose history.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from wakucodec import rlp
from wakucodec.errors import InvalidResponse, MalformedRLP, SizeLimitExceeded
from wakucodec.historyrequest import CURSOR_LENGTH, Dialect

__all__ = [
    "ERROR_PREFIX",
    "HASH_LENGTH",
    "VALIDATION_ERROR_PREFIX",
    "ZERO_HASH",
    "Completion",
    "CompletionForm",
    "MessageForm",
    "bundle_envelopes",
    "completion_form_for",
    "decode_completion",
    "decode_p2p_messages",
    "encode_completion",
    "encode_completion_error",
    "encode_p2p_messages",
    "message_form_for",
    "parse_completion_bytes",
    "split_sized",
]

HASH_LENGTH = 32
ZERO_HASH = bytes(HASH_LENGTH)
#: status-go ``mailServerFailedPayloadPrefix``.
ERROR_PREFIX = b"ERROR="
#: What status-go puts before a ``Validate`` error in the ``ERROR=`` text (protocol-notes §4.2).
VALIDATION_ERROR_PREFIX = "request is invalid: "
#: The largest success payload status-go's receiver accepts: two hashes and a 36-byte cursor.
_MAX_CONCATENATED = 2 * HASH_LENGTH + CURSOR_LENGTH


class MessageForm(enum.Enum):
    """Shape of a 0x7f payload."""

    LIST = "list"  #: ``[env, env, …]`` — waku, specs, status-go
    SINGLE = "single"  #: one raw envelope — geth shh/6


class CompletionForm(enum.Enum):
    """Shape of a 0x7d payload."""

    CONCATENATED = "concatenated"  #: status-go RLP byte string
    RLP_LIST = "rlp-list"  #: RFC8 / NWAKU ``[requestId, lastEnvelopeHash, cursor]``


def message_form_for(dialect: Dialect, *, shh: bool) -> MessageForm:
    """The 0x7f form to answer ``dialect`` with: waku always lists; on shh/6 geth's binary gets singles."""
    return MessageForm.SINGLE if shh and dialect is Dialect.GETH_BINARY else MessageForm.LIST


def completion_form_for(dialect: Dialect) -> CompletionForm:
    """The 0x7d form to answer ``dialect`` with: a list for the spec dialects (NWAKU), else status-go's.

    geth ignores unknown codes, so sending status-go's 0x7d to a geth binary client is harmless and serves the
    2018-2019 status-go clients that sent the same binary payload.
    """
    if dialect in (Dialect.SPEC_5, Dialect.SPEC_6_TOPICS):
        return CompletionForm.RLP_LIST
    return CompletionForm.CONCATENATED


# ---------------------------------------------------------------------------------------------------- 0x7f


def encode_p2p_messages(raw_envelopes: Sequence[bytes]) -> bytes:
    """Encode a list-form 0x7f payload from raw envelope encodings (kept byte-identical)."""
    body = b"".join(raw_envelopes)
    return _list_header(len(body)) + body


def split_sized(body: bytes, sizes: Sequence[int]) -> list[bytes]:
    """Split concatenated envelopes by their ``sizes`` (the columns history-query and the archive send).

    Raises :class:`InvalidResponse` when the sizes do not add up to ``len(body)``; the pieces are not
    decoded here.
    """
    if sum(sizes) != len(body) or any(size < 0 for size in sizes):
        raise InvalidResponse(f"envelope sizes add up to {sum(sizes)} bytes, the batch holds {len(body)}")
    out: list[bytes] = []
    offset = 0
    for size in sizes:
        out.append(body[offset : offset + size])
        offset += size
    return out


def _list_header(length: int) -> bytes:
    if length <= 55:
        return bytes((0xC0 + length,))
    len_bytes = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((0xF7 + len(len_bytes),)) + len_bytes


def decode_p2p_messages(payload: bytes, *, max_size: int | None = None) -> tuple[list[bytes], MessageForm]:
    """Split a received 0x7f payload into raw envelope encodings, list form first, then single.

    Only the RLP framing is checked here; decode each raw envelope with ``envelope.decode_envelope``.
    Raises :class:`InvalidResponse` (or :class:`SizeLimitExceeded` when ``len(payload) > max_size``).
    """
    try:
        items = rlp.split_list(payload, max_size=max_size)
    except SizeLimitExceeded:
        raise
    except MalformedRLP as err:
        raise InvalidResponse(f"0x7f payload is not an RLP list: {err.message}") from err
    if all(item[0] >= 0xC0 for item in items):
        return items, MessageForm.LIST
    if len(items) == 5 and all(item[0] < 0xC0 for item in items):
        return [bytes(payload)], MessageForm.SINGLE
    raise InvalidResponse("0x7f payload is neither a list of envelopes nor a single envelope")


def bundle_envelopes(
    raw_envelopes: Iterable[bytes], max_message_size: int, *, batch: bool = True
) -> Iterator[list[bytes]]:
    """Group ordered raw envelopes into 0x7f bundles whose list-form payload fits ``max_message_size``.

    Greedy and order-preserving: a bundle is closed when the next envelope would push the encoded list
    (header included) past the limit. An envelope that does not fit even alone forms its own bundle.
    ``batch=False`` (status-go ``Batch`` false) puts every envelope in its own bundle.
    """
    if max_message_size < 0:
        raise ValueError("max_message_size must be >= 0")
    bundle: list[bytes] = []
    body = 0
    for raw in raw_envelopes:
        grown = body + len(raw)
        if bundle and (not batch or len(_list_header(grown)) + grown > max_message_size):
            yield bundle
            bundle, grown = [], len(raw)
        bundle.append(raw)
        body = grown
    if bundle:
        yield bundle


# ---------------------------------------------------------------------------------------------------- 0x7d


@dataclass(frozen=True, slots=True)
class Completion:
    """A decoded (or to-be-encoded) 0x7d P2P Request Complete."""

    #: The request being answered: envelope hash, or the plain request's ID as a 32-byte hash.
    request_id: bytes
    #: Hash of the last envelope sent; 32 zero bytes when nothing matched.
    last_envelope_hash: bytes = ZERO_HASH
    #: Cursor for the next page, ``b""`` when the answer is complete.
    cursor: bytes = b""
    #: The server's error text for an ``ERROR=`` completion, else None.
    error: str | None = None
    #: Which wire form it came in.
    form: CompletionForm = CompletionForm.CONCATENATED


def _check_hash(value: bytes, what: str) -> bytes:
    if len(value) != HASH_LENGTH:
        raise InvalidResponse(f"{what} must be {HASH_LENGTH} bytes, got {len(value)}")
    return bytes(value)


def encode_completion(
    request_id: bytes,
    last_envelope_hash: bytes = ZERO_HASH,
    cursor: bytes = b"",
    *,
    form: CompletionForm = CompletionForm.CONCATENATED,
) -> bytes:
    """Encode a successful 0x7d payload.

    The concatenated form only carries a 0- or 36-byte cursor: status-go's receiver refuses payloads over
    100 bytes and drops a shorter cursor, so any other length raises :class:`InvalidResponse`.
    """
    body = [_check_hash(request_id, "request id"), _check_hash(last_envelope_hash, "last envelope hash")]
    if form is CompletionForm.RLP_LIST:
        return rlp.encode([*body, bytes(cursor)])
    if len(cursor) not in (0, CURSOR_LENGTH):
        raise InvalidResponse(
            f"status-go clients only accept a {CURSOR_LENGTH}-byte cursor, got {len(cursor)}"
        )
    return rlp.encode(b"".join(body) + bytes(cursor))


def encode_completion_error(
    request_id: bytes, text: str, *, form: CompletionForm = CompletionForm.CONCATENATED
) -> bytes:
    """Encode a failure 0x7d: status-go's ``ERROR=`` bytes, or an empty completion for the list form."""
    request_id = _check_hash(request_id, "request id")
    if form is CompletionForm.RLP_LIST:
        return encode_completion(request_id, ZERO_HASH, b"", form=form)
    return rlp.encode(ERROR_PREFIX + request_id + text.encode("utf-8"))


def parse_completion_bytes(data: bytes) -> Completion:
    """Parse status-go's byte-string 0x7d body exactly as its ``CreateMailServerEvent`` does.

    ``< 32`` bytes → error; ``>= 38`` bytes starting with ``ERROR=`` → failure; ``> 100`` bytes → error;
    else
    ``requestID``, then ``lastEnvelopeHash`` if 32 more bytes remain, then the rest as cursor only if it is at
    least 36 bytes (a shorter remainder is dropped, as status-go does).
    """
    data = bytes(data)
    size = len(data)
    if size < HASH_LENGTH:
        raise InvalidResponse(f"unexpected payload size: {size}")
    if size >= HASH_LENGTH + len(ERROR_PREFIX) and data.startswith(ERROR_PREFIX):
        start = len(ERROR_PREFIX)
        text = data[start + HASH_LENGTH :].decode("utf-8", errors="replace")
        return Completion(request_id=data[start : start + HASH_LENGTH], error=text)
    if size > _MAX_CONCATENATED:
        raise InvalidResponse(f"unexpected payload size: {size}")
    rest = data[HASH_LENGTH:]
    last = ZERO_HASH
    if len(rest) >= HASH_LENGTH:
        last, rest = rest[:HASH_LENGTH], rest[HASH_LENGTH:]
    cursor = rest if len(rest) >= CURSOR_LENGTH else b""
    return Completion(request_id=data[:HASH_LENGTH], last_envelope_hash=last, cursor=cursor)


def decode_completion(payload: bytes) -> Completion:
    """Decode a received 0x7d packet payload in either form (RLP string → status-go, RLP list → RFC8)."""
    try:
        item = rlp.decode(payload)
    except MalformedRLP as err:
        raise InvalidResponse(f"0x7d payload is not RLP: {err.message}") from err
    if isinstance(item, bytes):
        return parse_completion_bytes(item)
    if len(item) not in (2, 3) or not all(isinstance(x, bytes) for x in item):
        raise InvalidResponse("list-form 0x7d must be [requestId, lastEnvelopeHash, cursor] byte strings")
    fields = [x for x in item if isinstance(x, bytes)]  # narrows the type for mypy; same items
    return Completion(
        request_id=_check_hash(fields[0], "request id"),
        last_envelope_hash=_check_hash(fields[1], "last envelope hash"),
        cursor=fields[2] if len(fields) == 3 else b"",
        form=CompletionForm.RLP_LIST,
    )
