"""``make fuzz``: run every harness for a number of executions and record what libFuzzer reports.

Each harness runs as ``python -m fuzz.harnesses.<name>`` under libFuzzer (atheris), at most ``--jobs`` at a
time (two on the 2-core development box), with a fixed ``-seed`` so a run can be repeated, a
per-input ``-timeout`` (a hang is a finding) and an ``-rss_limit_mb`` (so is unbounded memory). New inputs
go to ``var/fuzz/<name>/corpus`` beside the committed seeds (``fuzz/corpus/<name>``), crash artifacts and
the full log to ``var/fuzz/<name>/``. Results — executions, final coverage (``cov``: instrumented edges,
``ft``: features), corpus size, executions per second, findings — go to ``bench/results/fuzz.json`` and to
the table in ``docs/fuzzing.md``. The smoke test (``tests/fuzz``) uses :func:`run_harness` with a few
thousand executions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fuzz.harnesses import NAMES

__all__ = ["Finding", "HarnessResult", "command", "main", "parse_output", "result_from_log", "run_harness"]

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DICTS = ROOT / "fuzz" / "dicts"
TABLE_START, TABLE_END = "<!-- fuzz:start -->", "<!-- fuzz:end -->"

_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\d+)(b|Kb|Mb)\b.*?exec/s: (\d+)")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")
_ARTIFACT = re.compile(r"Test unit written to (\S+)")
_KIND = re.compile(
    r"ERROR: libFuzzer: ([\w-]+)|^(ALARM): working on the last Unit|^==\d+== ERROR: libFuzzer: ([\w-]+)"
)
_UNITS = {"b": 1, "Kb": 1024, "Mb": 1024 * 1024}


@dataclass(frozen=True, slots=True)
class Finding:
    """One input libFuzzer stopped on: a crash (an exception escaped), a timeout or out-of-memory."""

    kind: str
    """``crash`` (the exception is in ``summary``), ``timeout``, ``out-of-memory`` or libFuzzer's word."""
    artifact: str
    """Where libFuzzer wrote the input."""
    summary: str
    """The exception line, or libFuzzer's error line."""


@dataclass(slots=True)
class HarnessResult:
    """What one libFuzzer run of one harness reported."""

    name: str
    executions: int = 0
    cov: int = 0
    ft: int = 0
    corpus_units: int = 0
    corpus_bytes: int = 0
    exec_per_s: int = 0
    new_units: int = 0
    peak_rss_mb: int = 0
    seconds: float = 0.0
    cpu_seconds: float | None = 0.0
    exit_code: int = 0
    time_limited: bool = False
    findings: list[Finding] = field(default_factory=list)


def command(
    name: str,
    work: Path,
    *,
    runs: int,
    seed: int = 1,
    timeout_s: int = 10,
    rss_limit_mb: int = 1024,
    module: str | None = None,
    corpus: Path | None = None,
    max_total_time_s: int = 0,
) -> list[str]:
    """The libFuzzer command line of one harness: new inputs into ``work/corpus``, seeds from ``corpus``."""
    seeds = CORPUS / name if corpus is None else corpus
    args = [
        sys.executable,
        "-m",
        module or f"fuzz.harnesses.{name}",
        f"-runs={runs}",
        f"-seed={seed}",
        f"-timeout={timeout_s}",
        f"-rss_limit_mb={rss_limit_mb}",
        "-print_final_stats=1",
        f"-artifact_prefix={work}/",
    ]
    if max_total_time_s:
        args.append(f"-max_total_time={max_total_time_s}")
    dictionary = DICTS / f"{name}.dict"
    if dictionary.exists():
        args.append(f"-dict={dictionary}")
    return [*args, str(work / "corpus"), str(seeds)]


def parse_output(name: str, output: str) -> HarnessResult:
    """Read the last status line, the final stats and any findings from libFuzzer's output."""
    result = HarnessResult(name)
    kind = ""
    summary = ""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        status = _STATUS.match(line)
        if status:
            result.executions, result.cov, result.ft, result.corpus_units = (
                int(status.group(n)) for n in range(1, 5)
            )
            result.corpus_bytes = int(status.group(5)) * _UNITS[status.group(6)]
            result.exec_per_s = int(status.group(7))
        stat = _STAT.match(line)
        if stat:
            key, value = stat.group(1), int(stat.group(2))
            if key == "number_of_executed_units":
                result.executions = value
            elif key == "average_exec_per_sec":
                result.exec_per_s = value
            elif key == "new_units_added":
                result.new_units = value
            elif key == "peak_rss_mb":
                result.peak_rss_mb = value
        if "Uncaught Python exception" in line and i + 1 < len(lines):
            kind, summary = "crash", lines[i + 1].strip()
        match = _KIND.search(line)
        if match and not kind:
            kind = (match.group(1) or match.group(2) or match.group(3) or "").lower()
            kind = "timeout" if kind == "alarm" else kind
            summary = line.strip()
        artifact = _ARTIFACT.search(line)
        if artifact:
            result.findings.append(Finding(kind or "crash", artifact.group(1), summary))
            kind = summary = ""
    return result


