"""Run Mailmesh services as local processes: the one harness behind ``make run``, the benchmarks and the
e2e, interop and process tests.

- :mod:`meshharness.process` — one service: spawn with its env, wait for ``grpc.health.v1`` SERVING,
  capture its log, stop with SIGTERM then SIGKILL;
- :mod:`meshharness.mesh` — several, planned from :mod:`meshharness.catalog` in dependency order;
- :mod:`meshharness.ports` — free loopback ports; :mod:`meshharness.logs` — captured lines, noise checks;
- :mod:`meshharness.faultproxy` — a TCP proxy put in front of a service to inject network faults.

Services never import this package: it only starts them (``python -m services.<name>``).
"""

from meshharness.catalog import CATALOG, ENV_PREFIXES, ServiceKind, kind
from meshharness.faultproxy import Fault, FaultProxy, ProxyStats
from meshharness.logs import Allow, LogCapture, LogLine, ServiceExited, is_noise
from meshharness.mesh import FixedPorts, FreePorts, Mesh, Route, plan, start_mesh
from meshharness.ports import PortTaken, free_base, free_ports
from meshharness.process import (
    REPO_ROOT,
    ServiceProcess,
    ServiceSpec,
    clean_env,
    scrape_metrics,
    spawn,
    start,
    start_async,
    wait_serving,
)

__all__ = [
    "CATALOG",
    "ENV_PREFIXES",
    "REPO_ROOT",
    "Allow",
    "Fault",
    "FaultProxy",
    "FixedPorts",
    "FreePorts",
    "LogCapture",
    "LogLine",
    "Mesh",
    "PortTaken",
    "ProxyStats",
    "Route",
    "ServiceExited",
    "ServiceKind",
    "ServiceProcess",
    "ServiceSpec",
    "clean_env",
    "free_base",
    "free_ports",
    "is_noise",
    "kind",
    "plan",
    "scrape_metrics",
    "spawn",
    "start",
    "start_async",
    "start_mesh",
    "wait_serving",
]
