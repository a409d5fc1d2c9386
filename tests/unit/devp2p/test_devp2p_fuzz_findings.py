"""Regression tests for what the fuzzing campaign found in devp2p (docs/fuzzing.md "Findings").

Each input is the minimized one from the finding, as a literal; each test failed before its fix.
"""

from __future__ import annotations

import pytest

from devp2p.errors import MalformedMessage
from devp2p.messages import decode_frame_data, split_msg_id

# frame_data: a message id 0 sent as the byte 0x00 — the RLP string "\x00", not the integer 0 (0x80). geth's
# rlpx reads the id with rlp.SplitUint64 (ErrCanonInt); we returned (0, b"") and read it as a Hello.
ID_ZERO_AS_0x00 = bytes.fromhex("00")


@pytest.mark.parametrize("snappy", [False, True])
def test_message_id_0x00_is_not_canonical(snappy: bool) -> None:
    with pytest.raises(MalformedMessage, match="0x80"):
        decode_frame_data(ID_ZERO_AS_0x00, snappy=snappy)


def test_message_id_zero_is_0x80_and_one_byte_ids_stay_single_bytes() -> None:
    assert split_msg_id(b"\x80\xc0") == (0, b"\xc0")
    assert split_msg_id(b"\x01\xc0") == (1, b"\xc0")
    assert split_msg_id(b"\x7f") == (0x7F, b"")
