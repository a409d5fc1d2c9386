"""Settings of the archive job: its own ``ARCHIVE_JOB_*`` variables, the command line, and the archive's.

The store is configured by :class:`archivestore.config.StoreConfig`, the declaration the archive service
embeds (the same ``ARCHIVE_*`` variables, so the CronJob shares the archive Deployment's ConfigMap): bucket
width, default shards, retention and connection settings can then never differ between the writers, the
readers and the job. Only what is the job's alone lives in :class:`JobConfig`.
"""

from __future__ import annotations

import argparse
import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from archivestore.config import StoreConfig
from archivestore.types import BUCKETED_TABLES
from meshcore.config import FromEnv, setting
from meshcore.parsers import (
    parse_choice,
    parse_duration,
    parse_float,
    parse_int,
    parse_list,
    parse_str,
    parse_url,
)

__all__ = ["Command", "JobConfig", "RunOptions", "StoreConfig", "load", "parse_args"]

MIB = 1024 * 1024


class Command(enum.Enum):
    """What a run does."""

    EXPIRE = "expire"
    REPARTITION = "repartition"
    MAINTAIN = "maintain"  # expire and repartition in one pass (the CronJob)
    REPORT = "report"  # scan and plan, change nothing

    @property
    def expires(self) -> bool:
        """Whether this command applies retention (``report`` plans it without applying)."""
        return self in (Command.EXPIRE, Command.MAINTAIN, Command.REPORT)

    @property
    def splits(self) -> bool:
        """Whether this command splits oversized buckets."""
        return self in (Command.REPARTITION, Command.MAINTAIN, Command.REPORT)


