"""The campaign runner's pure parts: the libFuzzer command line and the reading of libFuzzer's output."""

from __future__ import annotations

from pathlib import Path

from fuzz.campaign import CORPUS, DICTS, command, parse_output, result_from_log

# Lines as libFuzzer 2.x (atheris 3.0) prints them.
DONE = """INFO: Seed: 1
#2\tINITED cov: 40 ft: 41 corp: 3/120b exec/s: 0 rss: 60Mb
#1000000\tDONE   cov: 131 ft: 402 corp: 89/69Kb lim: 4096 exec/s: 2770 rss: 70Mb
Done 1000000 runs in 361 second(s)
stat::number_of_executed_units: 1000000
stat::average_exec_per_sec:     2770
stat::new_units_added:          300
stat::slowest_unit_time_sec:    0
stat::peak_rss_mb:              70
"""
CRASH = """#5233\tREDUCE cov: 169 ft: 310 corp: 41/1917b lim: 76 exec/s: 0 rss: 60Mb L: 28/76

 === Uncaught Python exception: ===
InvalidRequest: SPEC_5: Limit: non-canonical integer (leading zero byte)
Traceback (most recent call last):

==14163== ERROR: libFuzzer: fuzz target exited
artifact_prefix='/w/'; Test unit written to /w/crash-0d383b0c
stat::number_of_executed_units: 5425
"""
TIMEOUT = """ALARM: working on the last Unit for 11 seconds
==9== ERROR: libFuzzer: timeout after 11 seconds
artifact_prefix='/w/'; Test unit written to /w/timeout-1234
"""


def test_the_command_line_reads_seeds_after_the_work_corpus_and_caps_time_only_when_asked() -> None:
    argv = command("rlp", Path("/w"), runs=5, seed=3, timeout_s=7, rss_limit_mb=512)
    assert argv[1:3] == ["-m", "fuzz.harnesses.rlp"]
    assert {"-runs=5", "-seed=3", "-timeout=7", "-rss_limit_mb=512", "-artifact_prefix=/w/"} <= set(argv)
    assert f"-dict={DICTS / 'rlp.dict'}" in argv
    assert argv[-2:] == ["/w/corpus", str(CORPUS / "rlp")]
    assert not any(a.startswith("-max_total_time") for a in argv)
    assert "-max_total_time=60" in command("rlp", Path("/w"), runs=5, max_total_time_s=60)


def test_a_finished_run_is_read_from_its_last_status_line_and_final_stats() -> None:
    result = parse_output("p2p_messages", DONE)
    assert (result.executions, result.cov, result.ft) == (1_000_000, 131, 402)
    assert (result.corpus_units, result.corpus_bytes) == (89, 69 * 1024)
    assert (result.exec_per_s, result.new_units, result.peak_rss_mb) == (2770, 300, 70)
    assert result.findings == []


def test_a_crash_and_a_timeout_are_findings_with_their_inputs() -> None:
    crash = parse_output("request_payload", CRASH).findings
    assert [(f.kind, f.artifact) for f in crash] == [("crash", "/w/crash-0d383b0c")]
    assert crash[0].summary.startswith("InvalidRequest: SPEC_5")
    timeout = parse_output("x", TIMEOUT).findings
    assert [(f.kind, f.artifact) for f in timeout] == [("timeout", "/w/timeout-1234")]


def test_a_result_is_read_back_from_its_log(tmp_path: Path) -> None:
    (tmp_path / "fuzz.log").write_text(DONE)
    result = result_from_log("p2p_messages", tmp_path)
    assert (result.executions, result.seconds, result.cpu_seconds) == (1_000_000, 361.0, None)
