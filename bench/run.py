"""Run the benchmark suites, write bench/results/<suite>.json, and refresh the README's bench table.

Usage: ``python -m bench.run [--out DIR] [--suite NAME ...] [--quick] [--no-readme] [--render]``.

- ``--suite NAME`` (repeatable; ``--only NAME ...`` is the older spelling) runs only those suites. The summary
  and the README table are still built from every suite's results file in ``--out``, so running one suite
  refreshes its rows and keeps the others' last results.
- ``--quick`` runs every suite at reduced size to check that it works end to end (about two minutes); its
  results go to ``.cache/bench/quick-results`` unless ``--out`` is given, and never into the README.
- ``--render`` runs nothing and rebuilds ``summary.md`` and the README table from the results files.

A suite that fails is reported (traceback on stderr), its previous results file is left alone, the other
suites still run, and the exit status is 1. Methods and caveats: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bench.harness import Result, configure

#: Suites in run order; each module exposes ``run() -> list[Result]``.
SUITES = [
    "bench.codec",
    "bench.devp2p",
    "bench.ingest",
    "bench.history",
    "bench.edge",
    "bench.send",
    "bench.messaging",
    "bench.gateway",
]

README_START = "<!-- bench:start -->"
README_END = "<!-- bench:end -->"
QUICK_OUT = Path(".cache/bench/quick-results")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def render_table(results: dict[str, list[Result]]) -> str:
    """A Markdown table of every result with its target."""
    lines = ["| suite | measurement | result | target | met |", "|---|---|---|---|---|"]
    for suite, items in results.items():
        for r in items:
            target = "" if r.target is None else ("≤ " if r.lower_is_better else "≥ ") + _fmt(r.target)
            met = {True: "yes", False: "**no**", None: ""}[r.meets_target]
            lines.append(f"| {suite} | {r.name} | {_fmt(r.value)} {r.unit} | {target} | {met} |")
    return "\n".join(lines)


def update_readme(readme: Path, table: str, stamp: str) -> None:
    """Replace the text between the bench markers in the README with ``table``."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    body = f"{README_START}\n_{stamp}._\n\n{table}\n{README_END}"
    readme.write_text(head + body + tail)


def other_load(results: dict[str, list[Result]]) -> tuple[float, float] | None:
    """The least and most CPU (in cores) other work on the machine used during any measurement."""
    seen: list[float] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "other_cores_used" and isinstance(item, int | float):
                    seen.append(float(item))
                else:
                    walk(item)

    for items in results.values():
        for r in items:
            walk(r.detail)
    return (min(seen), max(seen)) if seen else None


def load_results(path: Path) -> tuple[list[Result], dict[str, Any]]:
    """The results and the header (when, machine, …) of one suite's results file."""
    payload = json.loads(path.read_text())
    fields = ("name", "value", "unit", "detail", "target", "lower_is_better")
    results = [Result(**{k: r[k] for k in fields if k in r}) for r in payload["results"]]
    header = {k: v for k, v in payload.items() if k != "results"}
    return results, header


def main(argv: list[str] | None = None) -> int:
    """Run the selected suites and write their results."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    parser.add_argument("--suite", action="append", default=None, help="run only this suite (repeatable)")
    parser.add_argument("--only", nargs="*", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="reduced sizes, results not for the README")
    parser.add_argument("--no-readme", action="store_true")
    parser.add_argument(
        "--render", action="store_true", help="run nothing: rebuild summary.md and the README table"
    )
    ns = parser.parse_args(argv)
    wanted = set((ns.suite or []) + (ns.only or []))
    known = {name.rsplit(".", 1)[-1] for name in SUITES}
    if wanted - known:
        parser.error(f"unknown suite(s) {sorted(wanted - known)}; known: {sorted(known)}")
    out: Path = ns.out or (QUICK_OUT if ns.quick else Path("bench/results"))
    out.mkdir(parents=True, exist_ok=True)
    configure(quick=ns.quick)
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": _cpus()}
    failed: list[str] = []
    began = time.perf_counter()
    for name in SUITES:
        short = name.rsplit(".", 1)[-1]
        if ns.render or (wanted and short not in wanted):
            continue
        print(f"== {short}{' (quick)' if ns.quick else ''}", flush=True)
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        suite_began = time.perf_counter()
        try:
            suite_results: list[Result] = importlib.import_module(name).run()
        except Exception:
            traceback.print_exc()
            print(f"  {short}: FAILED (previous results kept)", flush=True)
            failed.append(short)
            continue
        for r in suite_results:
            print(f"  {r.name}: {_fmt(r.value)} {r.unit}", flush=True)
        payload = {
            "suite": short,
            "when": stamp,
            "quick": ns.quick,
            "seconds": round(time.perf_counter() - suite_began, 1),
            "machine": machine,
            "loadavg_after": [round(v, 1) for v in os.getloadavg()],
            "results": [r.to_json() for r in suite_results],
        }
        (out / f"{short}.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(f"== done in {time.perf_counter() - began:.0f} s", flush=True)
    results: dict[str, list[Result]] = {}
    stamps: list[str] = []
    for name in SUITES:
        short = name.rsplit(".", 1)[-1]
        path = out / f"{short}.json"
        if path.exists():
            results[short], header = load_results(path)
            stamps.append(f"{short} {header.get('when', '?')}")
    table = render_table(results)
    runs = "; ".join(stamps)
    load = other_load(results)
    if load is not None:
        runs += f"; other jobs on the machine used {load[0]:.1f}–{load[1]:.1f} of its cores meanwhile"
    (out / "summary.md").write_text(f"_Runs: {runs}; {machine}._\n\n{table}\n")
    if not ns.no_readme and not ns.quick:
        update_readme(
            Path("README.md"),
            table,
            f"Last runs: {runs} — {machine['cpus']} CPUs, Python {machine['python']}; "
            "method and caveats in docs/benchmarks.md",
        )
    return 1 if failed else 0


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