@dataclass(frozen=True, kw_only=True)
class JobConfig(FromEnv):
    """The job's own settings (``ARCHIVE_JOB_*``)."""

    spark_master: str = setting(
        "ARCHIVE_JOB_SPARK_MASTER",
        parse_str(allow_empty=False),
        default="local[2]",
        doc="Spark master unless spark-submit sets one (the CronJob passes k8s://…).",
    )
    connector_jars: str = setting(
        "ARCHIVE_JOB_CONNECTOR_JARS",
        parse_str(),
        default=".cache/spark/jars",
        doc="Directory whose *.jar (make spark-fetch) go into spark.jars; empty when the image bakes them "
        "into $SPARK_HOME/jars.",
    )
    shuffle_partitions: int = setting(
        "ARCHIVE_JOB_SHUFFLE_PARTITIONS",
        parse_int(1, 100_000),
        default="8",
        doc="spark.sql.shuffle.partitions (Spark's 200 is far too many for local[2]; AQE coalesces anyway).",
    )
    tables: tuple[str, ...] = setting(
        "ARCHIVE_JOB_TABLES",
        parse_list(parse_choice(*BUCKETED_TABLES)),
        default=",".join(BUCKETED_TABLES),
        doc="Bucketed tables the job maintains.",
    )
    max_partition_rows: int = setting(
        "ARCHIVE_JOB_MAX_PARTITION_ROWS",
        parse_int(1, 10**9),
        default="100000",
        doc=(
            "A partition with more rows is oversized "
            '(docs/cassandra.md "Sources: data model": about 100k rows).'
        ),
    )
    max_partition_bytes: int = setting(
        "ARCHIVE_JOB_MAX_PARTITION_BYTES",
        parse_int(1, 2**40),
        default=str(100 * MIB),
        doc=(
            "A partition whose envelopes sum to more bytes is oversized (about 100 MB, docs/cassandra.md "
            '"Sources: data model").'
        ),
    )
    target_fill: float = setting(
        "ARCHIVE_JOB_TARGET_FILL",
        parse_float(0.05, 1.0),
        default="0.5",
        doc="A split bucket gets enough shards to fill each to this fraction of the bounds (head-room for "
        "the rest of the bucket's traffic).",
    )
    max_shards: int = setting(
        "ARCHIVE_JOB_MAX_SHARDS",
        parse_int(1, 65_536),
        default="4096",
        doc="Most shards one bucket is split into (the shard is the first two hash bytes mod shards).",
    )
    plan_grace_s: float = setting(
        "ARCHIVE_JOB_PLAN_GRACE_SECONDS",
        parse_duration(0, 3600),
        default="30",
        doc="Seconds between publishing a shard plan and deleting the old copies: longer than any put that "
        "read the old plan can take (ARCHIVE_CASSANDRA_REQUEST_TIMEOUT_SECONDS, 12 s, per statement).",
    )
    rewrite_min_ttl_s: int = setting(
        "ARCHIVE_JOB_REWRITE_MIN_TTL_SECONDS",
        parse_int(0, 10**9),
        default="21600",
        doc="A removed row whose TTL has less than this left is left to its TTL instead of rewriting its "
        "bucket; keep it below one day, the least time an expire erasure outlives the rows it hides.",
    )
    top_partitions: int = setting(
        "ARCHIVE_JOB_TOP_PARTITIONS",
        parse_int(1, 1000),
        default="5",
        doc="How many of the largest partitions the report lists, before and after.",
    )
    delete_concurrency: int = setting(
        "ARCHIVE_JOB_DELETE_CONCURRENCY",
        parse_int(1, 1024),
        default="32",
        doc="Partition DELETEs in flight per executor task.",
    )
    sqlite_slices: int = setting(
        "ARCHIVE_JOB_SQLITE_SLICES",
        parse_int(1, 4096),
        default="8",
        doc="SQLite: sent-time slices read in parallel by the executors.",
    )
    sqlite_delete_batch: int = setting(
        "ARCHIVE_JOB_SQLITE_DELETE_BUCKETS",
        parse_int(1, 100_000),
        default="64",
        doc="SQLite: expired buckets deleted per transaction (short transactions keep ingest flowing).",
    )
    report_json: str = setting(
        "ARCHIVE_JOB_REPORT_JSON",
        parse_str(),
        default="-",
        doc="Where the JSON report goes: a file path, - for stdout, empty for nowhere.",
    )
    report_prom: str = setting(
        "ARCHIVE_JOB_REPORT_PROM",
        parse_str(),
        default="",
        doc="A .prom file for node-exporter's textfile collector (written atomically); empty = none.",
    )
    pushgateway: str = setting(
        "ARCHIVE_JOB_PUSHGATEWAY_URL",
        parse_url(allow_empty=True),
        default="",
        doc="Pushgateway URL for the report's metrics (job=mailmesh_archive_job); empty = none.",
    )
    failpoint: str = setting(
        "ARCHIVE_JOB_FAILPOINT",
        parse_str(),
        default="",
        doc="Tests only: <stage>:raise, <stage>:exit or <stage>:pause:<file> right after that stage.",
    )

    def __post_init__(self) -> None:
        if not self.tables:
            raise ValueError("ARCHIVE_JOB_TABLES names no table")

    def jar_paths(self) -> list[Path]:
        """The connector jars to put into ``spark.jars`` (none when the directory setting is empty)."""
        return sorted(Path(self.connector_jars).glob("*.jar")) if self.connector_jars else []


@dataclass(frozen=True)
class RunOptions:
    """The command line of one run."""

    command: Command
    dry_run: bool = False
    now: int | None = None  # UNIX seconds; None = the wall clock at start

    @property
    def plan_only(self) -> bool:
        """Scan and plan, change nothing: ``--dry-run`` or the ``report`` command."""
        return self.dry_run or self.command is Command.REPORT


def parse_args(argv: Sequence[str]) -> RunOptions:
    """Parse ``<command> [--dry-run] [--now SECONDS]`` (everything else comes from the environment)."""
    parser = argparse.ArgumentParser(
        prog="archive_job", description="Expire and repartition the Mailmesh archive (docs/spark.md)."
    )
    parser.add_argument("command", choices=[c.value for c in Command])
    parser.add_argument(
        "--dry-run", action="store_true", help="print the plan and the report, change nothing"
    )
    parser.add_argument("--now", type=int, default=None, help="UNIX seconds to act at (default: the clock)")
    args = parser.parse_args(list(argv))
    return RunOptions(Command(args.command), bool(args.dry_run), args.now)


def load(environ: Mapping[str, str] | None = None) -> tuple[JobConfig, StoreConfig]:
    """The job's and the archive's settings from ``environ`` (default: the process environment)."""
    return JobConfig.from_env(environ), StoreConfig.from_env(environ)
