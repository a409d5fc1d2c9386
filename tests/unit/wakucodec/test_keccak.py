"""Legacy Keccak-256: published vectors, an independent implementation as oracle, running-state semantics."""

from __future__ import annotations

from Crypto.Hash import keccak as pycryptodome_keccak
from hypothesis import given
from hypothesis import strategies as st

from wakucodec.keccak import keccak256, new_keccak256

# Keccak-256 (pre-NIST padding) of "" and "abc", as go-ethereum's crypto.Keccak256 returns them.
EMPTY = bytes.fromhex("c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470")
ABC = bytes.fromhex("4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45")


def oracle(data: bytes) -> bytes:
    return pycryptodome_keccak.new(digest_bits=256, data=data).digest()


def test_published_vectors() -> None:
    assert keccak256(b"") == EMPTY
    assert keccak256(b"abc") == ABC
    assert keccak256(bytearray(b"abc")) == keccak256(memoryview(b"xabc")[1:]) == ABC


@given(st.binary(max_size=4096))
def test_matches_an_independent_implementation(data: bytes) -> None:
    assert keccak256(data) == oracle(data)


@given(st.lists(st.binary(max_size=300), max_size=8))
def test_running_state_digest_does_not_finalize(chunks: list[bytes]) -> None:
    # The RLPx MACs take a digest after every frame and keep absorbing (docs/protocol-notes.md §5.4).
    state = new_keccak256(b"seed")
    absorbed = b"seed"
    for chunk in chunks:
        state.update(chunk)
        absorbed += chunk
        assert state.digest() == oracle(absorbed)
    copy = state.copy()
    copy.update(b"more")
    assert state.digest() == oracle(absorbed) and copy.digest() == oracle(absorbed + b"more")
