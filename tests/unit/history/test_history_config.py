"""history-query configuration and where its cursor secrets come from."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from archivestore.types import Direction
from meshcore import ConfigError, describe, describe_markdown
from services.history.config import Config
from services.history.cursorkeys import load_cursor_secrets, read_secret_file
from services.history.server import settings_from

S1 = "11" * 32
S2 = "0x" + "22" * 16


def test_defaults() -> None:
    cfg = Config.from_env({})
    assert cfg.runtime.grpc_port == 50054 and cfg.runtime.metrics_port == 9154
    assert cfg.runtime.service_name == "history"
    assert cfg.archive_addr == "127.0.0.1:50053"
    assert (cfg.default_limit, cfg.max_limit, cfg.archive_page) == (1000, 1000, 1000)
    assert cfg.max_batch_bytes == 1024 * 1024
    assert cfg.cursor_secrets == () and cfg.cursor_secret_autocreate
    settings = settings_from(cfg)
    assert settings.default_direction is Direction.FORWARD
    assert settings.batch_bytes_ceiling == 16 * 1024 * 1024 - 64 * 1024


def test_every_variable_is_documented_and_secrets_are_hidden() -> None:
    names = [row.env for row in describe(Config)]
    for name in (
        "HISTORY_ARCHIVE_ADDR",
        "HISTORY_CURSOR_SECRETS",
        "HISTORY_CURSOR_SECRET_FILE",
        "HISTORY_CURSOR_SECRET_AUTOCREATE",
        "HISTORY_DEFAULT_LIMIT",
        "HISTORY_MAX_LIMIT",
        "HISTORY_ARCHIVE_PAGE",
        "HISTORY_MAX_BATCH_BYTES",
        "HISTORY_DEFAULT_DIRECTION",
        "HISTORY_ARCHIVE_TIMEOUT_SECONDS",
        "HISTORY_GRPC_PORT",
    ):
        assert name in names
    assert all(row.doc for row in describe(Config))
    assert "| `HISTORY_CURSOR_SECRETS` |" in describe_markdown(Config)


def test_secrets_are_parsed_and_never_echoed() -> None:
    cfg = Config.from_env({"HISTORY_CURSOR_SECRETS": f"{S1}, {S2}"})
    assert cfg.cursor_secrets == (bytes.fromhex(S1), bytes.fromhex(S2[2:]))
    with pytest.raises(ConfigError) as err:
        Config.from_env({"HISTORY_CURSOR_SECRETS": "abcd"})
    assert "at least 16 bytes" in str(err.value) and "abcd" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"HISTORY_DEFAULT_LIMIT": "500", "HISTORY_MAX_LIMIT": "100"}, "must not exceed"),
        ({"HISTORY_MAX_LIMIT": "1001"}, "HISTORY_MAX_LIMIT"),
        ({"HISTORY_ARCHIVE_ADDR": "nohost"}, "HISTORY_ARCHIVE_ADDR"),
        ({"HISTORY_DEFAULT_DIRECTION": "sideways"}, "HISTORY_DEFAULT_DIRECTION"),
        ({"HISTORY_MAX_BATCH_BYTES": str(64 * 2**20 + 1)}, "HISTORY_MAX_BATCH_BYTES"),
    ],
)
def test_bad_values(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        Config.from_env(env)


@pytest.mark.parametrize("target", ["dns:///archive-headless:50053", "[::1]:50053", "archive:50053"])
def test_archive_targets(target: str) -> None:
    assert Config.from_env({"HISTORY_ARCHIVE_ADDR": target}).archive_addr == target


def test_env_secrets_win_over_the_file(tmp_path: Path) -> None:
    cfg = Config.from_env(
        {"HISTORY_CURSOR_SECRETS": S1, "HISTORY_CURSOR_SECRET_FILE": str(tmp_path / "absent")}
    )
    assert load_cursor_secrets(cfg) == (bytes.fromhex(S1),)
    assert not (tmp_path / "absent").exists()


def test_autocreate_makes_a_private_file_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "sub" / "cursor.secret"
    cfg = Config.from_env({"HISTORY_CURSOR_SECRET_FILE": str(path)})
    with caplog.at_level(logging.WARNING):
        first = load_cursor_secrets(cfg)
    assert len(first) == 1 and len(first[0]) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert any("replica" in r.getMessage() and "share" in r.getMessage() for r in caplog.records)
    assert load_cursor_secrets(cfg) == first  # reused, not regenerated


def test_missing_file_without_autocreate(tmp_path: Path) -> None:
    cfg = Config.from_env(
        {"HISTORY_CURSOR_SECRET_FILE": str(tmp_path / "absent"), "HISTORY_CURSOR_SECRET_AUTOCREATE": "false"}
    )
    with pytest.raises(ConfigError, match="does not exist"):
        load_cursor_secrets(cfg)


def test_secret_file_format(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "secrets"
    path.write_text(f"# new one first\n{S1}\n\n{S2}  # old, still verifies\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        assert read_secret_file(path) == (bytes.fromhex(S1), bytes.fromhex(S2[2:]))
    assert any("readable by group or others" in r.getMessage() for r in caplog.records)
    path.write_text(f"{S1}\nnot-hex\n")
    with pytest.raises(ConfigError, match="line 2") as err:
        read_secret_file(path)
    assert "not-hex" not in str(err.value)
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no secret"):
        read_secret_file(path)


def test_readme_table_is_current() -> None:
    readme = (Path(__file__).resolve().parents[3] / "services" / "history" / "README.md").read_text()
    assert describe_markdown(Config) in readme
