"""Subscription service configuration: defaults, cross-field checks, the shared MSGAPI_/MSGSTORE_ settings,
the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore import ConfigError, describe, describe_markdown
from services.subscription.config import Config


def test_defaults_match_the_local_ports() -> None:
    cfg = Config.from_env({})
    assert (cfg.runtime.grpc_port, cfg.runtime.metrics_port, cfg.runtime.service_name) == (
        50056,
        9156,
        "subscription",
    )
    assert cfg.edge_peer_addrs == ("127.0.0.1:50051",)
    assert (cfg.history_addr, cfg.health_addr, cfg.send_addr) == ("127.0.0.1:50054", "127.0.0.1:50057", "")
    assert (cfg.writer_lease_s, cfg.consumer_buffer) == (10.0, 4096)
    assert cfg.replica and cfg.replica_id == ""  # empty: host name and process id
    assert cfg.messaging.store_check_interval_s == 60.0 and cfg.store.backend == "sqlite"


@pytest.mark.parametrize(
    ("env", "followed"),
    [
        ({}, ("127.0.0.1:50054",)),
        ({"SUBSCRIPTION_HISTORY_ADDR": "10.0.0.1:1,10.0.0.2:1"}, ("10.0.0.1:1", "10.0.0.2:1")),
        ({"SUBSCRIPTION_HISTORY_ADDR": "ipv4:10.0.0.1:1,10.0.0.2:1"}, ("10.0.0.1:1", "10.0.0.2:1")),
        # a dns: name: every address it resolves to is followed (meshcore.discovery), not one of them
        (
            {"SUBSCRIPTION_HISTORY_ADDR": "dns:///history-headless.ns.svc:1"},
            ("dns:///history-headless.ns.svc:1",),
        ),
        ({"SUBSCRIPTION_HISTORY_ADDR": ""}, ()),
        ({"SUBSCRIPTION_HISTORY_SERVED_ADDRS": "h-0:1, dns:///h:1"}, ("h-0:1", "dns:///h:1")),
        ({"SUBSCRIPTION_HISTORY_SERVED_ADDRS": "none"}, ()),
    ],
)
def test_the_history_instances_followed(env: dict[str, str], followed: tuple[str, ...]) -> None:
    cfg = Config.from_env(env)
    assert cfg.served_targets == followed
    assert cfg.discovery_interval_s == 30.0


def test_the_messaging_and_store_settings_are_the_shared_ones() -> None:
    cfg = Config.from_env(
        {
            "MSGAPI_CONFIRM_CONTENT_TOPICS": "/app/1/chat/proto",
            "MSGAPI_STORE_CONFIRMATION": "true",
            "MSGSTORE_SQLITE_PATH": "/tmp/x.db",
            "SUBSCRIPTION_REPLICA_ID": "sub-0",
        }
    )
    assert cfg.messaging.background_subscription and cfg.messaging.store_confirmation
    assert str(cfg.store.sqlite_path) == "/tmp/x.db" and cfg.replica == "sub-0"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SUBSCRIPTION_EDGE_ADDR": ""}, "SUBSCRIPTION_EDGE_ADDR must list at least one"),
        ({"SUBSCRIPTION_EDGE_ADDR": "a:1,a:1"}, "listed twice"),
        ({"SUBSCRIPTION_WRITER_LEASE_SECONDS": "5"}, "must exceed 3 x MSGSTORE_LEASE_SAFETY_MARGIN_SECONDS"),
        ({"SUBSCRIPTION_CONSUMER_BUFFER": "3"}, "SUBSCRIPTION_CONSUMER_BUFFER"),
        ({"MSGAPI_MODE": "edge"}, "MSGAPI_MODE=edge is not supported"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config.from_env(env)


def test_every_variable_is_documented_and_the_readme_carries_the_table() -> None:
    assert all(row.doc for row in describe(Config))
    root = Path(__file__).resolve().parents[3]
    assert describe_markdown(Config) in (root / "services" / "subscription" / "README.md").read_text()
