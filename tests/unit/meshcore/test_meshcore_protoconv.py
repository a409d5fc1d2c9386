"""Timestamps, durations and byte-bounded text for proto fields."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from meshcore.protoconv import clip_utf8, duration, timestamp


def test_timestamp_and_duration_keep_the_fraction() -> None:
    stamp = timestamp(1_700_000_000.25)
    assert (stamp.seconds, stamp.nanos) == (1_700_000_000, 250_000_000)
    span = duration(1.5)
    assert (span.seconds, span.nanos) == (1, 500_000_000)


def test_short_text_is_kept_and_long_text_is_marked() -> None:
    assert clip_utf8("short", 10) == "short"
    assert clip_utf8("x" * 20, 10) == "xxxxxxx..."
    assert clip_utf8("x" * 20, 10, marker="") == "x" * 10


def test_a_cut_never_splits_a_character() -> None:
    assert clip_utf8("é" * 10, 8) == "éé..."  # 2 bytes each: 5 bytes of room hold two


@given(st.text(), st.integers(0, 64), st.sampled_from(["", "...", "…"]))
def test_clipped_text_fits_and_is_a_prefix(text: str, limit: int, marker: str) -> None:
    out = clip_utf8(text, limit, marker=marker)
    if len(text.encode()) <= limit:
        assert out == text
    else:
        assert out.endswith(marker)
        body = out[: len(out) - len(marker)] if marker else out
        assert text.startswith(body)
        assert len(body.encode()) <= max(limit - len(marker.encode()), 0)
