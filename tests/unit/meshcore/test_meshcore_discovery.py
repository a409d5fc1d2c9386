"""Instance discovery: which targets are expanded, what getaddrinfo gives, re-resolution driven by hand
(an injected resolver: no DNS, no sleeps), failures keep the last set, listeners told of changes only."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence

import pytest

from meshcore.discovery import (
    DEFAULT_INTERVAL_S,
    Instances,
    dns_name,
    is_dns_target,
    parse_instance_targets,
    resolve_addresses,
)
from meshcore.parsers import HostPort


class Zone:
    """A resolver the test edits: name → addresses; a name mapped to an exception raises it."""

    def __init__(self, records: dict[str, Sequence[str] | OSError]) -> None:
        self.records = records
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append((host, port))
        found = self.records[host]
        if isinstance(found, OSError):
            raise found
        return [f"{a}:{port}" for a in found]


HISTORY = "dns:///history-headless.mesh.svc:50054"


@pytest.mark.parametrize(
    ("target", "expanded"),
    [
        (HISTORY, True),
        ("dns:history:50054", True),
        ("history:50054", False),
        ("localhost:50054", False),  # one process on two addresses, not two instances
        ("ipv4:10.0.0.1:1,10.0.0.2:1", False),
        ("dns:50054", False),  # host "dns", port 50054
    ],
)
def test_only_dns_uris_stand_for_every_address(target: str, expanded: bool) -> None:
    assert is_dns_target(target) is expanded


def test_the_name_and_port_of_a_dns_target() -> None:
    assert dns_name(HISTORY) == HostPort("history-headless.mesh.svc", 50054)
    assert dns_name("dns:[::1]:7") == HostPort("::1", 7)
    with pytest.raises(ValueError, match="DNS server"):
        dns_name("dns://10.0.0.10/history:50054")
    with pytest.raises(ValueError, match="host:port"):
        dns_name("dns:///history")


def test_instance_target_lists() -> None:
    assert parse_instance_targets(f" a:1, {HISTORY} ,[::1]:2") == ("a:1", HISTORY, "[::1]:2")
    assert parse_instance_targets("") == ()
    for bad, why in [
        ("a:1,a:1", "listed twice"),
        ("unix:/run/h.sock", "dns:///name:port"),
        ("ipv4:10.0.0.1:1", "dns:///name:port"),
        ("dns:///h", "host:port"),
    ]:
        with pytest.raises(ValueError, match=why):
            parse_instance_targets(bad)


async def test_getaddrinfo_gives_every_record_once_sorted() -> None:
    # numeric hosts: no DNS query; IPv6 bracketed as a gRPC target writes it (failures: the Zone tests)
    addresses = await resolve_addresses("127.0.0.1", 50054)
    assert addresses == ["127.0.0.1:50054"]
    v6 = await resolve_addresses("::1", 7)
    assert v6 == ["[::1]:7"]


async def test_a_target_that_is_not_resolved_is_its_own_instance() -> None:
    zone = Zone({})
    instances = Instances(["a:1", "ipv4:10.0.0.1:1"], resolve=zone)
    assert instances.current == {"a:1": ("a:1",), "ipv4:10.0.0.1:1": ("ipv4:10.0.0.1:1",)}
    assert not instances.dynamic and instances.interval_s == DEFAULT_INTERVAL_S
    assert await instances.refresh() is False and zone.asked == []


async def test_refresh_follows_the_records_and_tells_the_listeners_of_changes_only() -> None:
    zone = Zone({"history-headless.mesh.svc": ["10.0.0.2", "10.0.0.1"]})
    instances = Instances([HISTORY, "b:2"], resolve=zone, interval_s=5)
    told: list[Mapping[str, tuple[str, ...]]] = []

    async def listener(current: Mapping[str, tuple[str, ...]]) -> None:
        told.append(current)

    instances.listeners.append(listener)
    assert instances.current[HISTORY] == ()  # nothing known before the first resolution
    assert await instances.refresh() is True
    assert instances.current == {HISTORY: ("10.0.0.1:50054", "10.0.0.2:50054"), "b:2": ("b:2",)}
    assert instances.addresses == ("10.0.0.1:50054", "10.0.0.2:50054", "b:2")
    assert await instances.refresh() is False and len(told) == 1  # the same set: no news
    zone.records["history-headless.mesh.svc"] = ["10.0.0.2", "10.0.0.3"]  # one replaced
    assert await instances.refresh() is True
    assert told[-1][HISTORY] == ("10.0.0.2:50054", "10.0.0.3:50054") and len(told) == 2
    assert zone.asked == [("history-headless.mesh.svc", 50054)] * 3


async def test_a_failed_or_empty_resolution_keeps_the_last_set() -> None:
    zone = Zone({"h": ["10.0.0.1"]})
    instances = Instances(["dns:///h:1"], resolve=zone)
    await instances.refresh()
    zone.records["h"] = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert await instances.refresh() is False
    zone.records["h"] = []
    assert await instances.refresh() is False
    assert instances.current == {"dns:///h:1": ("10.0.0.1:1",)}


async def test_an_unexpected_resolver_error_is_raised() -> None:
    async def broken(host: str, port: int) -> Sequence[str]:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        await Instances(["dns:///h:1"], resolve=broken).refresh()


async def test_start_resolves_at_once_and_stop_ends_the_background_task() -> None:
    zone = Zone({"h": ["10.0.0.1"]})
    instances = Instances(["dns:///h:1"], resolve=zone, interval_s=3600)
    await instances.start()
    assert instances.current["dns:///h:1"] == ("10.0.0.1:1",)
    tasks = {t.get_name() for t in asyncio.all_tasks()}
    assert "meshcore-discovery" in tasks
    await instances.stop()
    assert "meshcore-discovery" not in {t.get_name() for t in asyncio.all_tasks()}
    with pytest.raises(ValueError, match="interval"):
        Instances([], interval_s=0)
