"""The ``mailmesh`` command-line client: post envelopes and fetch history from any Waku v1 / Whisper v6 node.

Run it as ``python -m mailmeshcli`` (or ``tools/mailmesh``). The library parts — :mod:`mailmeshcli.compose`
(encrypt, sign, seal) and :mod:`mailmeshcli.fetch` (dialects, cursor walks, JSON records) — are used by
tests and benchmarks too. Imports wakunode, devp2p and wakucodec only (no gRPC).
"""
