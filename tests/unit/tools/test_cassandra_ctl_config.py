"""tools/cassandra/ctl.py settings: the commit log access mode and its tmpfs fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.cassandra import ctl

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /tmp tmpfs rw,nosuid 0 0
/dev/vdb /tmp/disk ext4 rw 0 0
tmpfs /work/main/var/ram\\040disk tmpfs rw 0 0
"""


def test_direct_commit_log_is_the_default() -> None:
    assert ctl.NodeConfig.from_env({}).commitlog_access == "direct"
    assert ctl.NodeConfig.from_env({"CASSANDRA_COMMITLOG_ACCESS": "mmap"}).commitlog_access == "mmap"


def test_unknown_commit_log_mode_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(
        ctl.ConfigError, match=r"CASSANDRA_COMMITLOG_ACCESS=.fast.: expected one of direct, mmap, standard"
    ):
        ctl.NodeConfig.from_env({"CASSANDRA_COMMITLOG_ACCESS": "fast"})


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/work/main/var/cassandra", "ext4"),
        ("/tmp", "tmpfs"),
        ("/tmp/x/y", "tmpfs"),
        ("/tmp/disk/state", "ext4"),  # the longer mount point wins
        ("/tmp/diskette", "tmpfs"),  # a prefix of a name is not a mount point
        ("/work/main/var/ram disk/c", "tmpfs"),  # /proc/mounts escapes spaces as \040
    ],
)
def test_filesystem_type_is_the_innermost_mount(path: str, kind: str) -> None:
    assert ctl.filesystem_type(Path(path), MOUNTS) == kind


@pytest.mark.parametrize(
    ("configured", "fs_type", "rendered"),
    [
        ("direct", "ext4", "direct"),
        ("direct", "xfs", "direct"),
        ("direct", "tmpfs", "mmap"),  # no O_DIRECT on tmpfs: the node could not open a segment
        ("direct", "ramfs", "mmap"),
        ("standard", "tmpfs", "standard"),
        ("mmap", "ext4", "mmap"),
    ],
)
def test_rendered_commit_log_mode(configured: str, fs_type: str, rendered: str) -> None:
    cfg = ctl.NodeConfig.from_env({"CASSANDRA_COMMITLOG_ACCESS": configured})
    yaml = ctl.render_yaml(cfg, fs_type=fs_type)
    assert f"\ncommitlog_disk_access_mode: {rendered}\n" in yaml
    assert "${" not in yaml
