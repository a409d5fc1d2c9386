"""Shrink a crashing input of a harness in-process: ``python -m fuzz.minimize <harness> <crash file>``.

libFuzzer's ``-minimize_crash`` re-executes ``argv[0]``, which for ``python -m`` is a module file, not a
program; this greedy minimizer runs the harness's ``test_one_input`` directly instead. It keeps a candidate
when it still fails with the same exception type and first message line: first it removes chunks (halving
their size down to one byte), then it lowers bytes toward zero. Writes ``<crash file>.min`` and prints it
as a Python literal for the regression test.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["failure", "main", "minimize"]


def failure(test_one_input: Callable[[bytes], None], data: bytes) -> tuple[str, str] | None:
    """``(exception type, first line of its message)`` if ``data`` fails the harness, else None."""
    try:
        test_one_input(data)
    except Exception as err:  # any exception is the harness's verdict, whatever its type
        lines = str(err).splitlines()
        return type(err).__name__, lines[0] if lines else ""
    return None


def minimize(test_one_input: Callable[[bytes], None], data: bytes) -> bytes:
    """The smallest variant of ``data`` found that fails like ``data`` does (ValueError if it passes)."""
    target = failure(test_one_input, data)
    if target is None:
        raise ValueError("the input does not fail the harness")
    best = data
    chunk = max(1, len(best) // 2)
    while chunk >= 1:
        start = 0
        while start < len(best):
            candidate = best[:start] + best[start + chunk :]
            if failure(test_one_input, candidate) == target:
                best = candidate
            else:
                start += chunk
        chunk //= 2
    for i in range(len(best)):
        for value in (0, 1, best[i] // 2):
            if value < best[i]:
                candidate = best[:i] + bytes((value,)) + best[i + 1 :]
                if failure(test_one_input, candidate) == target:
                    best = candidate
                    break
    return best


def main(argv: list[str] | None = None) -> int:
    """Command line: minimize one crash file of one harness."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("harness", help="harness name (fuzz/harnesses/<name>.py)")
    parser.add_argument("crash", type=Path, help="the crashing input")
    args = parser.parse_args(argv)
    module = importlib.import_module(f"fuzz.harnesses.{args.harness}")
    data = args.crash.read_bytes()
    smallest = minimize(module.test_one_input, data)
    out = args.crash.with_name(args.crash.name + ".min")
    out.write_bytes(smallest)
    print(f"{len(data)} -> {len(smallest)} bytes, {failure(module.test_one_input, smallest)}: {out}")
    print(f'bytes.fromhex("{smallest.hex()}")')
    return 0


if __name__ == "__main__":
    sys.exit(main())
