"""What a service process wrote: its output lines, parsed where they are our JSON log records.

Every Mailmesh service logs one JSON object per line to stdout (``meshcore.logging``: ``ts``, ``level``,
``logger``, ``msg``, ``service``, …). The harness merges stderr into the same stream, so anything else a
process prints — a traceback from Python's last-resort handler, an "Exception ignored in" note, a library's
``warnings`` output — arrives as a raw (non-JSON) line. :meth:`LogCapture.unexpected` reports both kinds of
noise: records at WARNING or above and raw lines, minus an explicit allow-list of lines a test provokes on
purpose. That is how the e2e and interop tiers keep the log quiet in normal operation.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Allow", "LogCapture", "LogLine", "ServiceExited", "is_noise"]

NOISY_LEVELS = frozenset({"WARNING", "ERROR", "CRITICAL"})
"""Levels that count as noise unless allowed: normal operation logs INFO and below only."""


class ServiceExited(Exception):
    """A service process ended while the harness was waiting for it (to serve, or for a log line)."""

    def __init__(self, name: str, returncode: int | None, tail: str) -> None:
        super().__init__(f"{name} exited with {returncode}:\n{tail}")
        self.name = name
        self.returncode = returncode
        self.tail = tail


@dataclass(frozen=True)
class LogLine:
    """One line of a process's output; ``record`` is the parsed JSON object when it is one."""

    text: str
    record: dict[str, Any] | None

    @classmethod
    def parse(cls, text: str) -> LogLine:
        """Parse ``text`` (without its newline); a line that is not a JSON object keeps ``record`` None."""
        record: Any = None
        if text.startswith("{"):
            try:
                record = json.loads(text)
            except ValueError:
                record = None
        return cls(text, record if isinstance(record, dict) else None)

    @property
    def level(self) -> str:
        """The record's level (``INFO``, ``ERROR``, …); empty for a raw line."""
        return str(self.record.get("level", "")) if self.record is not None else ""

    @property
    def msg(self) -> str:
        """The record's message, or the raw line itself."""
        return str(self.record.get("msg", "")) if self.record is not None else self.text

    @property
    def logger(self) -> str:
        """The record's logger name; empty for a raw line."""
        return str(self.record.get("logger", "")) if self.record is not None else ""


@dataclass(frozen=True)
class Allow:
    """An expected noisy line: ``pattern`` (a regex) is searched in the message, or in the raw line.

    ``logger`` narrows it to one logger (exact name). Each entry should name the test behaviour that
    provokes it, e.g. ``Allow(r"handshake timed out", logger="devp2p.server")`` for a hostile-peer test.
    """

    pattern: str
    logger: str | None = None

    def matches(self, line: LogLine) -> bool:
        """Whether ``line`` is the expected one."""
        if self.logger is not None and line.logger != self.logger:
            return False
        return re.search(self.pattern, line.msg) is not None or re.search(self.pattern, line.text) is not None


def is_noise(line: LogLine) -> bool:
    """A record at WARNING or above, or a non-empty raw (non-JSON) line."""
    if line.record is None:
        return bool(line.text.strip())
    return line.level in NOISY_LEVELS


class LogCapture:
    """The lines one process wrote, appended by the harness's reader thread and readable from any thread.

    ``max_lines`` bounds what is kept (the oldest lines go first; a long ``make run`` needs no more than a
    tail). Waiting for a line (:meth:`wait_for`) is event-driven: a condition variable wakes the waiter as
    each line arrives, and a process exit ends the wait.
    """

    def __init__(self, name: str, max_lines: int | None = None) -> None:
        self.name = name
        self._lines: deque[LogLine] = deque(maxlen=max_lines)
        self._changed = threading.Condition()
        self._closed = False
        self._returncode: int | None = None

    def add(self, text: str) -> LogLine:
        """Record one line (the reader thread calls this)."""
        line = LogLine.parse(text)
        with self._changed:
            self._lines.append(line)
            self._changed.notify_all()
        return line

    def close(self, returncode: int | None) -> None:
        """The stream ended: the process exited with ``returncode`` (wakes every waiter)."""
        with self._changed:
            self._closed = True
            self._returncode = returncode
            self._changed.notify_all()

    @property
    def lines(self) -> list[LogLine]:
        """Every kept line, oldest first."""
        with self._changed:
            return list(self._lines)

    def records(self) -> list[dict[str, Any]]:
        """The JSON records among the lines."""
        return [line.record for line in self.lines if line.record is not None]

    def messages(self) -> list[str]:
        """``msg`` of every JSON record."""
        return [line.msg for line in self.lines if line.record is not None]

    def text(self) -> str:
        """Every kept line, joined."""
        return "\n".join(line.text for line in self.lines)

    def tail(self, count: int = 40) -> str:
        """The last ``count`` lines, for failure messages."""
        return "\n".join(line.text for line in self.lines[-count:])

    def wait_for(self, predicate: Callable[[LogLine], bool], timeout: float) -> LogLine:
        """The first line (already seen or still to come) that satisfies ``predicate``.

        Raises :class:`ServiceExited` when the process ends without writing one, ``TimeoutError`` after
        ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        with self._changed:
            while True:
                lines = list(self._lines)
                for line in lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(lines)
                if self._closed:
                    raise ServiceExited(self.name, self._returncode, self.tail())
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.name}: no such log line within {timeout} s:\n{self.tail()}")
                self._changed.wait(remaining)

    def unexpected(self, allow: Iterable[Allow] = ()) -> list[LogLine]:
        """Noisy lines (see :func:`is_noise`) that no ``allow`` entry matches."""
        allowed = list(allow)
        return [line for line in self.lines if is_noise(line) and not any(a.matches(line) for a in allowed)]
