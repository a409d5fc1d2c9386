"""Status options: the settings a peer announces in Status and Status Update, in all three wire forms.

- **waku/1** (protocol-notes §3.4; SG ``waku/v1/status_options.go``): a list of ``[key, value]`` pairs with
  RLP *integer* keys 0–6, emitted in ascending key order with absent options omitted. The Status payload *is*
  that list.
- **waku/0** (§3.5; SG ``waku/v0``): the same pairs with the *string* keys ``"0"``…``"5"`` (bytes
  ``0x30``…``0x35``), no key 6; Status is ``[0, options]``, Status Update the bare options list.
- **shh/6** (§3.1, §3.2): Status is the positional list ``[6, pow_bits, bloom, light, confirmations,
  [ip, peer, topic]]``; geth sends the first four, status-go adds the last two; only the version is
  mandatory.

Decoding is as strict as Go's ``rlp`` where status-go is (canonical integers, exact pair and struct
arities, 4-byte topics, ``0x80``/``0x01`` booleans) and raises :class:`~wakunode.errors.BadStatus`.
Unknown keys are skipped and parsing *continues* (RFC6 "SHOULD be ignored"); status-go instead stops at the
first unknown key (§3.4; observed with status-go v0.60.0's decoder in tests/interop) — the two agree whenever
unknown keys come last, as they do from any implementation that sends ascending keys.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

from wakucodec import rlp
from wakucodec.bloom import FULL_BLOOM
from wakucodec.constants import BLOOM_SIZE, MAX_TOPIC_INTEREST, TOPIC_LENGTH
from wakucodec.errors import CodecError
from wakunode.constants import DEFAULT_PEER_POW, SHH_VERSION, WAKU_V0
from wakunode.errors import BadStatus

__all__ = [
    "RateLimits",
    "StatusOptions",
    "bits_to_pow",
    "decode_options",
    "decode_shh_bloom",
    "decode_shh_pow",
    "decode_shh_status",
    "decode_waku0_status",
    "encode_options",
    "encode_shh_status",
    "encode_waku0_status",
    "pow_to_bits",
]

_UINT64 = 64


def pow_to_bits(pow_value: float) -> int:
    """Go ``math.Float64bits``: the IEEE-754 bits of a float64 as an unsigned 64-bit integer."""
    return int.from_bytes(struct.pack(">d", pow_value), "big")


def bits_to_pow(bits: int) -> float:
    """Go ``math.Float64frombits``."""
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


@dataclass(frozen=True, slots=True)
class RateLimits:
    """status-go ``RateLimits``: limits per second a peer says it enforces, ``[IP, PeerID, Topic]``."""

    ip: int = 0
    """Limit per remote IP."""
    peer_id: int = 0
    """Limit per peer ID."""
    topic: int = 0
    """Limit per topic (never enforced by status-go)."""

    def encode_items(self) -> list[int]:
        """The RLP list items."""
        return [self.ip, self.peer_id, self.topic]


@dataclass(frozen=True, slots=True)
class StatusOptions:
    """Options of a Status / Status Update; ``None`` = absent (status-go's nil pointer).

    ``topic_interest=()`` (present but empty) means "interested in nothing"; ``None`` means "use the bloom".
    """

    pow_requirement: float | None = None
    """Key 0: minimum PoW the sender wants forwarded to it."""
    bloom: bytes | None = None
    """Key 1: 0 or 64 bytes; empty or all-ones = full node."""
    light_node: bool | None = None
    """Key 2: the sender is a light node."""
    confirmations: bool | None = None
    """Key 3: the sender answers Messages with Message Response + Batch Ack."""
    packet_rate_limits: RateLimits | None = None
    """Key 4: packets per second the sender enforces."""
    topic_interest: tuple[bytes, ...] | None = None
    """Key 5: exact topics wanted (≤ 10 000); takes precedence over the bloom."""
    bytes_rate_limits: RateLimits | None = None
    """Key 6 (waku/1 only): bytes per second the sender enforces."""

    def validate(self) -> None:
        """Raise :class:`BadStatus` as status-go ``Validate`` + ``setOptions`` do (§3.4)."""
        pow_value = self.pow_requirement
        if pow_value is not None and (math.isnan(pow_value) or math.isinf(pow_value) or pow_value < 0):
            raise BadStatus("sent bad status message: invalid pow")
        if self.bloom is not None and len(self.bloom) not in (0, BLOOM_SIZE):
            raise BadStatus(f"sent bad status message: wrong bloom filter size {len(self.bloom)}")
        if self.topic_interest is not None:
            if len(self.topic_interest) > MAX_TOPIC_INTEREST:
                # status-go's text says 1000 although the check is > 10000 (§1.6).
                raise BadStatus("topic interest is limited by 1000 items")
            if any(len(t) != TOPIC_LENGTH for t in self.topic_interest):
                raise BadStatus("topic interest entries must be 4 bytes")

    def with_defaults(self) -> StatusOptions:
        """status-go ``WithDefaults`` for a handshake: PoW 0.001, no light node, no confirmations, zero rate
        limits, full bloom (unless topic interest is given, which wins anyway)."""
        return replace(
            self,
            pow_requirement=DEFAULT_PEER_POW if self.pow_requirement is None else self.pow_requirement,
            light_node=bool(self.light_node),
            confirmations=bool(self.confirmations),
            packet_rate_limits=self.packet_rate_limits or RateLimits(),
            bytes_rate_limits=self.bytes_rate_limits or RateLimits(),
            bloom=FULL_BLOOM if self.bloom is None else self.bloom,
        )

    def merged(self, update: StatusOptions) -> StatusOptions:
        """These options with every field present in ``update`` replaced (a Status Update, §3.4).

        Topic interest and bloom exclude each other as in status-go ``setOptions``: a new topic interest
        clears the bloom, a new bloom (without topic interest) clears the topic interest.
        """
        out = self
        for name in (
            "pow_requirement",
            "light_node",
            "confirmations",
            "packet_rate_limits",
            "bytes_rate_limits",
        ):
            value = getattr(update, name)
            if value is not None:
                out = replace(out, **{name: value})
        if update.topic_interest is not None:
            out = replace(out, topic_interest=update.topic_interest, bloom=None)
        elif update.bloom is not None:
            out = replace(out, bloom=update.bloom, topic_interest=None)
        return out


# ---------------------------------------------------------------------------------------------- waku


def _bool_item(value: bool) -> bytes:
    return b"\x01" if value else b""


def _option_items(opts: StatusOptions, *, waku0: bool) -> list[tuple[int, rlp.Encodable]]:
    items: list[tuple[int, rlp.Encodable]] = []
    if opts.pow_requirement is not None:
        items.append((0, pow_to_bits(opts.pow_requirement)))
    if opts.bloom is not None:
        items.append((1, opts.bloom))
    if opts.light_node is not None:
        items.append((2, _bool_item(opts.light_node)))
    if opts.confirmations is not None:
        items.append((3, _bool_item(opts.confirmations)))
    if opts.packet_rate_limits is not None:
        items.append((4, opts.packet_rate_limits.encode_items()))
    if opts.topic_interest is not None:
        items.append((5, list(opts.topic_interest)))
    if opts.bytes_rate_limits is not None and not waku0:  # waku/0 has no key 6 (§3.5)
        items.append((6, opts.bytes_rate_limits.encode_items()))
    return items


def _options_list(opts: StatusOptions, *, waku0: bool) -> list[rlp.Encodable]:
    pairs: list[rlp.Encodable] = []
    for key, value in _option_items(opts, waku0=waku0):
        pairs.append([str(key).encode("ascii") if waku0 else key, value])
    return pairs


def encode_options(opts: StatusOptions, *, version: int = 1) -> bytes:
    """Encode options as a waku Status Update payload (and, for waku/1, the Status payload).

    ``version`` 1 uses integer keys 0–6, version 0 string keys ``"0"``…``"5"``; ascending, absent omitted.
    """
    return rlp.encode(_options_list(opts, waku0=version == WAKU_V0))


def encode_waku0_status(opts: StatusOptions) -> bytes:
    """Encode a waku/0 Status payload ``[0, options]`` (§3.5)."""
    return rlp.encode([WAKU_V0, _options_list(opts, waku0=True)])


def _rate_limits(item: rlp.Item, what: str) -> RateLimits:
    if not isinstance(item, list) or len(item) != 3:  # Go struct decoding: exactly three fields
        raise BadStatus(f"{what}: expected a list of 3 integers")
    ip, peer, topic = (rlp.to_uint(x, _UINT64, what) for x in item)
    return RateLimits(ip, peer, topic)


def _topics(item: rlp.Item) -> tuple[bytes, ...]:
    if not isinstance(item, list):
        raise BadStatus("topic interest: expected a list")
    if len(item) > MAX_TOPIC_INTEREST:
        raise BadStatus("topic interest is limited by 1000 items")
    out = []
    for topic in item:
        if not isinstance(topic, bytes) or len(topic) != TOPIC_LENGTH:
            raise BadStatus("topic interest: topics must be 4-byte strings")
        out.append(topic)
    return tuple(out)


def _set_option(fields: dict[str, object], key: int, value: rlp.Item) -> None:
    """Decode one known option into ``fields`` (later duplicates overwrite, as Go re-decodes)."""
    if key == 0:
        fields["pow_requirement"] = bits_to_pow(rlp.to_uint(value, _UINT64, "pow-requirement"))
    elif key == 1:
        if not isinstance(value, bytes):
            raise BadStatus("bloom-filter: expected a byte string")
        fields["bloom"] = value
    elif key in (2, 3):
        fields["light_node" if key == 2 else "confirmations"] = rlp.to_bool(value)
    elif key in (4, 6):
        name = "packet_rate_limits" if key == 4 else "bytes_rate_limits"
        fields[name] = _rate_limits(value, name)
    elif key == 5:
        fields["topic_interest"] = _topics(value)


def _decode_pairs(item: rlp.Item, *, waku0: bool) -> StatusOptions:
    if not isinstance(item, list):
        raise BadStatus("expected an outer list")
    known = range(6) if waku0 else range(7)
    fields: dict[str, object] = {}
    for pair in item:
        if not isinstance(pair, list) or not pair:
            raise BadStatus("expected an inner list")
        raw_key = pair[0]
        if not isinstance(raw_key, bytes):
            raise BadStatus("invalid key: expected a string")
        if waku0:  # string keys "0".."5"; anything else is an unknown key
            key = int(raw_key) if raw_key.isdigit() and len(raw_key) == 1 else -1
        else:
            key = rlp.to_uint(raw_key, _UINT64, "option key")
        if key not in known:
            continue  # unknown option (a newer peer): ignored (RFC6), see the module docstring
        if len(pair) != 2:
            raise BadStatus(f"option {key}: expected [key, value]")
        _set_option(fields, key, pair[1])
    opts = StatusOptions(**fields)  # type: ignore[arg-type]  # values typed by _set_option
    opts.validate()
    return opts


def _decode_rlp(payload: bytes) -> rlp.Item:
    try:
        return rlp.decode(payload)
    except CodecError as err:
        raise BadStatus(f"failed to decode status options: {err.message}") from err


def decode_options(payload: bytes, *, version: int = 1) -> StatusOptions:
    """Decode a waku Status Update payload (and, for waku/1, a Status payload); :class:`BadStatus` on error.

    The result is validated (PoW, bloom length, topic count) but has no defaults applied.
    """
    try:
        return _decode_pairs(_decode_rlp(payload), waku0=version == WAKU_V0)
    except CodecError as err:
        raise BadStatus(f"failed to decode status options: {err.message}") from err


def decode_waku0_status(payload: bytes) -> StatusOptions:
    """Decode a waku/0 Status ``[0, options, …]``; BadStatus on a version mismatch or bad options."""
    item = _decode_rlp(payload)
    if not isinstance(item, list) or len(item) < 2:
        raise BadStatus("waku/0 status must be [version, options]")
    try:
        version = rlp.to_uint(item[0], _UINT64, "version")
        if version != WAKU_V0:
            raise BadStatus(f"protocol version mismatch {version} != {WAKU_V0}")
        return _decode_pairs(item[1], waku0=True)
    except CodecError as err:
        raise BadStatus(f"failed to decode status options: {err.message}") from err


# ---------------------------------------------------------------------------------------------- shh/6


def encode_shh_status(opts: StatusOptions) -> bytes:
    """Encode a shh/6 Status ``[6, pow_bits, bloom, light, confirmations, rateLimits]`` (§3.1, §3.2).

    geth reads the first four and ignores the rest; status-go's shh reads all six. Absent fields get geth's
    values (PoW 0, full bloom, not light, no confirmations, zero limits): the list is positional.
    """
    limits = opts.packet_rate_limits or RateLimits()
    return rlp.encode(
        [
            SHH_VERSION,
            pow_to_bits(opts.pow_requirement or 0.0),
            FULL_BLOOM if opts.bloom is None else opts.bloom,
            _bool_item(bool(opts.light_node)),
            _bool_item(bool(opts.confirmations)),
            limits.encode_items(),
        ]
    )


def decode_shh_status(payload: bytes) -> StatusOptions:
    """Decode a shh/6 Status as geth ``handshake`` reads it, with status-go's two extras.

    Only the version is mandatory and must be 6. Each later field is read only if every earlier one was
    present and well-typed (a field of the wrong type ends the optional part, as geth's ``err == nil``
    checks do); a PoW that is NaN/Inf/negative or a bloom that is not 0 or 64 bytes is a BadStatus.
    Absent fields get geth's peer defaults: PoW 0, full bloom, not light.
    """
    item = _decode_rlp(payload)
    if not isinstance(item, list) or not item:
        raise BadStatus("sent bad status message: expected a list starting with the version")
    try:
        version = rlp.to_uint(item[0], _UINT64, "version")
    except CodecError as err:
        raise BadStatus(f"sent bad status message: {err.message}") from err
    if version != SHH_VERSION:
        raise BadStatus(f"protocol version mismatch {version} != {SHH_VERSION}")
    fields: dict[str, object] = {"pow_requirement": 0.0, "bloom": FULL_BLOOM, "light_node": False}
    readers: tuple[tuple[str, Callable[[rlp.Item], object]], ...] = (
        ("pow_requirement", _shh_pow),
        ("bloom", _shh_bloom),
        ("light_node", rlp.to_bool),
        ("confirmations", rlp.to_bool),
        ("packet_rate_limits", _shh_limits),
    )
    for (name, read), value in zip(readers, item[1:], strict=False):
        try:
            fields[name] = read(value)
        except (CodecError, BadStatus):
            break
    opts = StatusOptions(**fields)  # type: ignore[arg-type]  # values typed by the readers
    opts.validate()
    return opts


def _shh_pow(item: rlp.Item) -> float:
    return bits_to_pow(rlp.to_uint(item, _UINT64, "pow"))


def _shh_limits(item: rlp.Item) -> RateLimits:
    return _rate_limits(item, "rate limits")


def _shh_bloom(item: rlp.Item) -> bytes:
    if not isinstance(item, bytes):
        raise BadStatus("bloom: expected a byte string")
    return item


def decode_shh_pow(payload: bytes) -> float:
    """Decode a shh/6 PoW requirement packet (code 2): one uint64 of float bits; BadStatus if invalid."""
    try:
        value = bits_to_pow(rlp.to_uint(rlp.decode(payload), _UINT64, "pow"))
    except CodecError as err:
        raise BadStatus("invalid powRequirementCode message") from err
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise BadStatus("invalid value in powRequirementCode message")
    return value


def decode_shh_bloom(payload: bytes) -> bytes:
    """Decode a shh/6 bloom exchange packet (code 3): exactly 64 bytes; BadStatus otherwise."""
    try:
        item = rlp.decode(payload)
    except CodecError as err:
        raise BadStatus("invalid bloom filter exchange message") from err
    if not isinstance(item, bytes) or len(item) != BLOOM_SIZE:
        raise BadStatus("invalid bloom filter exchange message")
    return item
