"""``mailmesh`` — a Waku v1 / Whisper v6 command-line client for people and tests (JSON lines on stdout).

::

    mailmesh keygen
    mailmesh info    enode://…@127.0.0.1:30303
    mailmesh post    enode://… --topic 0x01020304 --sym-password pw --text hello --count 10
    mailmesh history enode://… --from 1700000000 --to 1700003600 --topic 0x01020304 \\
                     --dialect status-envelope --follow --out history.jsonl
    mailmesh history enode://… --topic 0x01020304 --dialect geth-binary   # geth sends no 0x7d: the page
                                                                            # ends 3 s after the last 0x7f
    mailmesh send --content-topic /waku/1/0x01020304/rfc26 --text hello     # through the REST gateway
    mailmesh watch --types message:sent,message:stored                      # its events (SSE) as JSON lines

``send``, ``subscribe``, ``messages`` and ``watch`` talk to the REST gateway (:mod:`mailmeshcli.rest`). The
other commands dial the enode with wakunode's client role (waku/1, waku/0, shh/6 offered; ``--caps`` narrows
them), trusts it as a mailserver, prints one JSON object per line and exits 0, or prints
``{"error": …}`` and exits 1 (2 for bad arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from devp2p.config import ServerConfig
from devp2p.enode import parse_enode
from devp2p.errors import DevP2PError
from mailmeshcli.compose import Encryption, compose_many, packets
from mailmeshcli.fetch import DIALECTS, HistoryOptions, HistoryRun, build_request, envelope_record, fetch
from mailmeshcli.rest import COMMANDS as REST_COMMANDS
from mailmeshcli.rest import add_parsers, main_rest
from wakucodec import secp
from wakucodec.bloom import topic_from_hex, topic_to_hex
from wakucodec.constants import BLOOM_SIZE, DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_TTL
from wakucodec.errors import CodecError
from wakucodec.keccak import keccak256
from wakucodec.pow import calculate_pow
from wakunode.client import CLIENT_CONFIG, GETH_IDLE_END_S, IdleEnd, WakuClient
from wakunode.config import CAPABILITIES
from wakunode.errors import WakuError
from wakunode.peerstate import PeerInfo

__all__ = ["main", "parser"]

#: Envelopes per Messages packet in ``post`` (also bounded by the max message size).
POST_PACKET_ENVELOPES = 200


class UsageError(Exception):
    """A bad argument value (exit 2)."""


def _hex(text: str, length: int | None = None, what: str = "value") -> bytes:
    raw = text.strip()
    raw = raw[2:] if raw[:2].lower() == "0x" else raw
    try:
        value = bytes.fromhex(raw)
    except ValueError:
        raise UsageError(f"{what}: not hex") from None
    if length is not None and len(value) != length:
        raise UsageError(f"{what}: must be {length} bytes, got {len(value)}")
    return value


def _topic(text: str) -> bytes:
    try:
        return topic_from_hex(text)
    except CodecError as err:
        raise UsageError(str(err)) from None


def parser() -> argparse.ArgumentParser:
    """The argument parser (also used by the tests)."""
    top = argparse.ArgumentParser(
        prog="mailmesh", description="Waku v1 / Whisper v6 client and REST gateway client (JSON lines)."
    )
    sub = top.add_subparsers(dest="command", required=True)

    def connection(p: argparse.ArgumentParser) -> None:
        p.add_argument("enode", help="enode://<128 hex>@host:port of the node to talk to")
        p.add_argument("--key", help="our node key (hex) or a file holding it; default: a fresh key")
        p.add_argument(
            "--caps",
            default=",".join(CAPABILITIES),
            help="capabilities to offer, comma-separated (default: waku/1,waku/0,shh/6)",
        )
        p.add_argument("--connect-timeout", type=float, default=10.0, help="seconds to connect (default 10)")

    keygen = sub.add_parser("keygen", help="print a new secp256k1 key pair")
    keygen.add_argument("--out", help="also write the private key (hex, mode 0600) to this file")

    info = sub.add_parser("info", help="connect and print the negotiated capability and the peer's status")
    connection(info)

    post = sub.add_parser("post", help="seal, encrypt, sign and send envelopes")
    connection(post)
    post.add_argument("--topic", required=True, help="4-byte topic, 0x + 8 hex digits")
    post.add_argument("--ttl", type=int, default=DEFAULT_TTL, help=f"seconds (default {DEFAULT_TTL})")
    post.add_argument("--pow", type=float, default=0.002, help="PoW target to seal (default 0.002)")
    post.add_argument("--pow-time", type=float, default=5.0, help="seconds allowed to seal one envelope")
    enc = post.add_mutually_exclusive_group(required=True)
    enc.add_argument("--sym-password", help="encrypt with the PBKDF2 key of this password")
    enc.add_argument("--sym-key", help="encrypt with this 32-byte hex key")
    enc.add_argument("--pubkey", help="encrypt to this 64-byte hex public key (ECIES)")
    enc.add_argument("--raw", action="store_true", help="no encryption: the data is the envelope Data")
    data = post.add_mutually_exclusive_group(required=True)
    data.add_argument("--data-hex", help="payload as hex")
    data.add_argument("--data-file", help="payload from a file")
    data.add_argument("--text", help="payload as UTF-8 text")
    post.add_argument("--sign-key", help="sign with this private key (hex); default: our node key")
    post.add_argument("--unsigned", action="store_true", help="do not sign")
    post.add_argument("--count", type=int, default=1, help="envelopes to send (default 1)")
    post.add_argument(
        "--confirm-timeout", type=float, default=0.0, help="wait for confirmations (peer's option)"
    )

    history = sub.add_parser("history", help="request archived envelopes (0x7e), following cursors")
    connection(history)
    history.add_argument("--from", dest="lower", type=int, default=0, help="oldest sent time (UNIX s)")
    history.add_argument("--to", dest="upper", type=int, default=0, help="newest sent time (UNIX s; 0 = now)")
    history.add_argument("--topic", action="append", default=[], help="topic (repeatable)")
    history.add_argument(
        "--bloom",
        help="64-byte bloom filter, hex; with --topic it replaces the topics' bloom sent alongside them "
        "(status-go <= v0.5x servers refuse a request without a bloom)",
    )
    history.add_argument("--limit", type=int, default=0, help="envelopes per page (0 = server default 1000)")
    history.add_argument("--cursor", default="", help="start after this cursor (hex)")
    history.add_argument("--dialect", choices=sorted(DIALECTS), default="status-envelope")
    keys = history.add_mutually_exclusive_group()
    keys.add_argument("--password", help="mailserver password (default status-offline-inbox)")
    keys.add_argument("--sym-key", help="mailserver symmetric key, hex")
    keys.add_argument("--server-pubkey", help="encrypt the request to this public key (hex)")
    history.add_argument("--follow", action="store_true", help="follow cursors to the last page")
    history.add_argument("--max-pages", type=int, default=10_000)
    history.add_argument("--page-interval", type=float, default=0.0, help="seconds between pages")
    history.add_argument("--timeout", type=float, default=30.0, help="seconds per page (default 30)")
    history.add_argument(
        "--idle-end",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end a page that gets no 0x7d after SECONDS without a 0x7f (servers that never send one, "
        f"like geth's mailserver); 0 = wait for the 0x7d; default {GETH_IDLE_END_S:g} for geth-binary, "
        "else 0",
    )
    history.add_argument("--out", help="write the JSON lines to this file instead of stdout")
    add_parsers(sub)
    return top


def _node_key(arg: str | None) -> bytes:
    if arg is None:
        return secp.generate_private_key()
    path = Path(arg)
    text = path.read_text().strip() if len(arg) < 64 or path.exists() else arg
    return secp.validate_private_key(_hex(text, 32, "--key"))


def _client(args: argparse.Namespace) -> WakuClient:
    caps = tuple(c.strip() for c in args.caps.split(",") if c.strip())
    if not caps or any(c not in CAPABILITIES for c in caps):
        raise UsageError(f"--caps: a subset of {','.join(CAPABILITIES)}")
    config = replace(CLIENT_CONFIG, capabilities=caps)
    return WakuClient(_node_key(args.key), config=config, server_config=ServerConfig(listen=False))


def _emit(out: TextIO, record: dict[str, Any]) -> None:
    out.write(json.dumps(record, separators=(",", ":")) + "\n")


async def _settled(client: WakuClient, info: PeerInfo, timeout: float) -> PeerInfo:
    """The preferred session once every negotiated capability finished its handshake (a remote speaking
    shh/6 and waku/1 runs both; ``connect`` returns when the first is ready), or what is ready at timeout."""
    peer = client.server.get_peer(info.pubkey)
    wanted = len(peer.capabilities) if peer is not None else 1
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(p.pubkey == info.pubkey for p in client.node.peers()) >= wanted:
            break
        await asyncio.sleep(0.01)  # polling the node's session table, bounded by the timeout
    session = client.node.session(info.pubkey)
    if session is None:
        return info
    return session.info(trusted=True, static=False)


async def _info(args: argparse.Namespace, out: TextIO) -> None:
    async with _client(args) as client:
        info = await client.connect(args.enode, timeout=args.connect_timeout)
        info = await _settled(client, info, args.connect_timeout)
        peer = client.server.get_peer(info.pubkey)
        caps = [f"{c.name}/{c.version}" for c in peer.hello.capabilities] if peer is not None else []
        negotiated = (
            [f"{n.capability.name}/{n.capability.version}" for n in peer.capabilities]
            if peer is not None
            else []
        )
        _emit(
            out,
            {
                "enode": args.enode,
                "node_id": "0x" + info.node_id.hex(),
                "client_id": info.client_id,
                "capability": info.capability,
                "offered": caps,
                "negotiated": negotiated,
                "snappy": info.snappy,
                "pow_requirement": info.pow_requirement,
                "bloom": "0x" + info.bloom.hex(),
                "topic_interest_count": info.topic_interest_count,
                "light_node": info.light_node,
                "confirmations": info.confirmations_enabled,
            },
        )


def _payload(args: argparse.Namespace) -> bytes:
    if args.data_hex is not None:
        return _hex(args.data_hex, what="--data-hex")
    if args.data_file is not None:
        return Path(args.data_file).read_bytes()
    return str(args.text).encode()


async def _post(args: argparse.Namespace, out: TextIO) -> None:
    topic = _topic(args.topic)
    if args.count < 1:
        raise UsageError("--count must be >= 1")
    encryption: Encryption | None
    if args.sym_password is not None:
        encryption = Encryption.from_password(args.sym_password)
    elif args.sym_key is not None:
        encryption = Encryption(symmetric_key=_hex(args.sym_key, 32, "--sym-key"))
    elif args.pubkey is not None:
        encryption = Encryption(public_key=_hex(args.pubkey, 64, "--pubkey"))
    else:
        encryption = None
    client = _client(args)
    signing_key = None
    if not args.unsigned:
        signing_key = _hex(args.sign_key, 32, "--sign-key") if args.sign_key else client.node_key
    plaintext = _payload(args)
    envelopes = list(
        compose_many(
            plaintext,
            args.count,
            topic=topic,
            ttl=args.ttl,
            pow_target=args.pow,
            encryption=encryption,
            signing_key=signing_key,
            work_time_s=args.pow_time,
        )
    )
    async with client:
        info = await client.connect(args.enode, timeout=args.connect_timeout)
        started = time.perf_counter()
        packet_count = confirmed = 0
        for packet in packets(
            envelopes, max_envelopes=POST_PACKET_ENVELOPES, max_bytes=DEFAULT_MAX_MESSAGE_SIZE - 1024
        ):
            result = await client.post(info.pubkey, packet, confirm_timeout=args.confirm_timeout or None)
            packet_count += 1
            confirmed += result.response is not None
            for env in packet:
                record = envelope_record(env)
                record.pop("data")
                record["pow"] = calculate_pow(env)
                record["batch_hash"] = "0x" + result.batch_hash.hex()
                _emit(out, record)
        _emit(
            out,
            {
                "summary": True,
                "envelopes": len(envelopes),
                "packets": packet_count,
                "confirmed_packets": confirmed,
                "topic": topic_to_hex(topic),
                "elapsed_s": round(time.perf_counter() - started, 6),
            },
        )


async def _history(args: argparse.Namespace, out: TextIO) -> None:
    dialect = DIALECTS[args.dialect]
    topics = [_topic(t) for t in args.topic]
    bloom = _hex(args.bloom, BLOOM_SIZE, "--bloom") if args.bloom else None
    upper = args.upper or int(time.time())
    idle_end: IdleEnd = "auto"
    if args.idle_end is not None:
        if not math.isfinite(args.idle_end) or args.idle_end < 0:
            raise UsageError("--idle-end must be >= 0 seconds")
        idle_end = args.idle_end or None
    request, used = build_request(
        dialect,
        lower=args.lower,
        upper=upper,
        topics=topics,
        bloom=bloom,
        limit=args.limit,
        cursor=_hex(args.cursor, what="--cursor") if args.cursor else b"",
    )
    options = HistoryOptions(
        dialect=dialect,
        password=args.password,
        symmetric_key=_hex(args.sym_key, 32, "--sym-key") if args.sym_key else None,
        server_public_key=_hex(args.server_pubkey, 64, "--server-pubkey") if args.server_pubkey else None,
        follow=args.follow,
        max_pages=args.max_pages,
        page_timeout=args.timeout,
        page_interval=args.page_interval,
        idle_end=idle_end,
    )
    run = HistoryRun()
    sink = open(args.out, "w", encoding="utf-8") if args.out else out  # noqa: SIM115 - closed below
    try:
        async with _client(args) as client:
            info = await client.connect(args.enode, timeout=args.connect_timeout)
            async for env in fetch(client, info.pubkey, request, options, run):
                _emit(sink, envelope_record(env))
            _emit(
                sink,
                {
                    "summary": True,
                    "dialect": args.dialect,
                    "filter": used,
                    "envelopes": run.envelopes,
                    "pages": run.pages,
                    "page_sizes": run.page_sizes,
                    "next_cursor": "0x" + run.next_cursor.hex() if run.next_cursor else "",
                    "last_envelope_hash": "0x" + run.last_envelope_hash.hex(),
                    "ended_by": run.ended_by,
                    "elapsed_s": round(run.elapsed_s, 6),
                },
            )
    finally:
        if sink is not out:
            sink.close()


def _keygen(args: argparse.Namespace, out: TextIO) -> None:
    key = secp.generate_private_key()
    pub = secp.public_key(key)
    if args.out:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(key.hex())
        os.chmod(args.out, 0o600)
    _emit(
        out,
        {
            "private_key": key.hex(),
            "public_key": pub.hex(),
            "node_id": keccak256(pub).hex(),
        },
    )


async def run(args: argparse.Namespace, out: TextIO) -> None:
    """Run the parsed command."""
    if args.command == "keygen":
        _keygen(args, out)
        return
    try:
        parse_enode(args.enode)
    except ValueError as err:
        raise UsageError(str(err)) from None
    commands = {"info": _info, "post": _post, "history": _history}
    await commands[args.command](args, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point; returns the exit status."""
    stream = out if out is not None else sys.stdout
    args = parser().parse_args(argv)
    if args.command in REST_COMMANDS:
        return main_rest(args, stream)
    try:
        asyncio.run(run(args, stream))
    except UsageError as err:
        _emit(stream, {"error": str(err)})
        return 2
    except (WakuError, DevP2PError, CodecError, OSError, TimeoutError, ValueError) as err:
        _emit(stream, {"error": f"{type(err).__name__}: {err}"})
        return 1
    stream.flush()
    return 0
