"""Stages of a run: one progress line each, their durations, and the hooks that fire between them.

Every stage ends with a line like ``[archive-job] 4/9 copy: 1200 rows into 16 partitions (2.1 s)`` on
stdout (the CronJob's log). Between stages two things may intervene, both for tests of resumability:

- a *hook* (a callable given to :func:`spark.archive_job.job.run`), called with the stage's name; tests use
  it to query the archive between stages and to raise, which stops the run there;
- a *fail point* (``ARCHIVE_JOB_FAILPOINT=<stage>:<action>``): ``raise`` raises :class:`FailPoint`,
  ``exit`` kills the process with SIGKILL (no clean-up at all), ``pause:<file>`` creates ``<file>`` and
  sleeps until the process is killed from outside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

__all__ = ["FailPoint", "StageLog", "Stages"]

Hook = Callable[[str], None]
PAUSE_LIMIT_S = 3600.0  # a paused run that nobody kills gives up after an hour


class FailPoint(RuntimeError):
    """Raised by an ``ARCHIVE_JOB_FAILPOINT=<stage>:raise`` fail point."""


class StageLog:
    """What a stage reports about itself (joined into its progress line)."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def note(self, text: str) -> None:
        """Add a fact to the stage's progress line."""
        self.notes.append(text)


class Stages:
    """Runs named stages in order, printing a progress line per stage and firing hooks after each."""

    def __init__(
        self, total: int, failpoint: str = "", hook: Hook | None = None, out: TextIO | None = None
    ) -> None:
        self.total = total
        self.hook = hook
        self.out = out if out is not None else sys.stdout
        self.durations: dict[str, float] = {}
        self._index = 0
        stage, _, action = failpoint.partition(":")
        self._failpoint = (stage, action) if failpoint else None

    def say(self, text: str) -> None:
        """Print one line of progress."""
        print(f"[archive-job] {text}", file=self.out, flush=True)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[StageLog]:
        """Run the body as stage ``name``; on success print its line, then run hooks and fail points."""
        self._index += 1
        log = StageLog()
        began = time.monotonic()
        try:
            yield log
        except BaseException as err:
            first = (str(err).strip().splitlines() or [""])[0][:300]
            self.say(f"{self._index}/{self.total} {name}: FAILED: {type(err).__name__}: {first}")
            raise
        took = time.monotonic() - began
        self.durations[name] = self.durations.get(name, 0.0) + took
        detail = "; ".join(log.notes) if log.notes else "done"
        self.say(f"{self._index}/{self.total} {name}: {detail} ({took:.1f} s)")
        if self.hook is not None:
            self.hook(name)
        self._fire(name)

    def _fire(self, name: str) -> None:
        if self._failpoint is None or self._failpoint[0] != name:
            return
        action = self._failpoint[1]
        self.say(f"fail point after {name}: {action}")
        if action == "raise":
            raise FailPoint(f"fail point after stage {name}")
        if action == "exit":
            os.kill(os.getpid(), signal.SIGKILL)
        if action.startswith("pause:"):
            Path(action.removeprefix("pause:")).touch()
            deadline = time.monotonic() + PAUSE_LIMIT_S
            while time.monotonic() < deadline:
                time.sleep(0.2)  # wait to be killed from outside
            raise FailPoint(f"paused after stage {name} and nobody killed the run")
