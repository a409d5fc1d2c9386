"""The job's pure parts, without Spark: partition roles, the per-bucket plan, row classification against
the adapter's own erasures, settings, stage hooks and fail points, the report's JSON and Prometheus text."""

from __future__ import annotations

import io
import json
import re

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from archivestore.cassandra.layout import (
    GENERATION_STRIDE,
    MAX_GENERATION,
    Generation,
    ShardPlan,
    shard_of,
)
from archivestore.cassandra.schema import TIME_TABLE, TOPIC_TABLE
from archivestore.retention import RetentionPolicy
from archivestore.types import ShardPlanEntry
from archivestore.visibility import Erasure, Erasures
from spark.archive_job.config import Command, JobConfig, load, parse_args
from spark.archive_job.decide import BucketStats, Policy, Role, decide, role_of, target_shards
from spark.archive_job.executor import delete_statements
from spark.archive_job.report import Report
from spark.archive_job.rows import DOOMED, LONG_TTL, VISIBLE, Cutoffs, is_live, is_stranded, row_flags
from spark.archive_job.session import chosen_master
from spark.archive_job.stages import FailPoint, Stages
from spark.archive_job.transform import PartitionSize

H = bytes.fromhex("abcd") + bytes(30)
TOPIC = bytes.fromhex("aabbccdd")
OTHER = bytes.fromhex("01020304")


def plan_of(*entries: tuple[int, int, int]) -> ShardPlan:
    return ShardPlan.from_rows(TIME_TABLE, 4, [ShardPlanEntry(TIME_TABLE, b, g, s) for b, g, s in entries])


def stats(bucket: int = 10, **kw: int) -> BucketStats:
    base = dict(
        rows=100,
        current_max_rows=10,
        current_max_bytes=1000,
        current_stranded=0,
        live_rows=100,
        live_bytes=10_000,
        stale_rows=0,
        max_generation_seen=0,
    )
    base.update(kw)
    return BucketStats(TIME_TABLE, bucket, **base)


POLICY = Policy(expire=True, split=True, max_rows=50, max_bytes=10**6, target_fill=0.5, max_shards=64)


# ---------------------------------------------------------------------------------------------- roles
def test_roles_follow_the_adapters_shard_plan() -> None:
    plan = plan_of((7, 2, 8))  # bucket 7 moved to generation 2 with 8 shards (generation 0 still merged)
    g2 = 2 * GENERATION_STRIDE
    assert role_of(plan, 7, g2 + 7) == Role.CURRENT
    assert role_of(plan, 7, 3) == Role.STALE  # generation 0, default 4 shards: readers still merge it
    assert role_of(plan, 7, g2 + 8) == Role.UNREACHABLE  # beyond the generation's shard count
    assert role_of(plan, 7, 3 * GENERATION_STRIDE) == Role.ORPHAN  # written by a run that never published
    assert role_of(plan, 7, GENERATION_STRIDE) == Role.UNREACHABLE  # generation 1 was never recorded
    assert role_of(plan, 8, 2) == Role.CURRENT and role_of(plan, 8, 4) == Role.UNREACHABLE
    assert role_of(plan, 8, GENERATION_STRIDE) == Role.ORPHAN


# ---------------------------------------------------------------------------------------------- decide
def test_an_oversized_bucket_moves_to_a_fresh_generation_with_enough_shards() -> None:
    plan = decide(
        [stats(current_max_rows=400, live_rows=1000, max_generation_seen=3)], {TIME_TABLE: plan_of()}, POLICY
    )
    (move,) = plan.moves
    assert move.source == Generation(0, 4) and move.reasons == ("oversized",)
    # generation: after every one seen on disk (an orphan's included); shards: 1000 rows at 25 per shard
    assert move.target == Generation(4, 40)
    assert (
        target_shards(Generation(0, 4), stats(live_rows=10), POLICY, oversized=True) == 8
    )  # at least double
    assert target_shards(Generation(0, 4), stats(live_rows=10**6), POLICY, oversized=True) == 64  # capped


def test_removed_rows_move_a_bucket_only_when_expiring() -> None:
    one = [stats(current_stranded=5)]
    assert [m.reasons for m in decide(one, {TIME_TABLE: plan_of()}, POLICY).moves] == [("removed rows",)]
    assert decide(one, {TIME_TABLE: plan_of()}, Policy(False, True, 50, 10**6)).moves == []


