"""Driving the real Go peers from the interop tests: go-ethereum v1.9.20 Whisper (``tools/interop/gethpeer``),
status-go v0.50.0 Waku (``tools/interop/statuspeer``, waku/0) and status-go v0.60.0 Waku
(``tools/interop/statuspeer060``, waku/1); all speak the same stdin/JSON-lines protocol.

The binaries are built once per session by ``make -f mk/interop.mk interop-build`` (cached: a no-op when up to
date). If the build cannot work on this machine the tests *fail* with make's output — they never skip.

:class:`GoPeer` runs one peer process: commands go to its stdin one per line, and every JSON line it
prints is collected by a reader thread. Waiting is event-driven and bounded: :meth:`GethPeer.wait_event`
blocks on a condition variable until a matching line arrives or the deadline passes; a command's result is
its ``done`` line (an ``error`` line, or the process exiting, fails the test with the tail of the peer's log).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc

from mailmesh.edgepeer.v1 import edgepeer_pb2, edgepeer_pb2_grpc
from mailmeshcli.compose import Encryption, compose_envelope
from wakucodec.envelope import Envelope, decode_envelope

ROOT = Path(__file__).resolve().parents[2]
GETHPEER = ROOT / "var" / "interop" / "gethpeer"
STATUSPEER = ROOT / "var" / "interop" / "statuspeer"
STATUSPEER060 = ROOT / "var" / "interop" / "statuspeer060"
PEER_BINARIES = (GETHPEER, STATUSPEER, STATUSPEER060)
BUILD_TIMEOUT_S = 900.0
#: The mailserver password our edge peer accepts (tests/interop/conftest.py); the Go peers encrypt their
#: requests with its PBKDF2 key.
MS_PASSWORD = "mailmesh-interop-ms"
#: The channel password of the posted messages (the Go peers' filters and our composer share it).
PASSWORD = "mailmesh-interop"
#: geth's and status-go's DefaultMinimumPoW: what they advertise, require, and seal to by default.
DEFAULT_POW = 0.2
#: One topic per scenario, pairwise disjoint as blooms (test_interop_geth checks it), so that history queries
#: by bloom cannot pick up another scenario's envelopes from the shared archive.
TOPICS = {
    "geth-history": "0x67e71001",
    "geth-both-ways": "0x3a5c9e02",
    "geth-mailserver": "0xc4d2b803",
    "geth-marker": "0x1f8e6a04",
    "status-history": "0x57a70005",
    "status-both-ways": "0x8b21d406",
    "status-mailserver": "0x2c6f3e07",
    "status060-history": "0x60a1b209",
    "status060-both-ways": "0x6b3c4d0a",
    "status060-subscribed": "0x7e55910b",
    "status060-bloom": "0x91d2e30c",
    "status060-mailserver": "0xa4f6170d",
}

T = TypeVar("T")
EVENT_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

Event = dict[str, Any]


def topic(text: str) -> bytes:
    """``0x…`` → 4 bytes."""
    return bytes.fromhex(text.removeprefix("0x"))


def channel_posts(text: str, topic_text: str, count: int, signer: bytes) -> list[Envelope]:
    """``count`` envelopes as our side posts on a shared channel: payload ``"<text> #<i>"``, encrypted with
    :data:`PASSWORD`, signed by ``signer``, sealed to PoW 0.25 (above both peers' minimum), TTL 60 s."""
    encryption = Encryption.from_password(PASSWORD)
    return [
        compose_envelope(
            f"{text} #{i}".encode(),
            topic=topic(topic_text),
            ttl=60,
            pow_target=0.25,
            encryption=encryption,
            signing_key=signer,
        )
        for i in range(count)
    ]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on a private event loop (the fixtures and peers are synchronous)."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def build_interop_peers() -> None:
    """Build (or confirm up to date) every peer binary; AssertionError with make's output if that fails."""
    try:
        proc = subprocess.run(
            ["make", "--no-print-directory", "-f", "mk/interop.mk", "interop-build"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise AssertionError(f"cannot build the interop peers: {err}") from err
    if proc.returncode != 0 or not all(binary.is_file() for binary in PEER_BINARIES):
        raise AssertionError(
            "building the interop peers failed (make -f mk/interop.mk interop-build, "
            f"exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )


class GoPeer:
    """One running peer process (gethpeer, statuspeer or statuspeer060) and everything it printed."""

    def __init__(self, binary: Path, args: Sequence[str], log: Path) -> None:
        self.log = log
        self._stderr = log.open("wb")
        self.proc = subprocess.Popen(
            [str(binary), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, "GOMAXPROCS": "1"},
        )
        self.events: list[Event] = []
        self._cond = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, name=f"{binary.name}-{self.proc.pid}", daemon=True)
        self._reader.start()
        #: The ``started`` line: enode, id, pubkey, versions, settings.
        self.started = self.wait_event(lambda e: e["event"] == "started", timeout=EVENT_TIMEOUT_S)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                event = {"event": "unparsed", "line": raw.decode(errors="replace")}
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def enode(self) -> str:
        return str(self.started["enode"])

    @property
    def pubkey(self) -> bytes:
        return bytes.fromhex(str(self.started["pubkey"]))

    def tail(self, lines: int = 40) -> str:
        self._stderr.flush()
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        with self._cond:
            last = [json.dumps(e) for e in self.events[-15:]]
        return "\n".join([f"--- {self.log.name} (stderr):", *text, "--- last events:", *last])

    def wait_event(
        self, match: Callable[[Event], bool], timeout: float = EVENT_TIMEOUT_S, start: int = 0
    ) -> Event:
        """The first event (from index ``start``) that ``match``es; waits for it, bounded by ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            index = start
            while True:
                while index < len(self.events):
                    event = self.events[index]
                    index += 1
                    if match(event):
                        return event
                    if event["event"] == "error":
                        raise AssertionError(f"peer reported an error: {event}\n{self.tail()}")
                if self._closed:
                    raise AssertionError(f"peer exited ({self.proc.poll()}) before the event\n{self.tail()}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching peer event within {timeout} s\n{self.tail()}")
                self._cond.wait(remaining)

    def command(self, line: str, timeout: float = EVENT_TIMEOUT_S) -> Event:
        """Send one command; return its ``done`` line (AssertionError on ``error`` or timeout)."""
        with self._cond:
            start = len(self.events)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        return self.wait_event(lambda e: e["event"] == "done" and e.get("cmd") == line, timeout, start)

    def select(self, event: str, **fields: Any) -> list[Event]:
        """Every event named ``event`` whose fields equal ``fields`` so far."""
        with self._cond:
            return [
                e
                for e in self.events
                if e["event"] == event and all(e.get(k) == v for k, v in fields.items())
            ]

    def stop(self) -> int:
        """Close stdin (the peer exits 0 at EOF); SIGKILL if it does not exit in time."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=STOP_TIMEOUT_S)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        self._stderr.close()
        return int(self.proc.returncode)


@contextmanager
def go_peer(binary: Path, args: Sequence[str], log: Path) -> Iterator[GoPeer]:
    """A running peer; always stopped afterwards, and it must have exited 0."""
    peer = GoPeer(binary, args, log)
    try:
        yield peer
    finally:
        code = peer.stop()
    assert code == 0, f"{binary.name} exited {code}\n{peer.tail()}"


def posted_envelopes(peer: GoPeer) -> list[Envelope]:
    """What the peer posted, decoded from the raw RLP it printed (hash checked against its own)."""
    out = []
    for event in peer.select("posted"):
        env = decode_envelope(bytes.fromhex(event["raw"]))
        assert env.hash.hex() == event["hash"]
        out.append(env)
    return out


def edge_view(channel: grpc.Channel, peer: GoPeer, timeout: float = EVENT_TIMEOUT_S) -> edgepeer_pb2.Peer:
    """The edge peer's ListPeers entry for ``peer`` once its session is up on our side (bounded poll: our
    handshake may finish a moment after the remote's)."""
    stub = edgepeer_pb2_grpc.EdgePeerServiceStub(channel)
    deadline = time.monotonic() + timeout
    while True:
        for entry in stub.ListPeers(edgepeer_pb2.ListPeersRequest(), timeout=10).peers:
            if peer.pubkey.hex() in entry.enode:
                return entry
        assert time.monotonic() < deadline, f"{peer.log.name}: not in ListPeers within {timeout} s"
        time.sleep(0.05)  # polling another process's state (bounded above), not synchronisation by sleeping
