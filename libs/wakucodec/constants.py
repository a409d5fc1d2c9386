"""Protocol constants of Whisper v6 / Waku v1 that the envelope codecs and the mailserver share.

Every value is copied from go-ethereum v1.9.20 ``whisper/whisperv6/doc.go`` (G920) and status-go
``waku/common/const.go`` (SG), which agree on all of them; section numbers refer to
``docs/protocol-notes.md``. Derived values are written as the formula the Go source uses, so a reader
can check them against the source without doing arithmetic.

Message codes and p2p-level limits live with the protocol/peer code, not here: this module only holds what
the pure codecs (envelope, PoW, bloom) and their callers need.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BLOOM_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_MIN_POW",
    "DEFAULT_PEER_POW",
    "DEFAULT_SYNC_ALLOWANCE",
    "DEFAULT_TTL",
    "ENVELOPE_FIELD_COUNT",
    "ENVELOPE_HEADER_LENGTH",
    "EXPIRATION_CYCLE_S",
    "MAX_MESSAGE_SIZE",
    "MAX_QUERY_LIMIT",
    "MAX_SYNC_LIMIT",
    "MAX_TOPIC_INTEREST",
    "MESSAGE_QUEUE_LIMIT",
    "PAD_SIZE_LIMIT",
    "SEAL_BATCH_SIZE",
    "STATUS_LARGE_PAYLOAD_POW",
    "STATUS_LARGE_PAYLOAD_THRESHOLD",
    "STATUS_MIN_POW",
    "STATUS_SMALL_PAYLOAD_POW",
    "STATUS_TTL",
    "TOPIC_LENGTH",
    "TRANSMISSION_CYCLE_S",
    "UINT32_MAX",
    "UINT64_MAX",
    "VERY_OLD_ALLOWANCE",
]

# --- field widths (§1.1) -------------------------------------------------------------------------------

#: Bytes in a topic (``TopicLength``; Go type ``TopicType [4]byte``).
TOPIC_LENGTH: Final = 4
#: Largest value of the envelope's ``Expiry`` and ``TTL`` fields (Go ``uint32``): 2**32 - 1.
UINT32_MAX: Final = (1 << 32) - 1
#: Largest value of the envelope's ``Nonce`` field (Go ``uint64``): 2**64 - 1.
UINT64_MAX: Final = (1 << 64) - 1
#: Items in an envelope RLP list: ``[Expiry, TTL, Topic, Data, Nonce]`` (§1.1).
ENVELOPE_FIELD_COUNT: Final = 5
#: ``EnvelopeHeaderLength``: the fixed-width fields as the spec counts them, Expiry(4) + TTL(4) + Topic(4) +
#: Nonce(8) = 20. ``Envelope.size() = ENVELOPE_HEADER_LENGTH + len(Data)`` (§1.1) — not the RLP length.
ENVELOPE_HEADER_LENGTH: Final = 4 + 4 + TOPIC_LENGTH + 8

# --- bloom (§1.4) --------------------------------------------------------------------------------------

#: ``BloomFilterSize`` in bytes: 512 bits, addressed by 9-bit indices (a topic byte + 1 bit of topic[3]).
BLOOM_SIZE: Final = 512 // 8

# --- sizes (§1.5, §1.6) --------------------------------------------------------------------------------

#: ``MaxMessageSize``: hard ceiling for the configurable limit, ``10 * 1024 * 1024`` = 10 MiB.
MAX_MESSAGE_SIZE: Final = 10 * 1024 * 1024
#: ``DefaultMaxMessageSize``: ``1024 * 1024`` = 1 MiB; applies to the packet size and to ``Envelope.size``.
DEFAULT_MAX_MESSAGE_SIZE: Final = 1024 * 1024
#: ``padSizeLimit``: Whisper payloads are padded so that the plaintext is a multiple of this (§2.2).
PAD_SIZE_LIMIT: Final = 256

# --- proof of work (§1.3, §1.6) ------------------------------------------------------------------------

#: ``DefaultMinimumPoW`` of the geth / status-go library.
DEFAULT_MIN_POW: Final = 0.2
#: ``params.WakuMinimumPoW``: what a status-go node actually requires (SG ``params/defaults.go``).
STATUS_MIN_POW: Final = 0.000002
#: PoW a status-go peer is assumed to require when its Status packet omits the option:
#: ``math.Float64bits(0.001)`` (SG ``waku/v1/status_options.go`` ``WithDefaults``).
DEFAULT_PEER_POW: Final = 0.001
#: Status clients seal payloads up to this many bytes with :data:`STATUS_SMALL_PAYLOAD_POW`, larger ones
#: with :data:`STATUS_LARGE_PAYLOAD_POW` (SG0100 ``protocol/common/message_sender.go`` ``calculatePoW``).
STATUS_LARGE_PAYLOAD_THRESHOLD: Final = 50_000
#: PoW target of a Status client for payloads ``<= STATUS_LARGE_PAYLOAD_THRESHOLD`` bytes.
STATUS_SMALL_PAYLOAD_POW: Final = 0.002
#: PoW target of a Status client for payloads ``> STATUS_LARGE_PAYLOAD_THRESHOLD`` bytes.
STATUS_LARGE_PAYLOAD_POW: Final = 0.000002
#: ``Seal`` checks its deadline once per this many nonces (G920 ``envelope.go`` ``Seal``: ``i < 1024``).
SEAL_BATCH_SIZE: Final = 1024

# --- time (§1.5, §1.6) ---------------------------------------------------------------------------------

#: ``DefaultTTL`` in seconds, used by ``Wrap`` when the caller gives TTL 0.
DEFAULT_TTL: Final = 50
#: ``params.WakuTTL``: the TTL status-go's own node uses, in seconds.
STATUS_TTL: Final = 120
#: ``DefaultSyncAllowance`` in seconds: an envelope sent up to this far in the future is accepted (with its
#: PoW recomputed as ``diff = sent - now + 1``); further ahead → "envelope from future".
DEFAULT_SYNC_ALLOWANCE: Final = 10
#: ``DefaultSyncAllowance * 2``: an expired envelope is an error ("very old envelope") only when
#: ``Expiry + VERY_OLD_ALLOWANCE < now``; between that and ``Expiry < now`` it is dropped silently.
VERY_OLD_ALLOWANCE: Final = DEFAULT_SYNC_ALLOWANCE * 2
#: ``expirationCycle``: how often expired envelopes are purged from the in-memory pool, in seconds.
EXPIRATION_CYCLE_S: Final = 1.0
#: ``transmissionCycle``: how often queued envelopes are broadcast to peers, in seconds (300 ms).
TRANSMISSION_CYCLE_S: Final = 300 / 1000

# --- limits (§1.6, §4.2) -------------------------------------------------------------------------------

#: ``MaxTopicInterest``: most topics a peer may list in its topic-interest option (check is ``> 10000``;
#: the Go error text says 1000).
MAX_TOPIC_INTEREST: Final = 10_000
#: ``MaxLimitInMessagesRequest``: largest page a mailserver history request may ask for.
MAX_QUERY_LIMIT: Final = 1000
#: ``MaxLimitInSyncMailRequest``: largest page of a mailserver-to-mailserver sync request.
MAX_SYNC_LIMIT: Final = 1000
#: ``messageQueueLimit`` (G920): capacity of a peer's inbound envelope queue.
MESSAGE_QUEUE_LIMIT: Final = 1024
