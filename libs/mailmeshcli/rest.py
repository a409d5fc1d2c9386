"""The gateway's REST API from the command line: ``send``, ``subscribe``, ``messages`` and ``watch``.

::

    mailmesh send      --content-topic /waku/1/0x01020304/rfc26 --text hello [--count 3]
    mailmesh subscribe --content-topic /waku/1/0x01020304/rfc26
    mailmesh messages  --subscription-id <id> [--skip 0 --take 10 --wait 30]
    mailmesh watch     [--types message:sent,message:stored] [--after 0] [--count 5]

Every command takes ``--gateway URL`` (default ``$MAILMESH_GATEWAY_URL`` or http://127.0.0.1:8645) and
``--token`` (default ``$MAILMESH_GATEWAY_TOKEN``; sent as ``Authorization: Bearer``) and prints JSON lines:
``send`` one ``{"requestId"}`` per message, ``subscribe`` ``{"subscriptionId"}``, ``messages`` one record per
line (nothing for the spec's "No messages found" 404), ``watch`` one event per line as the SSE stream
brings them (``{"gap": {...}}`` for a gap), reconnecting with ``Last-Event-ID`` when the stream ends. An HTTP
error is ``{"error": ..., "status": <code>}`` and exit status 1.

httpx is the client: already the project's HTTP client (tests, benchmarks), with timeouts per phase and
streamed responses for SSE.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import httpx

__all__ = ["COMMANDS", "GatewayError", "add_parsers", "main_rest", "run_rest", "sse_events"]

COMMANDS = ("send", "subscribe", "messages", "watch")
DEFAULT_URL = "http://127.0.0.1:8645"
_RECONNECT_S = 1.0  # the `retry:` the gateway announces


class GatewayError(Exception):
    """The gateway answered an error (``status``, its ``{"error"}`` text) or could not be reached."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def add_parsers(sub: Any) -> None:
    """Add the four commands to the CLI's subparsers."""

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--gateway",
            default=os.environ.get("MAILMESH_GATEWAY_URL", DEFAULT_URL),
            help=f"gateway URL (default $MAILMESH_GATEWAY_URL or {DEFAULT_URL})",
        )
        p.add_argument(
            "--token",
            default=os.environ.get("MAILMESH_GATEWAY_TOKEN", ""),
            help="bearer token (default $MAILMESH_GATEWAY_TOKEN)",
        )
        p.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")

    send = sub.add_parser("send", help="POST /send: send a message through the gateway")
    common(send)
    send.add_argument("--content-topic", required=True)
    send.add_argument("--pubsub-topic", default="", help="default: the node's first shard")
    data = send.add_mutually_exclusive_group(required=True)
    data.add_argument("--text", help="payload as UTF-8 text")
    data.add_argument("--data-hex", help="payload as hex")
    data.add_argument("--data-file", help="payload from a file")
    send.add_argument("--meta-hex", help="meta (at most 64 bytes) as hex")
    send.add_argument("--timestamp", type=int, default=0, help="UNIX nanoseconds (default: now)")
    send.add_argument("--ephemeral", action="store_true", help="relay, never archive")
    send.add_argument("--count", type=int, default=1, help="messages to send (default 1)")

    subscribe = sub.add_parser("subscribe", help="POST /subscribe: start receiving a content topic")
    common(subscribe)
    subscribe.add_argument("--content-topic", required=True)
    subscribe.add_argument("--pubsub-topic", default="")

    messages = sub.add_parser("messages", help="GET /messages: records by content topic or subscription")
    common(messages)
    which = messages.add_mutually_exclusive_group(required=True)
    which.add_argument("--content-topic")
    which.add_argument("--subscription-id")
    messages.add_argument("--skip", type=int)
    messages.add_argument("--take", type=int)
    messages.add_argument("--wait", type=float, help="long poll: seconds to wait for a record past --skip")

    watch = sub.add_parser("watch", help="GET /events/stream: events as JSON lines (Server-Sent Events)")
    common(watch)
    watch.add_argument("--after", type=int, help="resume after this sequence (0 = everything retained)")
    watch.add_argument("--types", help="comma-separated event names")
    watch.add_argument("--subscription-id")
    watch.add_argument("--request-id")
    watch.add_argument("--count", type=int, default=0, help="stop after this many events (0 = never)")


def _emit(out: TextIO, record: Any) -> None:
    out.write(json.dumps(record, separators=(",", ":")) + "\n")
    out.flush()


