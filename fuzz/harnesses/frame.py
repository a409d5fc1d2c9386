"""RLPx frames as a session reads them (devp2p.frame.FrameCodec.read_frame; protocol-notes §5.4).

The input's length modulo 3 picks how it is read by a fresh listener of one session (the EIP-8 vectors'
secrets; one way per run keeps the harness fast):

- 0: as the raw bytes on the wire (the MACs cannot be forged: BadMAC or EOF, unless the input starts with
  the remote's real first frame);
- 1: as a frame whose header the remote authenticated for the size in the input's first 3 bytes, followed by
  the rest of the input as body: the size limit is checked before the body is read, then the body MAC;
- 2: as the data of a frame the remote sent: it comes back unchanged.

Contract: only BadMAC / FrameError / MessageTooLarge / ConnectionLost escape, never a hang; after a MAC or
size error the codec refuses further reads; an oversized frame is refused after reading its 32-byte preamble.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p import constants as c
    from devp2p.errors import BadMAC, ConnectionLost, FrameError, MessageTooLarge
    from devp2p.frame import FrameCodec
    from fuzz.support import BytesTransport, fuzz_main, run_sync, session_pair

_MAX_SIZE = c.MAX_PRE_HELLO_FRAME_SIZE  # the limit before Hello; after it the configured one


def _read(codec: FrameCodec, wire: bytes) -> tuple[bytes | Exception, BytesTransport]:
    transport = BytesTransport(wire)
    try:
        return run_sync(codec.read_frame(transport, max_size=_MAX_SIZE)), transport
    except (FrameError, MessageTooLarge, ConnectionLost) as err:
        return err, transport


def _refuses_more(codec: FrameCodec) -> None:
    try:
        run_sync(codec.read_frame(BytesTransport(bytes(64))))
    except FrameError:
        return
    raise AssertionError("the codec read again after a MAC or size error")


def test_one_input(data: bytes) -> None:
    """Read ``data`` as wire bytes, as an authenticated header plus body, or as frame data."""
    remote, local = session_pair()
    codec = FrameCodec.from_secrets(local)
    way = len(data) % 3
    if way == 0:
        outcome, transport = _read(codec, data)
        if isinstance(outcome, bytes):  # only the remote's own first frame verifies (the seeds have one)
            frame = FrameCodec.from_secrets(remote).encode(outcome)
            assert data.startswith(frame) and transport.remaining == len(data) - len(frame)
        elif isinstance(outcome, BadMAC):
            _refuses_more(codec)
    elif way == 1:
        size = int.from_bytes(data[:3], "big")
        outcome, transport = _read(codec, FrameCodec.from_secrets(remote).encode_header(size) + data[3:])
        if size > _MAX_SIZE:
            assert isinstance(outcome, MessageTooLarge) and transport.remaining == len(data[3:])
            _refuses_more(codec)
        elif len(data) - 3 < FrameCodec.body_length(size):
            assert isinstance(outcome, ConnectionLost), outcome
        else:
            assert isinstance(outcome, BadMAC), outcome  # a body MAC cannot be forged either
    elif len(data) <= _MAX_SIZE:
        echoed, transport = _read(codec, FrameCodec.from_secrets(remote).encode(data))
        assert echoed == data and transport.remaining == 0


if __name__ == "__main__":
    fuzz_main(test_one_input)
