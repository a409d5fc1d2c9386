"""One soak role as its own process: ``python -m bench.soak_role ROLE --settings F --enode E --out F``.

The coordinator (``bench/soak.py``) starts one process per role — ``publish``, ``history``, ``hostile`` —
so that each has an interpreter (and a GIL) of its own and its RSS and descriptors are sampled on their own.
Protocol on the pipes: the role connects its peers, prints ``ready``; the coordinator writes
``go <seconds>`` once every role is ready; the role runs that long, writes its JSON summary to ``--out``,
prints ``done`` and exits 0 (1 with a traceback on stderr if it failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import threading
from pathlib import Path
from typing import Any

from bench.soak_history import run_history
from bench.soak_hostile import run_hostile
from bench.soak_publish import run_publishers
from bench.soak_settings import SoakSettings

ROLES = ("publish", "history", "hostile")


def _parse_go(line: str) -> float:
    word, _, seconds = line.strip().partition(" ")
    if word != "go":
        raise RuntimeError(f"expected 'go <seconds>' from the coordinator, got {line!r}")
    return float(seconds)


async def _go(ready: asyncio.Event, go: asyncio.Future[float]) -> None:
    """Print ``ready`` once the role is connected, then resolve ``go`` from the coordinator's line.

    stdin is read on a daemon thread: a role that fails before ``go`` must not wait for the line to exit.
    """
    await ready.wait()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def read() -> None:
        text = sys.stdin.readline()

        def deliver() -> None:
            if not line.done():
                line.set_result(text)

        with contextlib.suppress(RuntimeError):  # the loop is gone: the role already ended
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=read, name="soak-go", daemon=True).start()
    try:
        go.set_result(_parse_go(await line))
    except RuntimeError as err:
        go.set_exception(err)


async def _main(ns: argparse.Namespace) -> dict[str, Any]:
    settings = SoakSettings.read(ns.settings)
    ready = asyncio.Event()
    go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    starter = asyncio.create_task(_go(ready, go))
    try:
        if ns.role == "publish":
            return await run_publishers(settings, ns.enode, ns.ledger, ready, go)
        if ns.role == "history":
            return await run_history(settings, ns.enode, ready, go)
        return await run_hostile(settings, ns.enode, ready, go)
    finally:
        starter.cancel()


def main(argv: list[str] | None = None) -> int:
    """Run one role (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--settings", type=Path, required=True)
    parser.add_argument("--enode", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ledger", type=Path, default=Path("ledger.bin"))
    ns = parser.parse_args(argv)
    # Peers misbehave on purpose: the libraries' INFO lines about it are not news here.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    summary = asyncio.run(_main(ns))
    ns.out.write_text(json.dumps(summary) + "\n")
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
