"""Every fuzz harness for a few thousand executions: the seeds and what libFuzzer derives from them.

``make fuzz`` runs the real campaign (10⁶ executions each, docs/fuzzing.md); this smoke keeps the harnesses
and their seed corpora working in ``make test``: any finding (an untyped exception, a broken round trip, a
hang past the hang detector, unbounded memory) fails it with the input libFuzzer wrote. The timeout is a
hang detector for one input, far above what any input takes, not a performance bound. The planted-bug test
proves the runner notices a finding at all.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz.campaign import run_harness
from fuzz.harnesses import NAMES

RUNS = 2000
HANG_S = 120


@pytest.mark.parametrize("name", NAMES)
def test_harness_finds_nothing(name: str, tmp_path: Path) -> None:
    result = run_harness(name, tmp_path, runs=RUNS, timeout_s=HANG_S)
    log = (tmp_path / "fuzz.log").read_text()
    assert result.findings == [], log[-3000:]
    assert result.exit_code == 0, log[-3000:]
    assert result.executions == RUNS
    assert result.cov > 0 and result.corpus_units > 0


@pytest.mark.timeout(300)
def test_a_planted_bug_is_reported_with_its_input(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "bad").write_bytes(b"\xc3\x01\x02\x03")
    result = run_harness(
        "planted", tmp_path / "work", runs=RUNS, module="tests.fuzz.planted_harness", corpus=seeds
    )
    assert result.exit_code != 0
    assert len(result.findings) == 1
    finding = result.findings[0]
    assert finding.kind == "crash" and "ValueError: planted" in finding.summary
    assert Path(finding.artifact).read_bytes().startswith(b"\xc3")
