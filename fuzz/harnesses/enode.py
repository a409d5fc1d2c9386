"""Enode URLs (devp2p.enode.parse_enode) as gRPC clients give them to the edge peer (``AddPeer``) or the CLI.

The input is decoded as UTF-8 (invalid bytes become lone surrogates). Contract: only InvalidEnode escapes (a
DevP2PError and a ValueError, which the servicer maps to INVALID_ARGUMENT); an accepted URL names a public
key on the curve, a host and a port in 1..65535, and formats to a URL that parses the same.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from devp2p.enode import format_enode, parse_enode
    from devp2p.errors import InvalidEnode
    from fuzz.support import fuzz_main
    from wakucodec import secp


def test_one_input(data: bytes) -> None:
    """Parse ``data`` as an enode URL; check the contract above."""
    try:
        node = parse_enode(data.decode("utf-8", errors="surrogateescape"))
    except InvalidEnode:
        return
    assert secp.validate_public_key(node.pubkey) == node.pubkey
    assert node.host and 0 < node.port <= 65535
    assert node.discport is None or 0 <= node.discport <= 65535
    again = parse_enode(format_enode(node.pubkey, node.host, node.port, discport=node.discport))
    assert (again.pubkey, again.host, again.port) == (node.pubkey, node.host, node.port)
    assert again.discport in (node.discport, None)


if __name__ == "__main__":
    fuzz_main(test_one_input)
