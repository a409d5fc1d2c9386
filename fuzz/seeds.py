"""Write the seed corpora (``fuzz/corpus/<harness>/``) from the published vectors and our encoders.

``python -m fuzz.seeds`` (``make fuzz-seeds``) rewrites them; the output is deterministic (fixed keys,
nonces and padding), so a re-run changes nothing unless the codecs changed. Sources, per protocol-notes §7:
the envelope and PoW vectors (§7.1), the EIP-8 auth/ack and Hello vectors (§7.4, from
``tests/unit/devp2p/vectors.py``), the status-options vector (§7.5), and one valid message of every form
and dialect built with our encoders. No real peer's bytes are committed anywhere in the tests to take.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from devp2p.eip8 import open_eip8
from devp2p.frame import FrameCodec
from devp2p.hello import Capability, HelloPayload
from devp2p.messages import encode_frame_data
from devp2p.p2p import Disconnect, Hello
from fuzz.harnesses import NAMES
from fuzz.support import session_pair
from mailmesh.common.v1 import common_pb2
from mailmesh.history.v1 import history_pb2
from mailmesh.send.v1 import send_pb2
from tests.unit.devp2p import vectors as v
from wakucodec import rlp, secp, symmetric
from wakucodec.bloom import FULL_BLOOM, topic_to_bloom
from wakucodec.envelope import encode_envelopes, make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.payload import build
from wakucodec.requestdialects import encode_payload, encode_plain
from wakucodec.responses import (
    CompletionForm,
    encode_completion,
    encode_completion_error,
    encode_p2p_messages,
)
from wakunode.confirmations import EnvelopeError, encode_batch_ack, encode_message_response
from wakunode.peerstate import Flavor
from wakunode.protocol import encode_status
from wakunode.status_options import RateLimits, StatusOptions, encode_options, pow_to_bits

__all__ = ["SEEDS", "main"]

CORPUS = Path(__file__).resolve().parent / "corpus"
NOW = 1_700_000_000
TOPIC = bytes.fromhex("f26e7779")
KEY = symmetric.key_from_password(symmetric.MAILSERVER_PASSWORD)
HASH = bytes(range(32))
CURSOR = bytes(range(100, 136))

# §7.1: Expiry 0, TTL 1, Topic 0, Data deadbeef, Nonce 276 (and the 4-item short form, which is invalid).
ENVELOPE_VECTOR = bytes.fromhex("cf8001840000000084deadbeef820114")
SHORT_ENVELOPE = bytes.fromhex("cc8001840000000084deadbeef")
# §7.5 / protocol-notes §3.4: every waku/1 option at its default.
STATUS_VECTOR = bytes.fromhex("f85ac28080f84301b840" + "ff" * 64 + "c20280c20380c504c3808080c506c3808080")

Seeds = dict[str, bytes]


def _envelopes() -> list[bytes]:
    small = make_envelope(expiry=NOW + 50, ttl=50, topic=TOPIC, data=b"\x01" * 48, nonce=7)
    large = make_envelope(expiry=NOW, ttl=10, topic=bytes(4), data=bytes(range(256)) * 4, nonce=2**40)
    return [ENVELOPE_VECTOR, small.raw, large.raw]


def _requests() -> Seeds:
    topics = (TOPIC, bytes.fromhex("aabbccdd"))
    full = HistoryRequest(lower=NOW - 3600, upper=NOW, bloom=topic_to_bloom(TOPIC), limit=100, cursor=CURSOR)
    out = {
        "status-envelope": encode_payload(
            HistoryRequest(lower=NOW - 60, topics=topics, limit=1000), Dialect.STATUS_ENVELOPE
        ),
        "status-legacy-6": encode_payload(full, Dialect.STATUS_LEGACY_6),
        "spec-5": encode_payload(HistoryRequest(bloom=FULL_BLOOM), Dialect.SPEC_5),
        "spec-6-topics": encode_payload(
            HistoryRequest(lower=1, upper=2, topics=topics), Dialect.SPEC_6_TOPICS
        ),
        "geth-binary-8": encode_payload(
            HistoryRequest(lower=5, upper=9, bloom=FULL_BLOOM), Dialect.GETH_BINARY
        ),
        "geth-binary-72": encode_payload(HistoryRequest(bloom=topic_to_bloom(TOPIC)), Dialect.GETH_BINARY),
        "geth-binary-76": encode_payload(HistoryRequest(bloom=FULL_BLOOM, limit=20), Dialect.GETH_BINARY),
        "geth-binary-112": encode_payload(full, Dialect.GETH_BINARY),
    }
    out["status-plain"] = encode_plain(
        HistoryRequest(lower=NOW - 60, upper=NOW, topics=topics, limit=1000), b"0" * 32
    )
    return out


def _sealed(inner: bytes, *, signed: bool) -> bytes:
    plaintext = build(inner, signing_key=v.STATIC_KEY_A if signed else None, padding=b"\x00" * 7)
    data = symmetric.encrypt(KEY, plaintext, nonce=bytes(12))
    return make_envelope(expiry=NOW + 50, ttl=50, topic=bytes(4), data=data).raw


def _pad_status(payload: bytes, residue: int, *, positional: bool) -> bytes:
    """Append an ignored element (an unknown option, or a 7th shh field) until ``len % 3 == residue``."""
    if len(payload) % 3 == residue:
        return payload
    items = rlp.decode(payload)
    assert isinstance(items, list)
    for size in range(1, 8):
        extra: rlp.Item = b"x" * size if positional else [rlp.encode_uint(99), b"x" * size]
        padded = rlp.encode([*items, extra])
        if len(padded) % 3 == residue:
            return padded
    raise AssertionError("no padding reaches the residue")


def _status() -> Seeds:
    every = StatusOptions(
        pow_requirement=6.02,
        bloom=topic_to_bloom(bytes.fromhex("aabbccdd")),
        light_node=True,
        confirmations=True,
        packet_rate_limits=RateLimits(10, 5, 1),
        topic_interest=(TOPIC, bytes(4)),
        bytes_rate_limits=RateLimits(10, 5, 1),
    )
    defaults = StatusOptions().with_defaults()
    out = {"vector-3.4": _pad_status(STATUS_VECTOR, 0, positional=False)}
    for name, options in (
        ("every", every),
        ("defaults", defaults),
        ("pow", StatusOptions(pow_requirement=2.05)),
    ):
        out[f"waku1-{name}"] = _pad_status(encode_status(Flavor.WAKU1, options), 0, positional=False)
        out[f"waku0-update-{name}"] = _pad_status(encode_options(options, version=0), 1, positional=False)
        out[f"waku0-{name}"] = encode_status(Flavor.WAKU0, options)  # [0, options]: residue as it comes
        out[f"shh6-{name}"] = _pad_status(encode_status(Flavor.SHH6, options), 2, positional=True)
    out["shh-pow"] = rlp.encode(pow_to_bits(0.2))
    out["shh-bloom"] = rlp.encode(topic_to_bloom(TOPIC))
    return out


def _devp2p() -> dict[str, Seeds]:
    a_pub = secp.public_key(v.STATIC_KEY_A)
    caps = (Capability("waku", 1), Capability("waku", 0), Capability("shh", 6), Capability("eth", 63))
    hello = Hello.encode(HelloPayload(5, "Geth/v1.9.20-stable/linux-amd64/go1.15", caps, 30303, a_pub))
    old_hello = Hello.encode(HelloPayload(4, "status-go/v0.50.0", caps[:1], 0, a_pub))
    remote, _ = session_pair()
    codec = FrameCodec.from_secrets(remote)
    messages = encode_p2p_messages(_envelopes())
    return {
        "eip8_auth": {
            "auth1-plain": v.AUTH_1,
            "auth2": v.AUTH_2,
            "auth3": v.AUTH_3,
            "auth2-plaintext": open_eip8(v.AUTH_2, v.STATIC_KEY_B),
            "auth3-plaintext": open_eip8(v.AUTH_3, v.STATIC_KEY_B),
        },
        "eip8_ack": {
            "ack1-plain": v.ACK_1,
            "ack2": v.ACK_2,
            "ack3": v.ACK_3,
            "ack2-plaintext": open_eip8(v.ACK_2, v.STATIC_KEY_A),
            "ack3-plaintext": open_eip8(v.ACK_3, v.STATIC_KEY_A),
        },
        "hello": {
            "hello-waku": b"\x80" + hello,
            "hello-v4": b"\x80" + old_hello,
            "hello-eip8-vector": b"\x80" + v.HELLO_EIP8,
            "disconnect": b"\x01" + Disconnect.encode(4),
            "ping": b"\x02\xc0",
        },
        "frame": {
            "golden-content": v.FRAME_GOLDEN_CONTENT,
            "frame-hello": codec.encode(b"\x80" + hello),
            "header-then-body": bytes.fromhex("000006") + bytes(32),
            "hello-data": b"\x80" + hello + b"\x00",
        },
        "frame_data": {
            "hello": b"\x80" + hello,
            "golden-content": v.FRAME_GOLDEN_CONTENT,
            "ping-snappy": encode_frame_data(2, b"\xc0", snappy=True),
            "messages-snappy": encode_frame_data(0x11, messages, snappy=True),
            "messages-plain": encode_frame_data(0x11, messages, snappy=False),
        },
    }


def _history() -> Seeds:
    forward, backward = common_pb2.DIRECTION_FORWARD, common_pb2.DIRECTION_BACKWARD
    queries = {
        "topics": history_pb2.HistoryQueryRequest(lower=NOW - 86400, upper=NOW, topics=[TOPIC], limit=100),
        "bloom-upper-0": history_pb2.HistoryQueryRequest(
            lower=NOW - 60, bloom=FULL_BLOOM, direction=backward
        ),
        "cursor": history_pb2.HistoryQueryRequest(lower=1, upper=NOW, topics=[TOPIC], cursor=CURSOR),
        "limits": history_pb2.HistoryQueryRequest(
            upper=NOW,
            bloom=FULL_BLOOM,
            limit=5000,
            max_batch_bytes=65536,
            max_batch_envelopes=3,
            direction=forward,
        ),
    }
    return {name: query.SerializeToString() for name, query in queries.items()}


def _send() -> Seeds:
    message = common_pb2.WakuMessage(payload=b"hello", content_topic="/waku/1/0xf26e7779/rfc26")
    full = common_pb2.WakuMessage(
        payload=bytes(100),
        content_topic="/0/status/1/chat/proto",
        version=1,
        timestamp=NOW * 10**9,
        meta=b"m",
    )
    requests = {
        "minimal": send_pb2.SendRequest(message=message),
        "full": send_pb2.SendRequest(
            request_id="0b7b3c1e-8f1a-4c2d-9e3f-123456789abc",
            pubsub_topic="/waku/2/rs/1/1",
            message=full,
            priority=common_pb2.SEND_PRIORITY_HIGH,
            confirm_mode=send_pb2.CONFIRM_MODE_STORE,
            monitor_content_topic=True,
        ),
        "other-topic": send_pb2.SendRequest(pubsub_topic="/waku/2/rs/16/32", message=message),
    }
    requests["full"].ttl.seconds = 60
    return {name: request.SerializeToString() for name, request in requests.items()}


def _enodes() -> Seeds:
    node_id = secp.public_key(v.STATIC_KEY_A).hex()
    return {
        "ipv4": f"enode://{node_id}@127.0.0.1:30303".encode(),
        "ipv6-discport": f"enode://{node_id}@[::1]:30303?discport=30301".encode(),
        "dns": f"enode://{node_id}@peer.example:443".encode(),
        "no-id": b"enode://127.0.0.1:30303",
    }


def _seeds() -> dict[str, Seeds]:
    envelopes = _envelopes()
    requests = _requests()
    error = EnvelopeError(HASH, 22, "very old envelope")
    seeds: dict[str, Seeds] = {
        "rlp": {
            "envelope": ENVELOPE_VECTOR,
            "status": STATUS_VECTOR,
            "hello": v.HELLO_EIP8,
            "nested": rlp.encode([[], [[]], [b"x" * 56]]),
        },
        "envelope": {
            "vector": ENVELOPE_VECTOR,
            "short": SHORT_ENVELOPE,
            "messages-empty": encode_envelopes([]),
            "messages-3": encode_p2p_messages(envelopes),
            "sealed-request": _sealed(requests["status-envelope"], signed=True),
        },
        "whisper_payload": {
            "unsigned": build(b"abc", padding=b"\xff\xee"),
            "signed": build(b"hello", signing_key=v.STATIC_KEY_A, padding=b"\x01\x02"),
            "two-byte-size": build(bytes(300), padding=b"\x00"),
            "no-payload": b"\x00" + bytes(16),
        },
        "request_payload": requests,
        "p2p_request": {
            **requests,
            **{
                f"sealed-{name}": _sealed(inner, signed=True)
                for name, inner in requests.items()
                if name != "status-plain"
            },
            "sealed-unsigned-spec-5": _sealed(requests["spec-5"], signed=False),
        },
        "p2p_messages": {"list": encode_p2p_messages(envelopes), "single": ENVELOPE_VECTOR, "empty": b"\xc0"},
        "completion": {
            "status-cursor": encode_completion(HASH, HASH[::-1], CURSOR),
            "status-done": encode_completion(HASH),
            "status-error": encode_completion_error(HASH, "rate limit exceeded"),
            "rfc8-cursor": encode_completion(HASH, HASH, b"c" * 20, form=CompletionForm.RLP_LIST),
            "rfc8-done": encode_completion(HASH, form=CompletionForm.RLP_LIST),
        },
        "status": _status(),
        "confirmations": {
            "response-ok": encode_message_response(HASH, []),
            "response-errors": encode_message_response(HASH, [error, EnvelopeError(HASH[::-1], 21, "")]),
            "response-v2": rlp.encode([2, [HASH, []]]),
            "batch-ack": encode_batch_ack(HASH),
        },
        **_devp2p(),
        "history_query": _history(),
        "content_topic": {
            "bridge": b"/waku/1/0xf26e7779/rfc26",
            "generation": b"/0/status/1/chat/proto",
            "public-chat": b"status",
            "upper-hex": b"/waku/1/F26E7779/rfc26",
        },
        "send_request": _send(),
        "enode": _enodes(),
    }
    assert set(seeds) == set(NAMES), set(NAMES) ^ set(seeds)
    return seeds


#: name → (file name → bytes); built lazily because it computes signatures and secrets.
SEEDS: Callable[[], dict[str, Seeds]] = _seeds


def main(argv: list[str] | None = None) -> None:
    """Rewrite ``fuzz/corpus/<harness>/`` for every harness (or those named); file names say what each is."""
    only = set(sys.argv[1:] if argv is None else argv)
    for harness, seeds in SEEDS().items():
        if only and harness not in only:
            continue
        target = CORPUS / harness
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name, data in sorted(seeds.items()):
            (target / f"{name}-{hashlib.sha1(data).hexdigest()[:8]}").write_bytes(data)
        print(f"{harness}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes")


if __name__ == "__main__":
    main()
