"""Parsers: strict, bounded, and never echoing the value in their reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshcore.parsers import (
    HostPort,
    parse_bool,
    parse_choice,
    parse_duration,
    parse_float,
    parse_hex_bytes,
    parse_host_port,
    parse_int,
    parse_list,
    parse_path,
    parse_str,
    parse_targets,
    parse_url,
)


@pytest.mark.parametrize(
    ("raw", "value"),
    [("true", True), ("YES", True), ("1", True), ("False", False), ("no", False), (" 0 ", False)],
)
def test_bool_accepts_exactly_the_documented_words(raw: str, value: bool) -> None:
    assert parse_bool()(raw) is value


@pytest.mark.parametrize("raw", ["on", "off", "y", "", "2", "truee"])
def test_bool_rejects_everything_else(raw: str) -> None:
    with pytest.raises(ValueError, match="true/false"):
        parse_bool()(raw)


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_int_round_trips_and_bounds(n: int) -> None:
    assert parse_int()(str(n)) == n
    bounded = parse_int(0, 65535)
    if 0 <= n <= 65535:
        assert bounded(str(n)) == n
    else:
        with pytest.raises(ValueError, match="must be"):
            bounded(str(n))


def test_float_rejects_nan_and_inf() -> None:
    assert parse_float(0, 1)("0.5") == 0.5
    for raw in ("nan", "inf", "-inf", "x"):
        with pytest.raises(ValueError):
            parse_float()(raw)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        ("10", 10.0),
        ("1.5", 1.5),
        ("500ms", 0.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("2d", 172800.0),
        (".5s", 0.5),
    ],
)
def test_duration_units(raw: str, seconds: float) -> None:
    assert parse_duration()(raw) == seconds


@pytest.mark.parametrize("raw", ["-1", "1w", "", "ten", "1 2", "200"])
def test_duration_rejects(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(max_value=100)(raw)


def test_host_port_forms() -> None:
    parse = parse_host_port()
    assert parse("archive:50053") == HostPort("archive", 50053)
    assert parse("[::1]:80") == HostPort("::1", 80)
    assert parse_host_port(default_port=9042)("db") == HostPort("db", 9042)
    for raw in ("archive", ":80", "a:0", "a:99999", "::1:80", "[::1]x", "a:b"):
        with pytest.raises(ValueError):
            parse(raw)


def test_list_hex_path_choice_url_str() -> None:
    assert parse_list(parse_int())("1, 2,,3") == (1, 2, 3)
    assert parse_list(parse_str())("") == ()
    assert parse_hex_bytes()("0xABcd") == b"\xab\xcd"
    with pytest.raises(ValueError, match="hex"):
        parse_hex_bytes()("abc")
    assert parse_path()(" /tmp ") == Path("/tmp")
    with pytest.raises(ValueError, match="does not exist"):
        parse_path(must_exist=True)("/no/such/path/here")
    assert parse_choice("DEBUG", "INFO")("info") == "INFO"
    with pytest.raises(ValueError, match="one of DEBUG, INFO"):
        parse_choice("DEBUG", "INFO")("trace")
    assert parse_url(allow_empty=True)("") == ""
    assert parse_url()("https://otel:4317") == "https://otel:4317"
    with pytest.raises(ValueError):
        parse_url()("otel:4317")
    with pytest.raises(ValueError, match="empty"):
        parse_str(allow_empty=False)("  ")


@given(st.text(alphabet="0123456789abcdefXYZ:;[]", min_size=12))
def test_reasons_never_echo_the_value(secret: str) -> None:
    # A value may be a key: load_config decides whether to show it, the parser never does.
    for parser in (parse_int(), parse_bool(), parse_hex_bytes(4), parse_duration(), parse_host_port()):
        try:
            parser(secret)
        except ValueError as err:
            assert secret not in str(err)


def test_targets_are_host_ports_each_once() -> None:
    assert parse_targets("127.0.0.1:50051, [::1]:50052,edge-1:1") == (
        "127.0.0.1:50051",
        "[::1]:50052",
        "edge-1:1",
    )
    assert parse_targets("") == ()
    with pytest.raises(ValueError, match="listed twice"):
        parse_targets("a:1,a:1")
    with pytest.raises(ValueError, match="item 2"):
        parse_targets("a:1,b")
