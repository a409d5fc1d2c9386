"""The send service's configuration: defaults, refusals, and the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore import ConfigError, describe_markdown
from services.send.config import Config
from services.send.server import rules_from

README = Path(__file__).resolve().parents[3] / "services" / "send" / "README.md"


def test_defaults_follow_the_spec() -> None:
    cfg = Config.from_env({})
    assert (cfg.retries, cfg.backoff_s, cfg.default_ttl_s) == (3, 1.0, 120)
    assert cfg.runtime.grpc_port == 50055 and cfg.edge_peer_addrs == ("127.0.0.1:50051",)
    rules = rules_from(cfg)
    assert rules.max_attempts == 4 and rules.topics.default_topic == "/waku/2/rs/1/0"


def test_edge_mode_and_empty_edges_are_refused() -> None:
    with pytest.raises(ConfigError, match="MSGAPI_MODE=edge is not supported"):
        Config.from_env({"MSGAPI_MODE": "edge"})
    with pytest.raises(ConfigError, match="SEND_EDGE_ADDR"):
        Config.from_env({"SEND_EDGE_ADDR": ""})


def test_the_lease_ttl_must_leave_room_for_the_safety_margin() -> None:
    with pytest.raises(ConfigError, match="at least 3 x MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS"):
        Config.from_env({"SEND_LEASE_TTL_SECONDS": "5", "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "2"})
    ok = Config.from_env({"SEND_LEASE_TTL_SECONDS": "6", "MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS": "2"})
    assert ok.lease_ttl_s == 6


def test_the_readme_table_is_the_generated_one() -> None:
    assert describe_markdown(Config) in README.read_text()