def test_stale_rows_converge_and_settled_buckets_are_left_alone() -> None:
    plan = decide(
        [stats(1, stale_rows=3), stats(2), stats(3, current_max_rows=51, current_max_bytes=10)],
        {TIME_TABLE: plan_of((1, 1, 4))},
        POLICY,
    )
    assert plan.converge == [(TIME_TABLE, 1)] and [m.bucket for m in plan.moves] == [3]
    assert "converge envelopes_by_time bucket 1" in "\n".join(plan.lines())


def test_stale_rows_never_converge_into_partitions_an_expiry_deletes() -> None:
    # Converging would copy rows (with their old write times) into a partition whose tombstone is newer.
    plan = decide([stats(stale_rows=2, current_dropped=1)], {TIME_TABLE: plan_of((10, 1, 4))}, POLICY)
    assert plan.converge == [] and [m.reasons for m in plan.moves] == [
        ("stale rows beside expired partitions",)
    ]
    assert plan.moves[0].target == Generation(2, 4)


def test_a_bucket_at_the_shard_limit_is_reported_not_moved() -> None:
    full = Policy(True, True, 50, 10**6, max_shards=4)
    plan = decide([stats(current_max_rows=400)], {TIME_TABLE: plan_of()}, full)
    assert plan.moves == [] and plan.unsplittable == [(TIME_TABLE, 10)]


def test_generations_run_out_loudly() -> None:
    with pytest.raises(ValueError, match="no shard generation left"):
        decide(
            [stats(current_stranded=1, max_generation_seen=MAX_GENERATION)], {TIME_TABLE: plan_of()}, POLICY
        )


# ---------------------------------------------------------------------------------------------- rows
def test_row_classes_use_the_adapters_visibility_and_the_runs_cutoffs() -> None:
    now = 1_000_000
    erased = Erasures((Erasure(applied_at=5_000, lo=0, hi=500, topic=OTHER),))
    cut = Cutoffs(cutoff=800, per_topic={TOPIC: 900})
    f = row_flags(now, erased, cut, min_ttl_s=3600)
    assert f(850, bytearray(OTHER), bytearray(H), None, 1, None) == VISIBLE | LONG_TTL  # other topic: 800
    assert f(850, TOPIC, H, None, 1, 100) == VISIBLE | DOOMED  # own cutoff 900; TTL short
    assert f(100, OTHER, H, None, 4_999, 7200) == LONG_TTL  # erased (written before the erasure)
    assert f(100, OTHER, H, None, 5_001, 7200) == VISIBLE | DOOMED | LONG_TTL  # re-put after it
    assert f(950, TOPIC, H, now, 1, None) == LONG_TTL  # past expires_at
    assert is_live(VISIBLE) and not is_live(VISIBLE | DOOMED) and not is_live(0)
    assert is_stranded(LONG_TTL) and is_stranded(VISIBLE | DOOMED | LONG_TTL) and not is_stranded(DOOMED)
    assert not is_stranded(VISIBLE | LONG_TTL)


def test_cutoffs_come_from_the_retention_policy() -> None:
    policy = RetentionPolicy.from_days(30, {TOPIC: 1})
    cut = Cutoffs.of(policy, now=100 * 86_400)
    assert cut.cutoff == 70 * 86_400 and cut.per_topic == {TOPIC: 99 * 86_400}
    assert cut.dooms(99 * 86_400 - 1, TOPIC) and not cut.dooms(99 * 86_400 - 1, OTHER)
    assert not Cutoffs.of(RetentionPolicy(default_s=None), 10**9).dooms(0, OTHER)


def test_copies_land_where_the_adapters_writers_put_them() -> None:
    plan = plan_of((5, 3, 16))
    gen = plan.current(5)
    assert (
        plan.shard_for(5, H) == shard_of(gen.generation, gen.shards, H) == 3 * GENERATION_STRIDE + 0xABCD % 16
    )


# ---------------------------------------------------------------------------------------------- deletes
def test_deletes_name_whole_partitions_only() -> None:
    for table, cql in delete_statements("ks").items():
        where = cql.split(" WHERE ", 1)[1]
        columns = re.findall(r"(\w+) = \?", where)
        expected = {TIME_TABLE: ["bucket", "shard"], TOPIC_TABLE: ["topic", "day", "shard"]}.get(
            table, ["key"]
        )
        assert columns == expected, cql


