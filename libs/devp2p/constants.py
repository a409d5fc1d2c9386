"""RLPx / devp2p constants, each with the formula or source it comes from.

Section numbers refer to docs/protocol-notes.md; Go names to go-ethereum ``p2p/rlpx/rlpx.go`` (G1026),
``p2p/peer.go`` and ``p2p/server.go`` (G920). Limits that a deployment may want to tune are only *defaults*
here: the live values are in :class:`devp2p.config.Timeouts` and :class:`devp2p.config.ServerConfig`.
"""

from __future__ import annotations

from typing import Final

# --- keys, hashes, signatures (§5.2) ----------------------------------------------------------------------

#: Public key on the wire: ``X ‖ Y`` without the ``0x04`` prefix (geth ``pubLen``).
PUBKEY_LENGTH: Final = 64
#: Recoverable signature ``R ‖ S ‖ V`` (geth ``sigLen = crypto.SignatureLength``).
SIGNATURE_LENGTH: Final = 65
#: Keccak-256 digest length (geth ``shaLen``).
HASH_LENGTH: Final = 32
#: Handshake nonces are hash-sized (geth ``shaLen``).
NONCE_LENGTH: Final = HASH_LENGTH
#: Version field we put into auth and ack (EIP-8 ``authMsgV4.Version``; any received value is accepted).
HANDSHAKE_VERSION: Final = 4

# --- ECIES and handshake packet sizes (§5.1, §5.2) ---------------------------------------------------------

#: Bytes ECIES adds: ephemeral point 65 + IV 16 + HMAC-SHA256 32 (geth ``eciesOverhead``).
ECIES_OVERHEAD: Final = 65 + 16 + 32
#: Pre-EIP-8 auth plaintext: sig ‖ keccak(ephemeral pub) ‖ pub ‖ nonce ‖ 0x00 (geth ``authMsgLen``) = 194.
AUTH_PLAIN_LENGTH: Final = SIGNATURE_LENGTH + HASH_LENGTH + PUBKEY_LENGTH + NONCE_LENGTH + 1
#: Pre-EIP-8 ack plaintext: ephemeral pub ‖ nonce ‖ 0x00 (geth ``authRespLen``) = 97.
ACK_PLAIN_LENGTH: Final = PUBKEY_LENGTH + NONCE_LENGTH + 1
#: Pre-EIP-8 auth on the wire (geth ``encAuthMsgLen``) = 307; also the least an EIP-8 auth can be.
ENC_AUTH_PLAIN_LENGTH: Final = AUTH_PLAIN_LENGTH + ECIES_OVERHEAD
#: Pre-EIP-8 ack on the wire (geth ``encAuthRespLen``) = 210; also the least an EIP-8 ack can be.
ENC_ACK_PLAIN_LENGTH: Final = ACK_PLAIN_LENGTH + ECIES_OVERHEAD
#: EIP-8 packets start with the ciphertext size as 2 big-endian bytes, which is also the ECIES MAC data.
EIP8_PREFIX_LENGTH: Final = 2
#: EIP-8 padding: "at least 100 bytes to be distinguishable from pre-EIP-8"; geth v1.10 pads
#: ``mrand.Intn(100) + 100``, i.e. 100–199 zero bytes (§5.2).
EIP8_MIN_PADDING: Final = 100
#: Largest padding we add (inclusive).
EIP8_MAX_PADDING: Final = 199
#: Largest EIP-8 ciphertext we read. geth reads up to ``2^16 − 1``; real packets are under 600 bytes (an auth
#: is ~170 bytes of RLP + ≤ 299 padding + 113), so 4 KiB leaves 7× room for future fields while bounding
#: what an unauthenticated peer makes us buffer. Checked before the body is read.
MAX_HANDSHAKE_PACKET_SIZE: Final = 4096

# --- framing (§5.4, §5.5) -----------------------------------------------------------------------------------

