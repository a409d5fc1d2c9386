"""Health service configuration: defaults, cross-field checks, target lists, the README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshcore import ConfigError, describe, describe_markdown
from services.health.config import Config
from services.health.server import thresholds_from


def test_defaults_match_the_local_ports_and_the_spec_thresholds() -> None:
    cfg = Config.from_env({})
    assert (cfg.runtime.grpc_port, cfg.runtime.metrics_port, cfg.runtime.service_name) == (
        50057,
        9157,
        "health",
    )
    assert cfg.edge_peer_addrs == ("127.0.0.1:50051",)
    assert cfg.ingest_addrs == ("127.0.0.1:50052",) and cfg.archive_addrs == ("127.0.0.1:50053",)
    assert cfg.history_addrs == ("127.0.0.1:50054",) and cfg.send_addrs == ("127.0.0.1:50055",)
    assert cfg.subscription_addrs == ("127.0.0.1:50056",) and cfg.gateway_addrs == ("127.0.0.1:50058",)
    t = thresholds_from(cfg)
    assert (t.minimally_healthy_peers, t.healthy_peers, t.hold_s, t.loss_hold_s) == (4, 6, 3.0, 0.0)
    assert (cfg.poll_interval_s, cfg.call_timeout_s, cfg.watch_min_interval_s) == (1.0, 0.5, 1.0)


def test_target_lists_parse_and_may_be_empty_for_informational_services() -> None:
    cfg = Config.from_env(
        {
            "HEALTH_EDGE_ADDR": "edge-0.edge:50051, edge-1.edge:50051,[::1]:50051",
            "HEALTH_SEND_ADDR": "",
            "HEALTH_HOLD_SECONDS": "500ms",
        }
    )
    assert cfg.edge_peer_addrs == ("edge-0.edge:50051", "edge-1.edge:50051", "[::1]:50051")
    assert cfg.send_addrs == () and cfg.hold_s == 0.5


def test_a_dns_target_is_kept_for_discovery_with_its_interval() -> None:
    cfg = Config.from_env(
        {
            "HEALTH_HISTORY_ADDR": "dns:///history-query-headless.mesh.svc:50054, 10.0.0.9:50054",
            "HEALTH_DISCOVERY_INTERVAL_SECONDS": "5",
        }
    )
    assert cfg.history_addrs == ("dns:///history-query-headless.mesh.svc:50054", "10.0.0.9:50054")
    assert cfg.discovery_interval_s == 5.0
    assert Config.from_env({}).discovery_interval_s == 30.0


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"HEALTH_HEALTHY_PEERS": "3"}, "HEALTH_HEALTHY_PEERS must be >= HEALTH_MINIMALLY_HEALTHY_PEERS"),
        ({"HEALTH_LOSS_HOLD_SECONDS": "5"}, "HEALTH_LOSS_HOLD_SECONDS must be <= HEALTH_HOLD_SECONDS"),
        ({"HEALTH_EDGE_ADDR": ""}, "HEALTH_EDGE_ADDR must list at least one"),
        ({"HEALTH_ARCHIVE_ADDR": " , "}, "HEALTH_ARCHIVE_ADDR must list at least one"),
        ({"HEALTH_ARCHIVE_ADDR": "a:1,a:1"}, "listed twice"),
        # one balanced channel would hide which replica answered; a dns: name stands for each address
        ({"HEALTH_INGEST_ADDR": "ipv4:10.0.0.1:50052,10.0.0.2:50052"}, "HEALTH_INGEST_ADDR"),
        ({"HEALTH_INGEST_ADDR": "dns://10.0.0.10/ingest:50052"}, "HEALTH_INGEST_ADDR.*DNS server"),
        ({"HEALTH_INGEST_ADDR": "dns:///ingest"}, "HEALTH_INGEST_ADDR.*host:port"),
        ({"HEALTH_MINIMALLY_HEALTHY_PEERS": "0"}, "HEALTH_MINIMALLY_HEALTHY_PEERS"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Config.from_env(env)


def test_every_variable_is_documented_and_the_readme_carries_the_table() -> None:
    assert all(row.doc for row in describe(Config))
    root = Path(__file__).resolve().parents[3]
    assert describe_markdown(Config) in (root / "services" / "health" / "README.md").read_text()
