"""EDGE_* settings: defaults, parsing, every mistake reported at once, translation to library configs."""

from __future__ import annotations

from pathlib import Path

import pytest

from devp2p.messages import frame_size_for
from meshcore import ConfigError, describe_markdown
from services.edge_peer.config import DEVP2P_MESSAGE_MARGIN, Config, node_config, server_config
from wakucodec import secp
from wakucodec.symmetric import key_from_password

ENODE = "enode://" + secp.public_key(secp.generate_private_key()).hex() + "@10.0.0.5:30303"


def test_defaults() -> None:
    cfg = Config.from_env({})
    assert (cfg.runtime.service_name, cfg.runtime.grpc_port, cfg.runtime.metrics_port) == (
        "edge-peer",
        50051,
        9151,
    )
    assert (cfg.listen_host, cfg.listen_port) == ("0.0.0.0", 30303)
    assert cfg.ingest_addr == "127.0.0.1:50052" and cfg.history_addr == "127.0.0.1:50054"
    assert cfg.mailserver_passwords == ("status-offline-inbox",) and cfg.mailserver_keys == ()
    assert cfg.min_pow == 0.000002 and cfg.max_message_size == 1024 * 1024
    assert cfg.capabilities == ("waku/1", "waku/0", "shh/6") and cfg.max_peers == 50
    assert cfg.request_rate_limit_s == 0 and not cfg.rate_limiter


def test_translation_to_node_and_server_configs() -> None:
    key = bytes(range(32))
    cfg = Config.from_env(
        {
            "EDGE_STATIC_PEERS": ENODE,
            "EDGE_BOOTNODES": f" {ENODE} ,",
            "EDGE_TRUSTED_PEERS": ENODE,
            "EDGE_MAILSERVER_PASSWORDS": "a,b",
            "EDGE_MAILSERVER_KEYS": "0x" + key.hex(),
            "EDGE_MIN_POW": "0.5",
            "EDGE_MAX_MESSAGE_SIZE": "2048",
            "EDGE_REQUEST_RATE_LIMIT_SECONDS": "3",
            "EDGE_RATE_LIMITER": "true",
            "EDGE_RATE_PACKETS_PER_PEER": "7",
            "EDGE_RATE_TOLERANCE": "4",
            "EDGE_CAPABILITIES": "waku/1,shh/6",
            "EDGE_LISTEN_PORT": "0",
            "EDGE_ADVERTISED_HOST": "edge.example",
            "EDGE_MAX_PEERS": "3",
            "EDGE_INGEST_BUFFER_WAIT_SECONDS": "2",
        }
    )
    assert cfg.static_peers == (ENODE,) and cfg.bootnodes == (ENODE,) and cfg.trusted_peers == (ENODE,)
    node = node_config(cfg)
    assert node.capabilities == ("waku/1", "shh/6") and node.pow_requirement == 0.5
    assert node.max_message_size == 2048 and node.full_node and not node.light_node
    assert node.sink_timeout == 3.0  # the sink's own wait (2 s) + 1 s: the node never abandons first
    assert node.rate_limiter is not None and node.rate_limiter.packets_per_peer == 7
    assert node.rate_limiter.tolerance == 4
    ms = node.mailserver
    assert ms.symmetric_keys == (key,) and ms.passwords == ("a", "b")
    assert ms.min_pow == 0.5 and ms.request_rate_limit == 3.0
    server = server_config(cfg)
    assert (server.port, server.advertised_host, server.max_peers) == (0, "edge.example", 3)
    # devp2p reads at most the waku limit + the margin (then wakunode answers 0x10 "oversized"); the frame
    # limit lets such a message through even when snappy expands it, and refuses anything larger unread.
    limit = 2048 + DEVP2P_MESSAGE_MARGIN
    assert server.session.max_message_size == limit
    assert server.session.max_frame_size == 9 + 32 + limit + limit // 6
    assert key_from_password("a") != key


def test_every_mistake_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        Config.from_env(
            {
                "EDGE_STATIC_PEERS": "enode://abc@1.2.3.4:1",
                "EDGE_MAILSERVER_KEYS": "00ff",
                "EDGE_MAX_MESSAGE_SIZE": str(11 * 1024 * 1024),
                "EDGE_CAPABILITIES": "eth/66",
                "EDGE_INGEST_ADDR": "nohost",
                "EDGE_MIN_POW": "nan",
            }
        )
    text = str(err.value)
    for name in (
        "EDGE_STATIC_PEERS",
        "EDGE_MAILSERVER_KEYS",
        "EDGE_MAX_MESSAGE_SIZE",
        "EDGE_CAPABILITIES",
        "EDGE_INGEST_ADDR",
        "EDGE_MIN_POW",
    ):
        assert name in text
    assert "00ff" not in text  # secret values stay out of errors


def test_duplicate_capability_is_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        Config.from_env({"EDGE_CAPABILITIES": "waku/1,waku/1"})


def test_doc_table_lists_every_variable_and_hides_secrets() -> None:
    table = describe_markdown(Config)
    for name in (
        "EDGE_NODE_KEY_FILE",
        "EDGE_INGEST_ADDR",
        "EDGE_HISTORY_ADDR",
        "EDGE_MIN_POW",
        "EDGE_GRPC_PORT",
    ):
        assert f"`{name}`" in table
    assert "| `EDGE_MAILSERVER_PASSWORDS` | `<secret>` |" in table


def test_readme_and_doc_carry_the_generated_table() -> None:
    root = Path(__file__).resolve().parents[3]
    table = describe_markdown(Config)
    assert table in (root / "services" / "edge_peer" / "README.md").read_text()
    assert table in (root / "docs" / "edge-peer.md").read_text()


def test_devp2p_limits_follow_the_max_message_size_up_to_the_format_limit() -> None:
    default = server_config(Config.from_env({})).session
    assert default.max_message_size == 1024 * 1024 + DEVP2P_MESSAGE_MARGIN  # not devp2p's 16 MiB
    assert default.max_frame_size < 2 * 1024 * 1024
    largest = server_config(Config.from_env({"EDGE_MAX_MESSAGE_SIZE": str(10 * 1024 * 1024)})).session
    assert largest.max_message_size == 10 * 1024 * 1024 + DEVP2P_MESSAGE_MARGIN
    assert frame_size_for(15 * 1024 * 1024) == 2**24 - 1  # never beyond the 24-bit frame size field