#: AES block size; headers and frame bodies are padded to it.
AES_BLOCK_SIZE: Final = 16
#: Encrypted header: frame-size (3) ‖ header-data ‖ zero padding, one AES block.
FRAME_HEADER_LENGTH: Final = AES_BLOCK_SIZE
#: Header MAC and frame MAC: the first 16 bytes of the running Keccak digest.
FRAME_MAC_LENGTH: Final = 16
#: What is read before a frame body: encrypted header ‖ header MAC.
FRAME_PREAMBLE_LENGTH: Final = FRAME_HEADER_LENGTH + FRAME_MAC_LENGTH
#: Header data geth always writes: RLP ``[0, 0]`` (capability id, context id); ignored on read (geth
#: ``zeroHeader``).
FRAME_HEADER_DATA: Final = b"\xc2\x80\x80"
#: Frame size field is 24 bits (geth ``maxUint24 = ^uint32(0) >> 8``).
MAX_UINT24: Final = 2**24 - 1
#: Largest frame (frame-size field) the format allows.
MAX_FRAME_SIZE: Final = MAX_UINT24
#: Largest snappy-decoded message: geth rejects a decoded length > ``maxUint24`` before decompressing.
SNAPPY_MAX_DECODED_SIZE: Final = MAX_UINT24
#: A message id is an RLP uint64: at most 1 header byte + 8 value bytes.
MAX_MSG_ID_LENGTH: Final = 1 + 8

# --- base protocol (§5.6, §5.7) -----------------------------------------------------------------------------

#: p2p version we announce in Hello (geth ``baseProtocolVersion``).
P2P_VERSION: Final = 5
#: Snappy is used when the remote Hello version is at least this (EIP-706, geth ``snappyProtocolVersion``).
SNAPPY_PROTOCOL_VERSION: Final = 5
#: Message ids 0x00–0x0f are the base protocol's; subprotocols are packed from here (``baseProtocolLength``).
BASE_PROTOCOL_LENGTH: Final = 16
#: Largest Hello / Disconnect / Ping / Pong payload (geth ``baseProtocolMaxMsgSize = 2 * 1024``).
BASE_PROTOCOL_MAX_MSG_SIZE: Final = 2 * 1024
#: Largest frame accepted before the Hello exchange completes: a Hello is never compressed, so its frame
#: is the message id plus at most the base-protocol limit. Bounds what an unidentified peer can send.
MAX_PRE_HELLO_FRAME_SIZE: Final = MAX_MSG_ID_LENGTH + BASE_PROTOCOL_MAX_MSG_SIZE
#: Hello node id = the 64-byte public key.
NODE_ID_LENGTH: Final = PUBKEY_LENGTH
#: Base-protocol message ids (§5.7).
HELLO_CODE: Final = 0x00
DISCONNECT_CODE: Final = 0x01
PING_CODE: Final = 0x02
PONG_CODE: Final = 0x03
#: Client id strings from peers are trimmed to this many characters before logging or exposing them
#: (the edge-peer API exposes 128 bytes).
MAX_LOGGED_STRING: Final = 128

# --- timeouts, seconds (§5.7, protocol-notes §5.9) ----------------------------------------------------------

#: Encryption handshake + Hello exchange must finish within this (geth ``handshakeTimeout``).
HANDSHAKE_TIMEOUT: Final = 5.0
#: Read deadline per frame once the session runs (geth ``frameReadTimeout``).
FRAME_READ_TIMEOUT: Final = 30.0
#: Write deadline per frame (geth ``frameWriteTimeout``).
FRAME_WRITE_TIMEOUT: Final = 20.0
#: Our Ping period (geth ``pingInterval``); must stay well below the remote's 30 s read deadline.
PING_INTERVAL: Final = 15.0
#: Deadline for writing a Disconnect before closing (geth ``discWriteTimeout``).
DISCONNECT_WRITE_TIMEOUT: Final = 1.0

# --- server limits (protocol-notes §5.9, docs/design.md "Limits and defences") ------------------------------

#: Default peer limit (geth's default ``MaxPeers`` on the command line).
DEFAULT_MAX_PEERS: Final = 50
#: Concurrent inbound handshakes (geth ``defaultMaxPendingPeers``).
DEFAULT_MAX_PENDING_PEERS: Final = 50
#: One inbound attempt per source IP per this many seconds (geth ``inboundThrottleTime``).
INBOUND_THROTTLE_TIME: Final = 30.0
#: Messages queued per subprotocol before the read loop waits (geth uses an unbuffered channel: 0).
PROTOCOL_QUEUE_SIZE: Final = 8
#: Default devp2p TCP port.
DEFAULT_PORT: Final = 30303
