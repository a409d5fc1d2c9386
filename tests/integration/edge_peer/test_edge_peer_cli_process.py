"""mailmesh CLI subprocess vs an in-process edge peer: post (encrypted, signed, sealed), info."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.integration.edge_peer.edge_peer_support import Edge, FakeIngest, wait_until
from wakucodec import payload
from wakucodec.envelope import decode_envelope
from wakucodec.pow import calculate_pow
from wakucodec.symmetric import key_from_password

REPO = Path(__file__).resolve().parents[3]


async def _cli(*argv: str) -> tuple[int, list[dict[str, object]]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mailmeshcli", *argv, cwd=REPO, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return int(proc.returncode or 0), [json.loads(line) for line in out.decode().splitlines()]


async def test_post_sends_sealed_encrypted_signed_envelopes(
    edge: Edge, ingest: tuple[FakeIngest, str]
) -> None:
    fake, _ = ingest
    key = "11" * 32
    code, lines = await _cli(
        "post", edge.enode, "--topic", "0xdeadbeef", "--ttl", "120", "--pow", "0.01",
        "--sym-password", "secret", "--text", "hello mesh", "--count", "3", "--sign-key", key,
    )  # fmt: skip
    assert code == 0, lines
    summary = lines.pop()
    assert summary["summary"] and summary["envelopes"] == 3 and summary["packets"] == 1
    await wait_until(lambda: len(fake.hashes) == 3, what="3 envelopes at ingest")
    assert sorted("0x" + h.hex() for h in fake.hashes) == sorted(str(line["hash"]) for line in lines)
    env = decode_envelope(fake.batches[0].envelopes[0])
    assert env.topic == bytes.fromhex("deadbeef") and env.ttl == 120 and calculate_pow(env) >= 0.01
    message = payload.open_symmetric(env.data, key_from_password("secret"))
    assert message.payload == b"hello mesh" and message.signer is not None


async def test_info_and_unreachable_node(edge: Edge) -> None:
    code, lines = await _cli("info", edge.enode, "--caps", "shh/6")
    assert code == 0 and lines[0]["capability"] == "shh/6" and lines[0]["negotiated"] == ["shh/6"]
    dead = edge.enode.rsplit(":", 1)[0] + ":1"
    code, lines = await _cli("info", dead, "--connect-timeout", "2")
    assert code == 1 and "error" in lines[0]
