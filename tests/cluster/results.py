"""The figures of a campaign as one JSON document: ``bench/results/cluster.json`` (``make test-cluster``),
``bench/results/spark-standalone.json`` (``make spark-cluster-test``).

Same shape as the ``make bench`` suites' files (``suite``, ``when``, ``machine``, ``results`` of
``{name, value, unit, detail}``), plus the load average at each figure: the machine is shared, and every
time figure is bounded by what else ran on its two cores.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Results"]


@dataclass
class Results:
    """Figures collected by the campaign's tests; :meth:`write` saves them."""

    suite: str
    """The document's ``suite``."""
    path: Path | None
    """Where to write (None: nowhere, e.g. a single test run by hand)."""
    began: float = field(default_factory=time.monotonic)
    results: list[dict[str, Any]] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, value: float, unit: str, **detail: Any) -> None:
        """One figure; ``detail`` says what bounds it (timeline, outcomes, load average)."""
        detail.setdefault("loadavg_1m", round(os.getloadavg()[0], 1))
        self.results.append({"name": name, "value": round(value, 3), "unit": unit, "detail": detail})
        print(f"\nFIGURE {name}: {value:.2f} {unit}", flush=True)

    def write(self) -> None:
        """Write the document (if there is a path and something to say)."""
        if self.path is None or not self.results:
            return
        doc = {
            "suite": self.suite,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.monotonic() - self.began, 1),
            "machine": {
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpus": os.cpu_count(),
            },
            "loadavg_after": [round(x, 1) for x in os.getloadavg()],
            **self.context,
            "results": self.results,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(doc, indent=2) + "\n")
