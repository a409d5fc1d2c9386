"""MSGAPI_* variables: defaults, parsing, and the refusals an operator expects to read at start-up."""

from __future__ import annotations

import pytest

from meshcore.config import ConfigError
from msgapi.config import RESERVED_SUBSCRIPTION_ID, MessagingConfig

# The secp256k1 generator point: a valid public key (private key 1).
G = (
    "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    "483ada7726a3c4655da4fbfc0e1108a8fd17b448a68554199c47d08ffb10d4b8"
)
ENODE = f"enode://{G}@127.0.0.1:30303"


def test_defaults_are_a_relay_node_on_the_waku_network() -> None:
    cfg = MessagingConfig.from_env({})
    assert cfg.mode == "relay"
    assert cfg.topics.default_topic == "/waku/2/rs/1/0"
    assert len(cfg.topics.topics) == 8
    assert cfg.store_nodes == ()
    assert cfg.store_confirmation is False
    assert cfg.filter_confirmation is True
    assert cfg.store_check_interval_s == 60
    assert cfg.background_subscription is False


def test_edge_mode_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ConfigError) as err:
        MessagingConfig.from_env({"MSGAPI_MODE": "edge"})
    assert "MSGAPI_MODE=edge is not supported" in str(err.value)
    assert "MSGAPI_MODE=relay" in str(err.value)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        MessagingConfig.from_env(
            {
                "MSGAPI_CLUSTER_ID": "70000",
                "MSGAPI_STORE_NODES": "enode://nope",
                "MSGAPI_CONFIRM_CONTENT_TOPICS": "x",
            }
        )
    text = str(err.value)
    assert "MSGAPI_CLUSTER_ID" in text
    assert "MSGAPI_STORE_NODES" in text
    assert "MSGAPI_CONFIRM_CONTENT_TOPICS" in text


def test_duplicate_shard_is_refused() -> None:
    with pytest.raises(ConfigError, match="lists a shard twice"):
        MessagingConfig.from_env({"MSGAPI_SHARDS": "1,1"})


def test_lists_parse_and_content_topics_are_canonical() -> None:
    cfg = MessagingConfig.from_env(
        {
            "MSGAPI_CLUSTER_ID": "16",
            "MSGAPI_SHARDS": "32,64",
            "MSGAPI_STORE_NODES": ENODE,
            "MSGAPI_BOOTSTRAP_NODES": f"{ENODE}, {ENODE}",
            "MSGAPI_STORE_CONFIRMATION": "true",
            "MSGAPI_CONFIRM_CONTENT_TOPICS": "/00/app/1/chat/proto,/waku/1/0x01020304/rfc26",
        }
    )
    assert cfg.topics.topics == ("/waku/2/rs/16/32", "/waku/2/rs/16/64")
    assert cfg.store_nodes == (ENODE,)
    assert cfg.bootstrap_nodes == (ENODE, ENODE)
    assert cfg.confirm_content_topics == ("/0/app/1/chat/proto", "/waku/1/0x01020304/rfc26")
    assert cfg.background_subscription is True


@pytest.mark.parametrize(("store", "filt", "active"), [("false", "false", False), ("true", "false", True)])
def test_background_subscription_needs_a_confirmation_kind(store: str, filt: str, active: bool) -> None:
    cfg = MessagingConfig.from_env(
        {
            "MSGAPI_STORE_CONFIRMATION": store,
            "MSGAPI_FILTER_CONFIRMATION": filt,
            "MSGAPI_CONFIRM_CONTENT_TOPICS": "/app/1/t/proto",
        }
    )
    assert cfg.background_subscription is active


def test_reserved_subscription_id_is_the_spec_guid() -> None:
    assert RESERVED_SUBSCRIPTION_ID == "1692854c-cbde-4afe-901f-1c86ecbd9ea1"