def run_harness(
    name: str,
    work: Path,
    *,
    runs: int,
    seed: int = 1,
    timeout_s: int = 10,
    rss_limit_mb: int = 1024,
    module: str | None = None,
    corpus: Path | None = None,
    max_total_time_s: int = 0,
) -> HarnessResult:
    """Run one harness to ``runs`` executions, its first finding or ``max_total_time_s`` (0: no limit).

    Its log goes to ``work/fuzz.log``.
    """
    (work / "corpus").mkdir(parents=True, exist_ok=True)
    argv = command(
        name,
        work,
        runs=runs,
        seed=seed,
        timeout_s=timeout_s,
        rss_limit_mb=rss_limit_mb,
        module=module,
        corpus=corpus,
        max_total_time_s=max_total_time_s,
    )
    started = time.monotonic()
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        output = proc.stdout.read().decode("utf-8", errors="replace")
        # wait4 rather than wait: the child's own CPU time, which a parallel run cannot blur.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    (work / "fuzz.log").write_text(output)
    result = parse_output(name, output)
    result.seconds = round(time.monotonic() - started, 1)
    result.cpu_seconds = round(usage.ru_utime + usage.ru_stime, 1)
    result.exit_code = proc.returncode
    result.time_limited = bool(max_total_time_s) and result.executions < runs and not result.findings
    if not result.exec_per_s and result.seconds:  # libFuzzer reports 0 for runs under a second
        result.exec_per_s = int(result.executions / result.seconds)
    return result


_DONE = re.compile(r"^Done (\d+) runs in (\d+) second")


def result_from_log(name: str, work: Path) -> HarnessResult:
    """The result of a finished run, read back from its ``work/fuzz.log`` (its CPU time is not in the log)."""
    output = (work / "fuzz.log").read_text()
    result = parse_output(name, output)
    result.cpu_seconds = None
    for line in output.splitlines():
        done = _DONE.match(line)
        if done:
            result.seconds = float(done.group(2))
    return result


def _table(results: list[dict[str, object]]) -> str:
    rows = [
        "| harness | executions | cov | ft | corpus (inputs/bytes) | exec/s | exec/CPU-s | wall (CPU) "
        "| findings |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        findings = r["findings"]
        assert isinstance(findings, list)
        found = "none" if not findings else "; ".join(f"{f['kind']}: {f['summary']}" for f in findings)
        cpu = r["cpu_seconds"]
        assert cpu is None or isinstance(cpu, float | int)
        per_cpu = f"{int(int(str(r['executions'])) / cpu):,}" if cpu else "—"
        cpu_text = f"{cpu:,.0f} s" if cpu is not None else "—"
        runs = f"{r['executions']:,}" + (" (time limit)" if r.get("time_limited") else "")
        rows.append(
            f"| `{r['name']}` | {runs} | {r['cov']:,} | {r['ft']:,} | "
            f"{r['corpus_units']:,} / {r['corpus_bytes']:,} | {r['exec_per_s']:,} | {per_cpu} | "
            f"{r['seconds']:,.0f} s ({cpu_text}) | {found} |"
        )
    return "\n".join(rows)


def record(results: list[HarnessResult], out: Path, docs: Path, *, runs: int, jobs: int) -> None:
    """Merge ``results`` into ``out`` (by harness, in NAMES order) and refresh the table in ``docs``."""
    previous = json.loads(out.read_text())["harnesses"] if out.exists() else []
    merged = {r["name"]: r for r in previous} | {r.name: asdict(r) for r in results}
    ordered = [merged[name] for name in NAMES if name in merged]
    report = {
        "suite": "fuzz",
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "runs_per_harness": runs,
        "parallel_jobs": jobs,
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "loadavg_after": [round(v, 1) for v in os.getloadavg()],
        "harnesses": ordered,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    text = docs.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    note = f"_Last run: {report['when']}, load average afterwards {report['loadavg_after']}._"
    docs.write_text(text[:start] + "\n" + note + "\n\n" + _table(ordered) + "\n" + text[end:])


def main(argv: list[str] | None = None) -> int:
    """Command line of ``make fuzz``; exits 1 if any harness reported a finding or failed to run."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1_000_000, help="executions per harness")
    parser.add_argument("--jobs", type=int, default=2, help="harnesses run at the same time")
    parser.add_argument("--only", nargs="*", default=list(NAMES), choices=NAMES, metavar="NAME")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--timeout", type=int, default=10, help="seconds one input may take (a hang otherwise)"
    )
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument(
        "--max-total-time", type=int, default=0, help="seconds per harness at most (0: until --runs)"
    )
    parser.add_argument(
        "--from-logs", action="store_true", help="record the finished runs in --work instead of running"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "var" / "fuzz")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fuzz.json")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs" / "fuzzing.md")
    args = parser.parse_args(argv)

    lock = threading.Lock()

    def one(name: str) -> HarnessResult:
        if args.from_logs:
            result = result_from_log(name, args.work / name)
        else:
            result = run_harness(
                name,
                args.work / name,
                runs=args.runs,
                seed=args.seed,
                timeout_s=args.timeout,
                rss_limit_mb=args.rss_limit_mb,
                max_total_time_s=args.max_total_time,
            )
        with lock:  # recorded as each harness ends, so an interrupted campaign keeps what it finished
            record([result], args.out, args.docs, runs=args.runs, jobs=args.jobs)
        print(
            f"{name}: {result.executions:,} runs, cov {result.cov}, ft {result.ft}, "
            f"{result.exec_per_s:,}/s, {len(result.findings)} findings, exit {result.exit_code}",
            flush=True,
        )
        return result

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, args.only))
    return 1 if any(r.findings or r.exit_code for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
