"""One atheris harness per decoder that faces a peer or a client (docs/fuzzing.md has the contracts).

Run one with ``python -m fuzz.harnesses.<name> [libFuzzer flags] [corpus dirs]``; ``make fuzz`` runs them
all (:mod:`fuzz.campaign`). This package module imports none of our libraries on purpose: each harness
imports them inside ``atheris.instrument_imports``, which instruments only modules not imported yet.
"""

from __future__ import annotations

__all__ = ["INSTRUMENTED", "NAMES"]

#: Every harness, in the order ``make fuzz`` runs them (``fuzz/harnesses/<name>.py``).
NAMES = (
    "rlp",
    "envelope",
    "whisper_payload",
    "request_payload",
    "p2p_request",
    "p2p_messages",
    "completion",
    "status",
    "confirmations",
    "eip8_auth",
    "eip8_ack",
    "frame",
    "frame_data",
    "hello",
    "history_query",
    "content_topic",
    "send_request",
    "enode",
)

#: Top-level packages whose Python code atheris instruments (coverage feedback and comparison hints).
INSTRUMENTED = (
    "wakucodec",
    "devp2p",
    "wakunode",
    "services",
    "archivestore",
    "meshcore",
    "msgapi",
    "msgstore",
)
