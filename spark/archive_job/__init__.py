"""The archive's batch job: expire and repartition the envelope archive with PySpark (docs/spark.md).

Commands (``python -m spark.archive_job <command>``, or ``spark/run_job.py`` under spark-submit):

- ``expire``: remove what is past retention (global days and per-topic overrides): whole partitions
  where every row is gone, time buckets and topic days that mix expired and live rows rewritten into a
  new shard generation (never row deletes inside live partitions);
- ``repartition``: split buckets whose partitions exceed the row or byte bound into more shards under a
  new generation, publish the plan, and only then delete the old copies;
- ``maintain``: both in one pass over the data (what the CronJob runs);
- ``report``: the same scan and plan without changing anything.

Module map: :mod:`.config` (settings), :mod:`.session` (SparkSession), :mod:`.extract`, :mod:`.transform`,
:mod:`.load` (the three ETL steps), :mod:`.decide` (the per-bucket plan), :mod:`.rows` (what a row is to
the job), :mod:`.tables` (the sharded tables' columns), :mod:`.executor` (partition deletes run on
executors), :mod:`.store` (the ArchiveStore seen from a synchronous job), :mod:`.cassandra_flow` /
:mod:`.sqlite_flow` (the stages per backend), :mod:`.context` (what a run carries), :mod:`.stages`
(progress lines, hooks, fail points), :mod:`.report` (JSON and Prometheus), :mod:`.job` (entry).
"""
