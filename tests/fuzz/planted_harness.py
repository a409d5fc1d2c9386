"""A harness with a planted bug, to prove that the smoke test's runner reports a finding.

Its "decoder" raises ValueError — not a typed error — for any input starting with ``0xc3``; the test seeds
it with such an input, so libFuzzer meets the bug while reading the seeds.
"""

from __future__ import annotations

from fuzz.support import fuzz_main


def test_one_input(data: bytes) -> None:
    """Raise ValueError for inputs starting with 0xc3, as a decoder with an untyped error would."""
    if data[:1] == b"\xc3":
        raise ValueError("planted: an untyped error escaped the decoder")


if __name__ == "__main__":
    fuzz_main(test_one_input)
