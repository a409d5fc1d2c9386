"""Several services as one mesh: planned in dependency order, started together, stopped in reverse.

:func:`plan` turns catalog names into :class:`~meshharness.process.ServiceSpec` objects: ports (the fixed
``make run`` layout, or free loopback ports for tests and benchmarks), each dependency's address (every
replica's, comma-separated; optionally routed through a fault proxy), files under a state directory,
replicas, and per-service overrides. :class:`Mesh` spawns every process first (they
connect to each other lazily, so they may start in any order), then waits for each to report SERVING, and
stops them in reverse dependency order so each flushes into services that are still up (the edge peer into
ingest, ingest into the archive). :func:`start_mesh` plans again on fresh ports when one was taken.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from meshharness.catalog import CATALOG, ENV_PREFIXES, ServiceKind, kind
from meshharness.logs import Allow, LogLine
from meshharness.ports import PortTaken, free_ports
from meshharness.process import ServiceProcess, ServiceSpec, spawn

__all__ = ["FixedPorts", "FreePorts", "Mesh", "Route", "plan", "start_mesh"]


@dataclass(frozen=True)
class FixedPorts:
    """The ``make run`` layout: gRPC on ``grpc_base + offset``, metrics on ``metrics_base + offset``.

    Listeners keep the services' default host; ``extra`` overrides a kind's fixed extra port by variable
    (``{"EDGE_LISTEN_PORT": 30304}``).
    """

    grpc_base: int = 50050
    metrics_base: int = 9150
    extra: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FreePorts:
    """Tests and benchmarks: every port a free one (:func:`~meshharness.ports.free_ports`), on 127.0.0.1."""

    metrics: bool = True
    """Give each service a metrics port (False: ``-1``, the endpoint disabled)."""


def _ordered(names: Iterable[str]) -> list[ServiceKind]:
    """``names`` with every service after the ones it needs (those not in the mesh are the caller's)."""
    wanted = [kind(n) for n in dict.fromkeys(names)]
    present = {k.name for k in wanted}
    done: list[ServiceKind] = []

    def visit(k: ServiceKind, path: tuple[str, ...]) -> None:
        if k in done:
            return
        if k.name in path:
            raise ValueError(f"dependency cycle: {' -> '.join((*path, k.name))}")
        for need in k.needs:
            if need in present:
                visit(CATALOG[need], (*path, k.name))
        done.append(k)

    for k in wanted:
        visit(k, ())
    return done


Route = Callable[[str, str, str], str]
"""``route(client instance, dependency kind, address)`` → the address the client is given instead."""


def plan(
    services: Sequence[str],
    *,
    ports: FixedPorts | FreePorts,
    state_dir: Path | None = None,
    replicas: Mapping[str, int] | None = None,
    env: Mapping[str, Mapping[str, str]] | None = None,
    profiles: Mapping[str, Path] | None = None,
    inherit_env: bool = False,
    shared_env: Mapping[str, str] | None = None,
    route: Route | None = None,
) -> list[ServiceSpec]:
    """Specs for ``services`` (catalog names) in dependency order.

    ``state_dir`` holds each kind's state files (a replica's own are prefixed with its instance name, the
    kind's ``shared_state`` is one file for all; None: the caller sets them in ``env``). ``replicas`` runs
    several instances of a kind, named ``<kind>-<i>`` (replica 0 keeps the kind's name); a client is given
    every replica's address, comma-separated. ``route`` may replace each address a client is given (one
    call per client instance, dependency and replica: a fault proxy in front of it). ``env`` maps a kind to
    extra variables (they win over planned ones); ``profiles`` maps a kind to a cProfile output file.
    ``inherit_env`` passes the parent's environment through unchanged (``make run``). ``shared_env`` goes to
    every service (the mesh-wide ``MAILMESH_*`` settings: TLS files, ``MAILMESH_AUTH`` and its tokens;
    docs/security.md); ``env`` wins over it.
    """
    kinds = _ordered(services)
    counts = {k.name: (replicas or {}).get(k.name, 1) for k in kinds}
    if isinstance(ports, FixedPorts) and any(n > 1 for n in counts.values()):
        raise ValueError("replicas need free ports: the fixed layout has one port per kind")
    per_instance = 2 + max((len(k.extra_ports) for k in kinds), default=0)
    pool = iter(free_ports(per_instance * sum(counts.values()))) if isinstance(ports, FreePorts) else None
    addresses: dict[str, list[str]] = {}
    planned: list[tuple[ServiceKind, str, dict[str, str]]] = []

    def address_of(instance: str, dependency: str) -> str:
        found = addresses[dependency]
        return ",".join(route(instance, dependency, a) if route is not None else a for a in found)

    for k in kinds:
        for index in range(counts[k.name]):
            instance = k.name if index == 0 else f"{k.name}-{index}"
            vars_: dict[str, str] = dict(shared_env or {})
            if pool is not None:
                assert isinstance(ports, FreePorts)
                grpc_port, metrics_port = next(pool), next(pool) if ports.metrics else -1
                vars_[f"{k.prefix}_GRPC_HOST"] = "127.0.0.1"
                for var in k.extra_ports:
                    vars_[var] = str(next(pool))
                    vars_[var.removesuffix("_PORT") + "_HOST"] = "127.0.0.1"
            else:
                assert isinstance(ports, FixedPorts)
                grpc_port, metrics_port = ports.grpc_base + k.offset, ports.metrics_base + k.offset
                vars_.update({var: str(ports.extra.get(var, port)) for var, port in k.extra_ports.items()})
            vars_[f"{k.prefix}_GRPC_PORT"] = str(grpc_port)
            vars_[f"{k.prefix}_METRICS_PORT"] = str(metrics_port)
            for need in k.needs:
                if need in addresses:
                    vars_[k.addr_var(CATALOG[need])] = address_of(instance, need)
            if state_dir is not None:
                for var, filename in k.state_files.items():
                    own = index > 0 and var not in k.shared_state
                    vars_[var] = str(state_dir / (f"{instance}.{filename}" if own else filename))
            if k.instance_var and counts[k.name] > 1:
                vars_[k.instance_var] = instance
            vars_.update((env or {}).get(k.name, {}))
            addresses.setdefault(k.name, []).append(f"127.0.0.1:{vars_[f'{k.prefix}_GRPC_PORT']}")
            planned.append((k, instance, vars_))
    specs: list[ServiceSpec] = []
    for k, instance, vars_ in planned:
        # Observed services may come later in start order: their addresses are known only now.
        for seen in k.observes:
            if seen in addresses and k.addr_var(CATALOG[seen]) not in vars_:  # the caller's env still wins
                vars_[k.addr_var(CATALOG[seen])] = address_of(instance, seen)
        specs.append(
            ServiceSpec(
                name=instance,
                module=k.module,
                env=vars_,
                grpc_port=int(vars_[f"{k.prefix}_GRPC_PORT"]),
                metrics_port=int(vars_[f"{k.prefix}_METRICS_PORT"]),
                health=k.health,
                profile=(profiles or {}).get(k.name),
                inherit_env=inherit_env,
            )
        )
    return specs


class Mesh:
    """Processes started from specs in order; see the module docstring."""

    def __init__(
        self,
        specs: Sequence[ServiceSpec],
        *,
        echo: Callable[[str, str], None] | None = None,
        log_dir: Path | None = None,
        own_session: bool = False,
        max_lines: int | None = None,
    ) -> None:
        self.specs = list(specs)
        self.services: list[ServiceProcess] = []
        self._echo = echo
        self._log_dir = log_dir
        self._own_session = own_session
        self._max_lines = max_lines

    def spawn(self) -> None:
        """Start every process (without waiting for any)."""
        for spec in self.specs:
            log_file = self._log_dir / f"{spec.name}.log" if self._log_dir is not None else None
            self.services.append(
                spawn(
                    spec,
                    echo=self._echo,
                    log_file=log_file,
                    strip_env_prefixes=ENV_PREFIXES,
                    own_session=self._own_session,
                    max_lines=self._max_lines,
                )
            )

    def start(self, timeout: float = 60.0, *, cancel: threading.Event | None = None) -> None:
        """Spawn every process, then wait (one deadline for all) until each is SERVING.

        On failure (an exit, a taken port, the deadline) every process is stopped before re-raising.
        """
        try:
            self.spawn()
            deadline = time.monotonic() + timeout
            for service in self.services:
                service.wait_serving(max(deadline - time.monotonic(), 0.001), cancel=cancel)
        except BaseException:
            self.stop(5)
            raise

    async def start_async(self, timeout: float = 60.0) -> None:
        """:meth:`start` for asyncio callers."""
        await asyncio.to_thread(self.start, timeout)

    def get(self, name: str) -> ServiceProcess:
        """The instance called ``name``."""
        for service in self.services:
            if service.name == name:
                return service
        raise KeyError(f"no service {name!r} in this mesh: {[s.name for s in self.services]}")

    def of_kind(self, name: str) -> list[ServiceProcess]:
        """Every replica of catalog kind ``name``, in order."""
        module = kind(name).module
        return [s for s in self.services if s.spec.module == module]

    def stop(
        self, grace: float = 15.0, *, on_stopped: Callable[[ServiceProcess], None] | None = None
    ) -> dict[str, int]:
        """Stop each (SIGTERM, SIGKILL after ``grace``) in reverse order; exit statuses by name."""
        codes: dict[str, int] = {}
        for service in reversed(self.services):
            codes[service.name] = service.stop(grace)
            if on_stopped is not None:
                on_stopped(service)
        return codes

    async def stop_async(self, grace: float = 15.0) -> dict[str, int]:
        """:meth:`stop` for asyncio callers."""
        return await asyncio.to_thread(self.stop, grace)

    def unexpected(self, allow: Iterable[Allow] = ()) -> dict[str, list[LogLine]]:
        """Noisy lines no ``allow`` entry matches, by instance (see ``LogCapture.unexpected``)."""
        allowed = list(allow)
        found = {s.name: s.logs.unexpected(allowed) for s in self.services}
        return {name: lines for name, lines in found.items() if lines}


def start_mesh(
    make_specs: Callable[[], Sequence[ServiceSpec]],
    *,
    timeout: float = 60.0,
    attempts: int = 3,
    log_dir: Path | None = None,
) -> Mesh:
    """Start a mesh from ``make_specs()``; when a port was taken meanwhile, plan again (fresh ports)."""
    for attempt in range(1, attempts + 1):
        mesh = Mesh(make_specs(), log_dir=log_dir)
        try:
            mesh.start(timeout)
        except PortTaken:
            if attempt == attempts:
                raise
            continue
        return mesh
    raise AssertionError("unreachable")