def _client(args: argparse.Namespace, *, read_timeout: float | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    timeout = httpx.Timeout(args.timeout, read=read_timeout if read_timeout is not None else args.timeout)
    return httpx.Client(base_url=args.gateway.rstrip("/"), headers=headers, timeout=timeout)


def _answer(reply: httpx.Response) -> Any:
    if reply.status_code >= 400:
        try:
            text = str(reply.json().get("error", reply.text))
        except (ValueError, AttributeError):
            text = reply.text or reply.reason_phrase
        raise GatewayError(text, reply.status_code)
    return reply.json()


def _payload(args: argparse.Namespace) -> bytes:
    if args.text is not None:
        return str(args.text).encode()
    if args.data_hex is not None:
        return bytes.fromhex(args.data_hex.removeprefix("0x"))
    return Path(args.data_file).read_bytes()


def _send(args: argparse.Namespace, out: TextIO) -> None:
    body: dict[str, Any] = {
        "contentTopic": args.content_topic,
        "pubsubTopic": args.pubsub_topic,
        "payload": base64.b64encode(_payload(args)).decode(),
    }
    if args.meta_hex:
        body["meta"] = base64.b64encode(bytes.fromhex(args.meta_hex.removeprefix("0x"))).decode()
    if args.timestamp:
        body["timestamp"] = args.timestamp
    if args.ephemeral:
        body["ephemeral"] = True
    with _client(args) as client:
        for _ in range(max(args.count, 1)):
            _emit(out, _answer(client.post("/send", json=body)))


def _subscribe(args: argparse.Namespace, out: TextIO) -> None:
    with _client(args) as client:
        body = {"contentTopic": args.content_topic, "pubsubTopic": args.pubsub_topic}
        _emit(out, _answer(client.post("/subscribe", json=body)))


def _messages(args: argparse.Namespace, out: TextIO) -> None:
    params: dict[str, Any] = {}
    if args.content_topic is not None:
        params["contentTopic"] = args.content_topic
    else:
        params["subscriptionId"] = args.subscription_id
    for name in ("skip", "take", "wait"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    with _client(args, read_timeout=args.timeout + (args.wait or 0)) as client:
        reply = client.get("/messages", params=params)
    if reply.status_code == 404 and str(reply.json().get("error", "")).startswith("No messages found"):
        return  # the spec's answer for an empty listing
    for record in _answer(reply):
        _emit(out, record)


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str | None, str, str]]:
    """(id, event name, data) of each SSE event in ``lines`` (WHATWG HTML "Server-sent events"); comments
    and ``retry`` are skipped; an event without ``event:`` is named ``message``."""
    ident: str | None = None
    name = ""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield ident, name or "message", "\n".join(data)
            ident, name, data = None, "", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "id":
                ident = value
            elif field == "event":
                name = value
            elif field == "data":
                data.append(value)


def _watch(args: argparse.Namespace, out: TextIO) -> None:
    params: dict[str, Any] = {}
    for name, key in (("types", "types"), ("subscription_id", "subscriptionId"), ("request_id", "requestId")):
        if getattr(args, name):
            params[key] = getattr(args, name)
    last: str | None = None if args.after is None else str(args.after)
    seen = 0
    # No read timeout: the gateway writes a heartbeat comment while idle, and a stream may be quiet for long.
    with _client(args, read_timeout=None) as client:
        while True:
            headers = {"Last-Event-ID": last} if last is not None else {}
            with client.stream("GET", "/events/stream", params=params, headers=headers) as reply:
                if reply.status_code >= 400:
                    reply.read()
                    _answer(reply)
                for ident, name, data in sse_events(reply.iter_lines()):
                    if name == "gap":
                        _emit(out, {"gap": json.loads(data)})
                        continue
                    _emit(out, json.loads(data))
                    last = ident if ident is not None else last
                    seen += 1
                    if args.count and seen >= args.count:
                        return
            time.sleep(_RECONNECT_S)  # the stream ended (gateway restart, slow client): resume after `last`


def run_rest(args: argparse.Namespace, out: TextIO) -> None:
    """Run one of :data:`COMMANDS`; raises :class:`GatewayError` for an error answer or no connection."""
    commands = {"send": _send, "subscribe": _subscribe, "messages": _messages, "watch": _watch}
    try:
        commands[args.command](args, out)
    except httpx.HTTPError as err:
        raise GatewayError(f"{type(err).__name__}: {err}") from err


def main_rest(args: argparse.Namespace, out: TextIO) -> int:
    """Run a REST command and return the exit status: 0, or 1 after printing ``{"error": ...}``."""
    try:
        run_rest(args, out)
    except GatewayError as err:
        _emit(out, {"error": str(err), **({"status": err.status} if err.status else {})})
        return 1
    except (OSError, ValueError) as err:
        _emit(out, {"error": f"{type(err).__name__}: {err}"})
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
