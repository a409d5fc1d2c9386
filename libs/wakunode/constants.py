"""Message codes and defaults of waku/1, waku/0 and shh/6, each with its source.

Section numbers refer to docs/protocol-notes.md; Go names to status-go ``waku/v1/const.go``,
``waku/v0/const.go`` and ``waku/common/const.go`` (SG), go-ethereum v1.9.20 ``whisper/whisperv6/doc.go``
(G920) and status-go v0.78 ``whisper/const.go`` (SG078). Codes are *local* to the protocol: devp2p adds the
negotiated offset (§5.6).
"""

from __future__ import annotations

from typing import Final

from wakucodec.constants import (
    DEFAULT_MAX_MESSAGE_SIZE,
    DEFAULT_PEER_POW,
    DEFAULT_SYNC_ALLOWANCE,
    EXPIRATION_CYCLE_S,
    STATUS_MIN_POW,
    TRANSMISSION_CYCLE_S,
)

__all__ = [
    "BATCH_ACK_CODE",
    "BLOOM_EXCHANGE_CODE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "DEFAULT_PEER_POW",
    "DEFAULT_SYNC_ALLOWANCE",
    "ENVELOPE_OTHER_ERROR",
    "ENVELOPE_TIME_NOT_SYNCED",
    "EXPIRATION_CYCLE_S",
    "MESSAGES_CODE",
    "MESSAGE_RESPONSE_CODE",
    "MESSAGE_RESPONSE_VERSION",
    "NUMBER_OF_MESSAGE_CODES",
    "P2P_MESSAGE_CODE",
    "P2P_REQUEST_CODE",
    "P2P_REQUEST_COMPLETE_CODE",
    "POW_REQUIREMENT_CODE",
    "RATE_LIMITING_CODE",
    "SETTINGS_TOLERANCE_S",
    "SHH_VERSION",
    "STATUS_CODE",
    "STATUS_MIN_POW",
    "STATUS_UPDATE_CODE",
    "TRANSMISSION_CYCLE_S",
    "WAKU_V0",
    "WAKU_V1",
]

# --- capabilities (§3.3, §3.5, §3.1) ------------------------------------------------------------------------

#: ``waku/1``: Status is the options list itself (RFC6 changelog 1.0 "Removed version from handshake").
WAKU_V1: Final = 1
#: ``waku/0``: Status is ``[0, options]`` with string option keys (§3.5).
WAKU_V0: Final = 0
#: ``shh/6``: Status is ``[6, pow, bloom, light, …]`` (§3.1, §3.2).
SHH_VERSION: Final = 6
#: ``NumberOfMessageCodes``: every protocol here reserves 128 ids (§3.1, §3.3).
NUMBER_OF_MESSAGE_CODES: Final = 128

# --- message codes (§3.1–§3.3) ------------------------------------------------------------------------------

#: Status handshake (all three); a second Status is ignored (§3.4).
STATUS_CODE: Final = 0
#: Messages: an RLP list of envelopes (all three).
MESSAGES_CODE: Final = 1
#: shh/6 only: PoW requirement, one uint64 of float64 bits (G920 ``powRequirementCode``).
POW_REQUIREMENT_CODE: Final = 2
#: shh/6 only: bloom filter exchange, a 64-byte string (G920 ``bloomFilterExCode``).
BLOOM_EXCHANGE_CODE: Final = 3
#: Batch Ack: keccak256 of the acknowledged Messages payload (§3.6).
BATCH_ACK_CODE: Final = 11
#: Message Response: ``[1, [batchHash, [[envHash, code, text], …]]]`` (§3.6).
MESSAGE_RESPONSE_CODE: Final = 12
#: status-go shh/6 rate-limits announcement (SG078); received and ignored.
RATE_LIMITING_CODE: Final = 20
#: waku Status Update: the options that changed (22 decimal, not 0x22; §3.3, §9 item 4).
STATUS_UPDATE_CODE: Final = 22
#: P2P Request Complete (0x7d): the mailserver's end-of-answer (§3.7).
P2P_REQUEST_COMPLETE_CODE: Final = 125
#: P2P Request (0x7e): a history request (§3.7, §4.1).
P2P_REQUEST_CODE: Final = 126
#: P2P Message (0x7f): history envelopes, accepted from trusted peers only (§3.7).
P2P_MESSAGE_CODE: Final = 127

# --- confirmations (protocol-notes §3.6) --------------------------------------------------------------------

#: Message Response version; receivers ignore any other.
MESSAGE_RESPONSE_VERSION: Final = 1
#: status-go ``EnvelopeTimeNotSynced`` (``iota + 1`` counted inside its const block = 21; §3.6 says the
#: number is inferred and informational; the specs say 1).
ENVELOPE_TIME_NOT_SYNCED: Final = 21
#: status-go ``EnvelopeOtherError`` (the next value of the same block).
ENVELOPE_OTHER_ERROR: Final = 22

# --- timing -------------------------------------------------------------------------------------------------

#: How long a replaced PoW requirement / bloom / topic interest of ours is still tolerated on receipt, so
#: peers have time to learn the new value: status-go ``2 * DefaultSyncAllowance`` seconds (SG ``waku.go``
#: ``SetMinimumPoW``/``SetBloomFilter`` with ``tolerate``).
SETTINGS_TOLERANCE_S: Final = 2 * DEFAULT_SYNC_ALLOWANCE