# ---------------------------------------------------------------------------------------------- settings
def test_settings_parse_and_refuse_bad_values() -> None:
    job, archive = load({"ARCHIVE_JOB_TABLES": "envelopes_by_time", "ARCHIVE_JOB_CONNECTOR_JARS": ""})
    assert job.tables == (TIME_TABLE,) and job.jar_paths() == [] and archive.backend == "sqlite"
    with pytest.raises(Exception, match="ARCHIVE_JOB_TARGET_FILL"):
        JobConfig.from_env({"ARCHIVE_JOB_TARGET_FILL": "2"})
    opts = parse_args(["maintain", "--dry-run", "--now", "123"])
    assert (opts.command, opts.dry_run, opts.now, opts.plan_only) == (Command.MAINTAIN, True, 123, True)
    assert parse_args(["report"]).plan_only and not parse_args(["expire"]).plan_only
    assert Command.EXPIRE.expires and not Command.EXPIRE.splits and not Command.REPARTITION.expires


# ---------------------------------------------------------------------------------------------- stages
def test_the_master_is_spark_submits_when_it_started_the_driver() -> None:
    job = JobConfig.from_env({"ARCHIVE_JOB_SPARK_MASTER": "local[3]"})
    assert chosen_master(job, {}) == "local[3]"
    # spark-submit hands its JVM to the driver's Python: its --master (spark://…, k8s://…) must stand.
    assert chosen_master(job, {"PYSPARK_GATEWAY_PORT": "41234", "PYSPARK_GATEWAY_SECRET": "s"}) is None


def test_stages_print_a_line_each_and_fire_hooks_and_fail_points(tmp_path: object) -> None:
    out = io.StringIO()
    seen: list[str] = []
    stages = Stages(2, failpoint="second:raise", hook=seen.append, out=out)
    with stages.stage("first") as log:
        log.note("12 rows")
    with pytest.raises(FailPoint), stages.stage("second"):
        pass
    assert seen == ["first", "second"]
    lines = out.getvalue().splitlines()
    assert re.fullmatch(r"\[archive-job\] 1/2 first: 12 rows \(\d+\.\d s\)", lines[0])
    assert lines[-1] == "[archive-job] fail point after second: raise"
    failing = Stages(1, out=out)
    with pytest.raises(ZeroDivisionError), failing.stage("boom"):
        _ = 1 // 0
    assert "1/1 boom: FAILED: ZeroDivisionError" in out.getvalue()


# ---------------------------------------------------------------------------------------------- report
def test_report_renders_json_and_prometheus_text() -> None:
    rep = Report("maintain", "cassandra", False, now=1234)
    rep.stages = {"extract": 2.0, "copy": 1.0, "converge": 1.0}
    rep.rows_scanned = {TIME_TABLE: 1000, TOPIC_TABLE: 1000}
    rep.rows_moved, rep.envelopes_expired = 400, 7
    rep.largest_before = [PartitionSize(TIME_TABLE, 5, 0, None, 300, 9000)]
    rep.largest_after = [PartitionSize(TIME_TABLE, 5, GENERATION_STRIDE + 1, None, 40, 1200)]
    rep.finish(ok=True)
    doc = json.loads(rep.to_json())
    assert doc["scan_rows_per_second"] == 1000.0 and doc["rewrite_rows_per_second"] == 200.0
    assert doc["largest_partitions_after"][0]["rows"] == 40
    text = generate_latest(rep.registry()).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    base = (("backend", "cassandra"), ("command", "maintain"), ("dry_run", "false"))
    assert samples[("mailmesh_archive_job_success", base)] == 1
    assert samples[("mailmesh_archive_job_rows_moved", base)] == 400
    assert samples[("mailmesh_archive_job_largest_partition_rows", (*base, ("when", "before")))] == 300
    assert samples[("mailmesh_archive_job_largest_partition_rows", (*base, ("when", "after")))] == 40
    assert ("mailmesh_archive_job_last_success_timestamp_seconds", base) in samples
    failed = Report("expire", "sqlite", False, now=1)
    failed.finish(ok=False, error="boom")
    text = generate_latest(failed.registry()).decode()
    assert "mailmesh_archive_job_success" in text and "last_success_timestamp" not in text


def test_the_connector_logs_in_with_the_archive_login() -> None:
    from spark.archive_job.session import cassandra_settings

    _, plain = load({"ARCHIVE_BACKEND": "cassandra"})
    assert not any(key.startswith("spark.cassandra.auth.") for key in cassandra_settings(plain))
    _, archive = load(
        {
            "ARCHIVE_BACKEND": "cassandra",
            "ARCHIVE_CASSANDRA_USERNAME": "job",
            "ARCHIVE_CASSANDRA_PASSWORD": "pw-1",
        }
    )
    settings = cassandra_settings(archive)
    assert (settings["spark.cassandra.auth.username"], settings["spark.cassandra.auth.password"]) == (
        "job",
        "pw-1",
    )
