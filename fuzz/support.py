"""What the harnesses share: the libFuzzer entry point, a byte transport that never blocks, a coroutine
driver, the secrets of one RLPx session.

Import this module *inside* a harness's ``atheris.instrument_imports`` block (it imports ``devp2p``, which
must be instrumented when it is first imported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar, cast

import atheris

from devp2p.abc import MacState, TransportAPI
from devp2p.errors import ConnectionLost
from devp2p.handshake import Secrets, derive_secrets
from wakucodec import secp
from wakucodec.keccak import KeccakState

__all__ = ["BytesTransport", "fuzz_main", "run_sync", "session_pair", "static_key"]

T = TypeVar("T")


def fuzz_main(test_one_input: Callable[[bytes], None]) -> None:
    """Hand ``test_one_input`` to libFuzzer with this process's flags and corpus directories; never returns.

    An exception escaping ``test_one_input`` is a finding: atheris prints it, writes the input to
    ``<artifact_prefix>crash-<sha1>`` and exits non-zero.
    """
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine whose every ``await`` completes at once (reads from a :class:`BytesTransport`).

    Cheaper than an event loop by two orders of magnitude; raises RuntimeError if the coroutine suspends.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coro.close()
    raise RuntimeError("the coroutine suspended: a harness transport must never block")


class BytesTransport(TransportAPI):
    """A transport that reads from fixed bytes and records writes; reading past the end is ConnectionLost.

    The real transports block until the remote sends more; here the input is everything the remote will
    ever send, so running out is the remote closing the connection (never a hang).
    """

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._closing = False
        #: Everything written, in order.
        self.sent = bytearray()

    async def read_exactly(self, n: int) -> bytes:
        """Return the next ``n`` bytes; ConnectionLost (after consuming the rest) when fewer remain."""
        if n < 0:
            raise ValueError(f"cannot read {n} bytes")
        start, stop = self._pos, self._pos + n
        if stop > len(self._data):
            self._pos = len(self._data)
            raise ConnectionLost(f"EOF after {len(self._data) - start} of {n} bytes")
        self._pos = stop
        return bytes(self._data[start:stop])

    def write(self, data: bytes) -> None:
        """Record ``data``."""
        if self._closing:
            raise ConnectionLost("transport is closed")
        self.sent += data

    async def drain(self) -> None:
        """Nothing to wait for."""

    def close(self) -> None:
        """Mark the transport closed."""
        self._closing = True

    async def wait_closed(self) -> None:
        """Nothing to wait for."""

    def abort(self) -> None:
        """Mark the transport closed."""
        self._closing = True

    @property
    def remote_address(self) -> tuple[str, int] | None:
        """No address: the remote is the fuzzer."""
        return None

    @property
    def is_closing(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` was called."""
        return self._closing

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._data) - self._pos


# The EIP-8 test vectors' session: A (static key, ephemeral key, nonce) dials B (protocol-notes §7.4).
_A = (
    "49a7b37aa6f6645917e7b807e9d1c00d4fa71f18343b0d4122a4d2df64dd6fee",
    "869d6ecf5211f1cc60418a13b9d870b22959d0c16f02bec714c960dd2298a32d",
    "7e968bba13b6c50e2c4cd7f241cc0d64d1ac25c7f5952df231ac6a2bda8ee5d6",
)
_B = (
    "b71c71a67e1177ad4e901695e1b4b9ee17ae16c6668d313eac2f96dbcda3f291",
    "e238eb8e04fee6511ab04c6dd3c89ce097b11f25d584863ac2b6d5b35b1847e4",
    "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd",
)
_PAIR: tuple[Secrets, Secrets] | None = None


def _secrets(local: tuple[str, str, str], remote: tuple[str, str, str], *, initiator: bool) -> Secrets:
    key = {
        name: bytes.fromhex(value)
        for name, value in zip(("static", "ephemeral", "nonce"), local, strict=True)
    }
    other = {
        name: bytes.fromhex(value)
        for name, value in zip(("static", "ephemeral", "nonce"), remote, strict=True)
    }
    return derive_secrets(
        initiator=initiator,
        local_ephemeral_key=key["ephemeral"],
        remote_ephemeral_pubkey=secp.public_key(other["ephemeral"]),
        initiator_nonce=(key if initiator else other)["nonce"],
        recipient_nonce=(other if initiator else key)["nonce"],
        auth_packet=b"auth",  # the packets only seed the MACs; both sides agree on them
        ack_packet=b"ack",
        remote_pubkey=secp.public_key(other["static"]),
    )


def _copy(mac: MacState) -> MacState:
    return cast(KeccakState, mac).copy()  # derive_secrets builds them with new_keccak256


def session_pair() -> tuple[Secrets, Secrets]:
    """Fresh secrets of both ends of one session, ``(dialler A, listener B)``: B's ingress reads A's egress.

    Derived once per process (two ECDHs); each call copies the running MAC states, so every run starts
    from the same session state and a finding replays.
    """
    global _PAIR
    if _PAIR is None:
        _PAIR = (_secrets(_A, _B, initiator=True), _secrets(_B, _A, initiator=False))
    a, b = (
        Secrets(s.remote_pubkey, s.aes_secret, s.mac_secret, _copy(s.egress_mac), _copy(s.ingress_mac))
        for s in _PAIR
    )
    return a, b


def static_key(side: str) -> bytes:
    """The static private key of vector node ``"A"`` or ``"B"``."""
    return bytes.fromhex((_A if side == "A" else _B)[0])
