"""Every instance behind a DNS name: resolve a target to its current addresses, again and again.

A balanced caller gives gRPC one name (``dns:///history-query-headless.ns.svc:50054``) and lets
``round_robin`` spread its calls (:mod:`meshcore.balancing`). Two callers need each instance by itself
instead: the subscription service follows every history-query instance's ``WatchServed`` (each serves its
own queries), and the health service checks every replica's ``grpc.health.v1``. For them a ``dns:`` target
names a *set* of instances: :class:`Instances` resolves it with ``getaddrinfo`` (every A and AAAA record; the
pod's resolv.conf search list completes a short name, as it does for gRPC's own c-ares resolver) and again
every :data:`DEFAULT_INTERVAL_S`, and tells its listeners when the set changes, so a replica that started is
followed and one that is gone is dropped (docs/reliability.md "Every instance behind a name").

Only ``dns:`` URIs are expanded. A ``host:port`` setting names one instance, even when its name resolves to
several addresses (``localhost`` is 127.0.0.1 and ::1: one process, perhaps listening on only one of them;
a StatefulSet pod's own DNS name is one pod), and gRPC resolves it when it connects, as before.

A failed resolution (``socket.gaierror``: no records, a DNS outage) keeps the last set: a DNS blip must not
silence every health check or follower, and when every replica of a headless Service is gone its name has
no records while the old addresses still show, correctly, as unreachable.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence

from meshcore.parsers import HostPort, is_grpc_uri, parse_host_port, parse_list

__all__ = [
    "DEFAULT_INTERVAL_S",
    "Instances",
    "Listener",
    "Resolve",
    "dns_name",
    "is_dns_target",
    "parse_instance_targets",
    "resolve_addresses",
]

_log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 30.0
"""Seconds between resolutions: a new replica is found within this, without loading the cluster DNS."""

Resolve = Callable[[str, int], Awaitable[Sequence[str]]]
"""(host, port) → the instances' addresses ``ip:port`` / ``[v6]:port``; raises ``OSError`` when it cannot."""


def is_dns_target(target: str) -> bool:
    """Whether ``target`` is a ``dns:`` URI, which names every instance it resolves to."""
    return target.strip().startswith("dns:") and is_grpc_uri(target)


def dns_name(target: str) -> HostPort:
    """The host and port of ``dns:///name:port`` (``dns:name:port`` too); ``ValueError`` if it has none.

    An authority (``dns://8.8.8.8/name:port``, a DNS server of its own) is refused: getaddrinfo asks the
    system's resolver only, and the channels would ask another server than the discovery.
    """
    rest = target.strip()[len("dns:") :]
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        if authority:
            raise ValueError("a dns: target with a DNS server (dns://server/…) is not supported")
    return parse_host_port()(rest)


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ipaddress.ip_address(host).version == 6 else f"{host}:{port}"


async def resolve_addresses(host: str, port: int) -> Sequence[str]:
    """Every address ``host`` resolves to now (all A and AAAA records), as sorted ``ip:port``."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({_address(str(info[4][0]).split("%", 1)[0], port) for info in infos})


def parse_instance_targets(raw: str) -> tuple[str, ...]:
    """Comma-separated instances ``host:port`` or ``dns:///name:port`` (each of its addresses), each once."""
    items = parse_list(_instance_target)(raw)
    if len(set(items)) != len(items):
        raise ValueError("a target is listed twice")
    return items


def _instance_target(raw: str) -> str:
    text = raw.strip()
    if is_dns_target(text):
        dns_name(text)  # refuses what the discovery cannot resolve
        return text
    if is_grpc_uri(text):
        raise ValueError("must be host:port or dns:///name:port")
    return str(parse_host_port()(text))


Listener = Callable[[Mapping[str, tuple[str, ...]]], Awaitable[None]]
"""Told every target's instances after a change (awaited in turn: it may open and close channels)."""


class Instances:
    """The current instances of some targets: a ``dns:`` target's addresses, any other target itself."""

    def __init__(
        self,
        targets: Sequence[str],
        *,
        resolve: Resolve = resolve_addresses,
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be > 0")
        self.interval_s = interval_s
        """Seconds between two resolutions after :meth:`start`."""
        self._resolve = resolve
        self._names = {t: dns_name(t) for t in targets if is_dns_target(t)}
        self._current: dict[str, tuple[str, ...]] = {
            t: () if t in self._names else (t,) for t in dict.fromkeys(targets)
        }
        self.listeners: list[Listener] = []
        """Called with :attr:`current` after each change (not for a resolution that changed nothing)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def current(self) -> Mapping[str, tuple[str, ...]]:
        """Target → its instances now (a ``dns:`` target has none until its first resolution)."""
        return dict(self._current)

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every instance of every target, each once, in target order."""
        return tuple(dict.fromkeys(a for addresses in self._current.values() for a in addresses))

    @property
    def dynamic(self) -> bool:
        """Whether any target is resolved (otherwise nothing ever changes)."""
        return bool(self._names)

    async def refresh(self) -> bool:
        """Resolve every ``dns:`` target once; True if some set changed (the listeners were told)."""
        results = await asyncio.gather(
            *(self._resolve(name.host, name.port) for name in self._names.values()), return_exceptions=True
        )
        changed = False
        for (target, name), result in zip(self._names.items(), results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, OSError):
                    raise result
                _log.info(
                    "resolving %s failed (%s); keeping its %d instances",
                    name.host,
                    result,
                    len(self._current[target]),
                )
                continue
            addresses = tuple(sorted(set(result)))
            if not addresses:
                continue  # no records is no news (module docstring)
            if addresses != self._current[target]:
                self._current[target] = addresses
                changed = True
        if changed:
            current = self.current
            for listener in list(self.listeners):
                await listener(current)
        return changed

    async def start(self) -> None:
        """Resolve once, then keep resolving in a background task (nothing to do without ``dns:`` targets)."""
        await self.refresh()
        if self.dynamic and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._again(), name="meshcore-discovery")

    async def stop(self) -> None:
        """End the background resolution."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _again(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.refresh()
            except Exception:
                _log.exception("instance discovery failed; trying again in %.0f s", self.interval_s)
