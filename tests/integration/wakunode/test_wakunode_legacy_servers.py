"""Our client and the ``mailmesh history`` CLI over loopback against scripted mailservers that behave like
the old implementations (docs/interop.md has the real ones):

- geth's Whisper mailserver (protocol-notes §4.12): shh/6, one envelope per 0x7f, and never a 0x7d — a
  page ends by idleness (the geth-binary default), or times out when told to wait for the 0x7d;
- status-go v0.50.0's mailserver: refuses a request whose bloom is empty ("bloom filter is empty") even when
  it carries topics — the CLI sends the topics' bloom along with the topics.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from devp2p.abc import PeerAPI
from devp2p.server import Server
from mailmeshcli.cli import main
from tests.integration.wakunode.support import SERVER, envelopes, running_client
from tests.unit.devp2p.support import Recorder
from wakucodec import secp
from wakucodec.bloom import topic_to_hex, topics_to_bloom
from wakucodec.envelope import decode_envelope
from wakucodec.errors import CodecError
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakucodec.payload import open_symmetric
from wakucodec.requestdialects import decode_payload, decode_plain
from wakucodec.requests import bytes_to_hash
from wakucodec.responses import VALIDATION_ERROR_PREFIX, encode_completion, encode_completion_error
from wakucodec.symmetric import key_from_password
from wakunode import constants as c
from wakunode.client import GETH_IDLE_END_S, PageEnd
from wakunode.errors import RequestFailed, RequestTimeout
from wakunode.peerstate import Flavor
from wakunode.protocol import encode_status
from wakunode.status_options import StatusOptions

PASSWORD = "status-offline-inbox"
TOPIC = b"aaaa"
NOW = int(time.time())
ARCHIVE = envelopes(8, topic=TOPIC, sent=NOW - 100)


@dataclass
class ScriptedServer:
    """A devp2p node on 127.0.0.1:0 whose single waku/shh protocol is a Recorder answering 0x7e."""

    server: Server
    recorder: Recorder
    requests: list[tuple[HistoryRequest, Dialect]] = field(default_factory=list)

    @property
    def enode(self) -> str:
        return self.server.enode

    @property
    def pubkey(self) -> bytes:
        return self.server.pubkey


@asynccontextmanager
async def geth_mailserver() -> AsyncIterator[ScriptedServer]:
    """geth's answer to any 0x7e: every archived envelope as its own 0x7f (a bare envelope), no 0x7d."""
    recorder = Recorder(
        name="shh", version=6, length=128, send_on_start=encode_status(Flavor.SHH6, StatusOptions())
    )

    async def answer(peer: PeerAPI, code: int, payload: bytes) -> None:
        if code == c.P2P_REQUEST_CODE:
            for env in ARCHIVE:
                await peer.send(recorder, c.P2P_MESSAGE_CODE, env.raw)

    recorder.on_message = answer
    async with Server(secp.generate_private_key(), [recorder], SERVER) as server:
        yield ScriptedServer(server, recorder)


@asynccontextmanager
async def statusgo_050_mailserver() -> AsyncIterator[ScriptedServer]:
    """status-go v0.50.0's validation: a request without a bloom is refused, topics or not; a valid one is
    answered with a 0x7d at once (no envelopes: the request's shape is what is checked)."""
    recorder = Recorder(
        name="waku", version=1, length=128, send_on_start=encode_status(Flavor.WAKU1, StatusOptions())
    )
    key = key_from_password(PASSWORD)
    scripted: ScriptedServer

    async def answer(peer: PeerAPI, code: int, payload: bytes) -> None:
        if code != c.P2P_REQUEST_CODE:
            return
        try:
            env = decode_envelope(payload)
        except CodecError:
            request, raw_id = decode_plain(payload)
            dialect, request_id = Dialect.STATUS_PLAIN, bytes_to_hash(raw_id)
        else:
            request, dialect = decode_payload(open_symmetric(env.data, key).payload)
            request_id = env.hash
        scripted.requests.append((request, dialect))
        if request.bloom is None:
            reply = encode_completion_error(request_id, VALIDATION_ERROR_PREFIX + "bloom filter is empty")
        else:
            reply = encode_completion(request_id)
        await peer.send(recorder, c.P2P_REQUEST_COMPLETE_CODE, reply)

    recorder.on_message = answer
    async with Server(secp.generate_private_key(), [recorder], SERVER) as server:
        scripted = ScriptedServer(server, recorder)
        yield scripted


async def cli(*argv: str) -> tuple[int, list[dict[str, Any]]]:
    """``mailmesh`` in a worker thread (it runs its own event loop): exit status and JSON lines."""
    out = io.StringIO()
    code = await asyncio.to_thread(main, list(argv), out)
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def history_args(enode: str, *extra: str) -> list[str]:
    return ["history", enode, "--from", str(NOW - 200), "--to", str(NOW), "--connect-timeout", "5", *extra]


