"""Everything one run carries from stage to stage."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from spark.archive_job.config import JobConfig, RunOptions, StoreConfig
from spark.archive_job.decide import Policy
from spark.archive_job.report import Report
from spark.archive_job.rows import Cutoffs
from spark.archive_job.stages import Stages
from spark.archive_job.store import StoreClient

__all__ = ["Context"]


@dataclass
class Context:
    """One run: settings, the session, the store, the stage runner and the report being filled in."""

    spark: SparkSession
    job: JobConfig
    archive: StoreConfig
    opts: RunOptions
    store: StoreClient
    stages: Stages
    report: Report
    now: int

    @property
    def dry(self) -> bool:
        """Plan only: ``--dry-run`` or the ``report`` command."""
        return self.opts.plan_only

    @property
    def policy(self) -> Policy:
        """What this command may do, with the configured bounds."""
        return Policy(
            expire=self.opts.command.expires,
            split=self.opts.command.splits,
            max_rows=self.job.max_partition_rows,
            max_bytes=self.job.max_partition_bytes,
            target_fill=self.job.target_fill,
            max_shards=self.job.max_shards,
        )

    @property
    def cutoffs(self) -> Cutoffs | None:
        """This run's retention cutoffs (None when the command does not expire)."""
        return Cutoffs.of(self.archive.retention, self.now) if self.opts.command.expires else None
