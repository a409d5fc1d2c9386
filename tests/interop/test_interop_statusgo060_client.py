"""Interop over waku/1 with a real status-go v0.60.0 node (tools/interop/statuspeer060, docs/interop.md):
our client library against status-go's mailserver, and status-go's own option decoder.

1. Our client over waku/1 against status-go v0.60.0's mailserver (LevelDB; confirmations on): status-go's
   Message Response for our post; both request forms page through its archive bit-exact; a request by topics
   alone ("bloom filter is empty") and one encrypted to its node key ("failed to decrypt p2p request") are
   refused there.
2. status-go's waku/1 option decoder (as its handshake runs it) agrees with our encoder and decoder, and
   differs, as documented, after an unknown key; its Message Response error codes are ours.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.interop.peers_support import (
    MS_PASSWORD,
    PASSWORD,
    STATUSPEER060,
    channel_posts,
    go_peer,
    posted_envelopes,
    run,
    topic,
)
from tests.interop.statusgo060_support import (
    COUNT,
    INT_KEYS,
    LIMIT,
    TOPIC_BLOOM,
    TOPIC_BOTH_WAYS,
    TOPIC_MS,
    TOPIC_SUBSCRIBED,
    in_order,
)
from wakucodec import rlp, secp
from wakucodec.bloom import topic_to_bloom
from wakucodec.envelope import Envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.client import WakuClient
from wakunode.constants import ENVELOPE_OTHER_ERROR, ENVELOPE_TIME_NOT_SYNCED
from wakunode.errors import RequestFailed
from wakunode.status_options import RateLimits, StatusOptions, decode_options, encode_options, pow_to_bits

# As test_interop_statusgo: the suite's 120 s per test, for the test bodies only.
pytestmark = pytest.mark.timeout(120, func_only=True)


@pytest.fixture
def status_bin(interop_peers: None) -> Path:
    return STATUSPEER060


def test_our_client_uses_statusgo060_mailserver_over_waku1(status_bin: Path, tmp_path: Path) -> None:
    args = ["-topic", TOPIC_MS, "-password", PASSWORD, "-payload", "archived by v0.60", "-confirmations"]
    args += ["-mailserver", str(tmp_path / "status060-ms-db"), "-mailserver-password", MS_PASSWORD]
    with go_peer(status_bin, args, tmp_path / "status060-d.log") as d:
        d.command(f"post {COUNT}")  # status-go's add() archives its own envelopes in its mailserver
        theirs = posted_envelopes(d)
        signer = secp.generate_private_key()
        ours = channel_posts("posted by mailmesh", TOPIC_MS, 3, signer)
        expected = in_order([*theirs, *ours])
        lower, upper = min(e.sent for e in expected), int(time.time()) + 5
        request = HistoryRequest(lower, upper, topic_to_bloom(topic(TOPIC_MS)), (topic(TOPIC_MS),), LIMIT)

        async def fetch() -> dict[str, tuple[list[Envelope], int]]:
            results: dict[str, tuple[list[Envelope], int]] = {}
            async with WakuClient() as client:
                info = await client.connect(d.enode)  # our devp2p as initiator, status-go as recipient
                assert info.capability == "waku/1"
                posted = await client.post(info.pubkey, ours, confirm_timeout=20)
                # status-go's Message Response for our batch, decoded by our client: no envelope refused.
                assert posted.response is not None and posted.response.batch_hash == posted.batch_hash
                assert posted.response.errors == ()
                d.command("wait-messages 3 20")  # validated (PoW ≥ 0.2), archived and opened by status-go
                for dialect in (Dialect.STATUS_PLAIN, Dialect.STATUS_ENVELOPE):
                    walk = client.follow_cursor(
                        info.pubkey, request, dialect, password=MS_PASSWORD, timeout=20
                    )
                    results[dialect.value] = ([e async for e in walk], len(walk.pages))
                # Topics alone (what later clients send) are still refused by v0.60.0's server.
                topics_only = replace(request, bloom=None)
                refused = client.request_history(
                    info.pubkey, topics_only, Dialect.STATUS_PLAIN, password=MS_PASSWORD, timeout=20
                )
                with pytest.raises(RequestFailed, match="bloom filter is empty"):
                    _ = [e async for e in refused]
                # An envelope request to its node key (wakuext without SymKeyID): its server cannot open it.
                asym = client.request_history(
                    info.pubkey, request, Dialect.STATUS_ENVELOPE, public_key=info.pubkey, timeout=20
                )
                with pytest.raises(RequestFailed, match="failed to decrypt p2p request"):
                    _ = [e async for e in asym]
            return results

        results = run(fetch())
        for dialect, (got, pages) in results.items():
            assert [e.raw for e in got] == [e.raw for e in expected], dialect
            # status-go returns a cursor whenever the limit was reached (as v0.50.0): 15 envelopes at limit 5
            # take three full pages and a fourth, empty one without a cursor.
            assert pages == 4, dialect
        assert d.select("session")[0]["protocol"] == "waku/1"
        ours_status = d.wait_event(lambda e: e["event"] == "status" and e["dir"] == "in")
        # Our client's waku/1 Status: an empty topic interest (relay it nothing) instead of a bloom.
        assert ours_status["keys"] == [INT_KEYS[k] for k in ("0", "2", "3", "4", "5", "6")]
        assert ours_status["options"]["5"] == "c0"
        assert {e["error"] for e in d.select("peer-dropped")} <= {"client quitting"}


def test_statusgo060_option_decoder_and_error_codes_agree_with_ours(status_bin: Path, tmp_path: Path) -> None:
    """status-go's own waku/1 option decoder (as its handshake runs it) on payloads our encoder wrote, and
    its Message Response error codes, against ours; plus the one documented difference (§3.4 of
    docs/protocol-notes.md): options after an unknown key."""
    every = StatusOptions(
        pow_requirement=0.2,
        bloom=topic_to_bloom(topic(TOPIC_BLOOM)),
        light_node=True,
        confirmations=False,
        packet_rate_limits=RateLimits(10, 5, 0),
        topic_interest=(topic(TOPIC_BOTH_WAYS), topic(TOPIC_SUBSCRIBED)),
        bytes_rate_limits=RateLimits(1 << 20, 1 << 19, 0),
    )
    as_go = {
        "0": 0.2,
        "1": topic_to_bloom(topic(TOPIC_BLOOM)).hex(),
        "2": True,
        "3": False,
        "4": [10, 5, 0],
        "5": [TOPIC_BOTH_WAYS[2:], TOPIC_SUBSCRIBED[2:]],
        "6": [1 << 20, 1 << 19, 0],
    }
    pairs: list[rlp.Encodable] = [[0, pow_to_bits(0.2)], [2, b"\x01"]]
    unknown_last = rlp.encode([*pairs, [7, b"\x01"]])
    unknown_between = rlp.encode([pairs[0], [7, b"\x01"], pairs[1]])
    with go_peer(status_bin, ["-listen", ""], tmp_path / "status060-e.log") as e:
        codes = e.started["envelope_error_codes"]
        assert (codes["time_not_synced"], codes["other"]) == (ENVELOPE_TIME_NOT_SYNCED, ENVELOPE_OTHER_ERROR)

        def go_decoded(payload: bytes) -> dict[str, object]:
            return dict(e.command(f"decode-options {payload.hex()}")["options"])

        assert go_decoded(encode_options(every)) == as_go
        assert decode_options(encode_options(every)) == every
        # An unknown key (7) after the known ones: both ignore it.
        assert go_decoded(unknown_last) == {"0": 0.2, "2": True}
        assert decode_options(unknown_last) == StatusOptions(pow_requirement=0.2, light_node=True)
        # Between known ones: status-go stops at it (key 2 is lost), we skip it and read on (RFC6 "SHOULD be
        # ignored"); status-go itself only ever sends keys 0-6 in ascending order.
        assert go_decoded(unknown_between) == {"0": 0.2}
        assert decode_options(unknown_between) == StatusOptions(pow_requirement=0.2, light_node=True)
