"""Free loopback ports for service processes.

Ports are drawn at random from below Linux's ephemeral range (``net.ipv4.ip_local_port_range`` starts at
32768): a port the kernel hands out as the *source* port of some outgoing connection (the mesh's own gRPC
channels make many) can then never take a port between our check and the service's bind. The check is a
bind of each port, released before the service starts, so a race with another process on the machine is
still possible; the harness detects it (the service exits with "address already in use") and starts again
on fresh ports (:class:`PortTaken`).
"""

from __future__ import annotations

import random
import socket

__all__ = ["PORT_RANGE", "PortTaken", "free_base", "free_ports"]

PORT_RANGE = (20000, 32000)
"""Inclusive range the ports are drawn from (below the ephemeral range)."""


class PortTaken(Exception):
    """A service could not bind a port the harness gave it (taken since the check): start again."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name}: a port it was given was taken before it could bind it")
        self.name = name


def free_ports(count: int, *, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports in :data:`PORT_RANGE` that could be bound on ``host`` a moment ago."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            sock = socket.socket()
            try:
                sock.bind((host, random.randint(*PORT_RANGE)))
            except OSError:
                sock.close()
                continue
            held.append(sock)  # held until all are chosen: no port is picked twice
        return [int(sock.getsockname()[1]) for sock in held]
    finally:
        for sock in held:
            sock.close()


def free_base(count: int, *, host: str = "127.0.0.1") -> int:
    """A base port such that ``base + 1`` … ``base + count`` (in :data:`PORT_RANGE`) were free just now.

    For runners that take a base and add offsets (``tools/run_mesh.py --grpc-base-port``).
    """
    low, high = PORT_RANGE
    while True:
        base = random.randint(low - 1, high - count)
        held: list[socket.socket] = []
        try:
            for offset in range(1, count + 1):
                sock = socket.socket()
                held.append(sock)
                sock.bind((host, base + offset))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return base