# --- geth: no 0x7d --------------------------------------------------------------------------------------


async def test_client_ends_a_geth_page_by_idleness_by_default() -> None:
    async with geth_mailserver() as geth, running_client() as client:
        info = await client.connect(geth.enode)
        assert info.capability == "shh/6"
        request = HistoryRequest(NOW - 200, NOW, topics_to_bloom([TOPIC]))
        page = client.request_history(
            geth.pubkey, request, Dialect.GETH_BINARY, password=PASSWORD, timeout=20
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        got = [e async for e in page]
        elapsed = loop.time() - started
        assert [e.raw for e in got] == [e.raw for e in ARCHIVE]
        assert page.result is not None and page.result.end is PageEnd.IDLE
        assert page.result.cursor == b"" and page.result.last_envelope_hash == ARCHIVE[-1].hash
        # Ended by the default idle end (PageEnd.IDLE above, not TIMEOUT), and not before it was due.
        assert elapsed >= GETH_IDLE_END_S - 0.01
        assert client.node.metrics.p2p_messages_received_total == {"single": len(ARCHIVE)}


async def test_cli_geth_binary_ends_by_idleness_with_the_geth_default() -> None:
    async with geth_mailserver() as geth:
        topic = topic_to_hex(TOPIC)
        args = history_args(geth.enode, "--dialect", "geth-binary", "--topic", topic, "--timeout", "20")
        code, lines = await cli(*args)
    assert code == 0, lines
    summary = lines.pop()
    assert [line["hash"] for line in lines] == ["0x" + e.hash.hex() for e in ARCHIVE]
    assert summary["ended_by"] == "idle" and summary["next_cursor"] == ""
    assert summary["pages"] == 1 and summary["envelopes"] == len(ARCHIVE)
    assert summary["last_envelope_hash"] == "0x" + ARCHIVE[-1].hash.hex()
    assert summary["elapsed_s"] < 20


async def test_cli_idle_end_zero_waits_for_the_0x7d_and_times_out() -> None:
    async with geth_mailserver() as geth:
        args = history_args(geth.enode, "--dialect", "geth-binary", "--idle-end", "0", "--timeout", "1")
        code, lines = await cli(*args)
    assert code == 1
    assert lines[-1]["error"].startswith(RequestTimeout.__name__)
    assert len(lines) == len(ARCHIVE) + 1  # every envelope was printed before the timeout


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
async def test_cli_refuses_a_bad_idle_end(value: str) -> None:
    enode = f"enode://{secp.public_key(secp.generate_private_key()).hex()}@127.0.0.1:1"
    code, lines = await cli(*history_args(enode, "--idle-end", value))
    assert code == 2 and "--idle-end" in lines[0]["error"]


# --- status-go v0.50.0: a bloom is required -------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["status-plain", "status-envelope", "spec6"])
async def test_cli_sends_the_topics_bloom_with_the_topics(dialect: str) -> None:
    other = b"bbbb"
    async with statusgo_050_mailserver() as server:
        args = ["--dialect", dialect, "--topic", topic_to_hex(TOPIC), "--topic", topic_to_hex(other)]
        code, lines = await cli(*history_args(server.enode, *args, "--password", PASSWORD))
    assert code == 0, lines  # not "request is invalid: bloom filter is empty"
    [(request, sent_as)] = server.requests
    assert sent_as.value == {"spec6": "spec-6-topics"}.get(dialect, dialect)
    assert request.topics == (TOPIC, other) and request.bloom == topics_to_bloom([TOPIC, other])
    summary = lines[-1]
    assert summary["filter"] == "topics" and summary["ended_by"] == "completion"


async def test_cli_explicit_bloom_goes_with_the_topics() -> None:
    bloom = topics_to_bloom([b"cccc"])
    async with statusgo_050_mailserver() as server:
        args = ["--dialect", "status-plain", "--topic", topic_to_hex(TOPIC), "--bloom", bloom.hex()]
        code, lines = await cli(*history_args(server.enode, *args))
    assert code == 0, lines
    [(request, _)] = server.requests
    assert request.topics == (TOPIC,) and request.bloom == bloom


async def test_statusgo_050_refuses_topics_without_a_bloom() -> None:
    """The scripted server is strict, as the real one (what the CLI used to send gets ERROR=)."""
    async with statusgo_050_mailserver() as server, running_client() as client:
        await client.connect(server.enode)
        page = client.request_history(
            server.pubkey, HistoryRequest(NOW - 200, NOW, None, (TOPIC,)), Dialect.STATUS_PLAIN, timeout=10
        )
        with pytest.raises(RequestFailed, match="bloom filter is empty"):
            _ = [e async for e in page]
