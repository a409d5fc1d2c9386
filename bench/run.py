"""Run every benchmark suite, write bench/results/<suite>.json, and refresh the README's bench table.

Usage: ``python -m bench.run [--out DIR] [--only SUITE ...] [--no-readme]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path

from bench.harness import Result

#: Suites in run order; each module exposes ``run() -> list[Result]``.
SUITES = ["bench.codec"]

README_START = "<!-- bench:start -->"
README_END = "<!-- bench:end -->"


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
    body = f"{README_START}\n_Last run: {stamp}._\n\n{table}\n{README_END}"
    readme.write_text(head + body + tail)


def main(argv: list[str] | None = None) -> int:
    """Run the selected suites and write their results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--no-readme", action="store_true")
    ns = parser.parse_args(argv)
    ns.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = {"python": platform.python_version(), "machine": platform.machine(), "cpus": _cpus()}
    results: dict[str, list[Result]] = {}
    for name in SUITES:
        short = name.rsplit(".", 1)[-1]
        if ns.only and short not in ns.only:
            continue
        print(f"== {short}", flush=True)
        suite_results: list[Result] = importlib.import_module(name).run()
        for r in suite_results:
            print(f"  {r.name}: {_fmt(r.value)} {r.unit}", flush=True)
        results[short] = suite_results
        payload = {
            "suite": short,
            "when": stamp,
            "machine": machine,
            "results": [r.to_json() for r in suite_results],
        }
        (ns.out / f"{short}.json").write_text(json.dumps(payload, indent=2) + "\n")
    table = render_table(results)
    (ns.out / "summary.md").write_text(f"_Last run: {stamp}; {machine}._\n\n{table}\n")
    if not ns.no_readme and not ns.only:
        update_readme(
            Path("README.md"), table, f"{stamp}, {machine['cpus']} CPUs, Python {machine['python']}"
        )
    return 0


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())
