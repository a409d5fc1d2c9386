"""The mailmesh CLI's pure parts: arguments, request building per dialect, envelope composition, keygen."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path

import pytest

from mailmeshcli.cli import main, parser
from mailmeshcli.compose import Encryption, compose_envelope, compose_many, packets
from mailmeshcli.fetch import DIALECTS, build_request, envelope_record
from wakucodec import payload, secp
from wakucodec.bloom import FULL_BLOOM, topics_to_bloom
from wakucodec.historyrequest import Dialect
from wakucodec.pow import calculate_pow
from wakucodec.symmetric import key_from_password

TOPIC = b"\x01\x02\x03\x04"


def test_every_dialect_has_a_cli_name() -> None:
    assert set(DIALECTS.values()) == set(Dialect)
    assert set(DIALECTS) == {
        "status-plain",
        "status-envelope",
        "status-legacy6",
        "spec5",
        "spec6",
        "geth-binary",
    }


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_topics_become_a_bloom_where_the_dialect_has_no_topics(name: str) -> None:
    dialect = DIALECTS[name]
    request, used = build_request(dialect, lower=1, upper=2, topics=[TOPIC], limit=5)
    if used == "topics":
        assert request.topics == (TOPIC,) and request.bloom == topics_to_bloom([TOPIC])  # status-go v0.50
    else:
        assert (
            used == "bloom-from-topics" and request.bloom == topics_to_bloom([TOPIC]) and not request.topics
        )
    everything, word = build_request(dialect, lower=1, upper=2)
    assert word == "all" and everything.bloom == FULL_BLOOM


def test_parser_defaults_and_required_arguments() -> None:
    args = parser().parse_args(["history", "enode://x", "--topic", "0x01020304", "--topic", "0x05060708"])
    assert (
        args.dialect == "status-envelope" and args.topic == ["0x01020304", "0x05060708"] and not args.follow
    )
    with pytest.raises(SystemExit):
        parser().parse_args(["post", "enode://x", "--topic", "0x01020304", "--text", "hi"])  # no encryption


def test_symmetric_signed_envelope_opens_with_the_password_key() -> None:
    signer = secp.generate_private_key()
    env = compose_envelope(
        b"hello",
        topic=TOPIC,
        ttl=60,
        pow_target=0.01,
        encryption=Encryption.from_password("pw"),
        signing_key=signer,
        sent=1_700_000_000,
    )
    assert env.expiry == 1_700_000_060 and env.ttl == 60 and env.topic == TOPIC
    assert calculate_pow(env) >= 0.01
    message = payload.open_symmetric(env.data, key_from_password("pw"))
    assert message.payload == b"hello" and message.signer == secp.public_key(signer)


def test_asymmetric_and_many() -> None:
    key = secp.generate_private_key()
    envs = list(
        compose_many(
            b"x", 3, topic=TOPIC, ttl=60, pow_target=0, encryption=Encryption(public_key=secp.public_key(key))
        )
    )
    assert len({e.hash for e in envs}) == 3
    assert payload.open_asymmetric(envs[0].data, key).payload == b"x"
    raw = list(compose_many(b"x", 2, topic=TOPIC, ttl=60, pow_target=0, encryption=None))
    assert raw[0].data != raw[1].data
    with pytest.raises(ValueError):
        Encryption()


def test_packets_respect_count_and_size() -> None:
    envs = list(compose_many(b"x" * 100, 10, topic=TOPIC, ttl=60, pow_target=0, encryption=None))
    assert [len(p) for p in packets(envs, max_envelopes=4, max_bytes=10_000)] == [4, 4, 2]
    size = len(envs[0].raw)
    assert [len(p) for p in packets(envs, max_envelopes=100, max_bytes=3 * size)] == [3, 3, 3, 1]


def test_envelope_record() -> None:
    env = compose_envelope(b"d", topic=TOPIC, ttl=60, pow_target=0, encryption=None, sent=100)
    record = envelope_record(env)
    assert record == {
        "hash": "0x" + env.hash.hex(),
        "sent": 100,
        "topic": "0x01020304",
        "expiry": 160,
        "ttl": 60,
        "nonce": 0,
        "size": len(env.raw),
        "data": "0x64",
    }


def test_keygen_writes_a_private_key_file(tmp_path: Path) -> None:
    out = io.StringIO()
    target = tmp_path / "key"
    assert main(["keygen", "--out", str(target)], out=out) == 0
    record = json.loads(out.getvalue())
    assert secp.public_key(bytes.fromhex(record["private_key"])).hex() == record["public_key"]
    assert target.read_text() == record["private_key"] and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_bad_enode_and_topic_exit_two() -> None:
    out = io.StringIO()
    assert main(["info", "enode://bad"], out=out) == 2
    assert "error" in json.loads(out.getvalue())
    out = io.StringIO()
    key = secp.public_key(secp.generate_private_key()).hex()
    argv = ["post", f"enode://{key}@127.0.0.1:1", "--topic", "0x0102", "--raw", "--text", "x"]
    assert main(argv, out=out) == 2
