"""Logging: one JSON object per line with trace ids and extras; trim makes peer strings safe."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

from meshcore.logging import bind_rpc, setup_logging, trim

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    out = io.StringIO()
    yield out
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_shape(stream: io.StringIO) -> None:
    setup_logging("archive", "INFO", "json", stream=stream)
    log = logging.getLogger("services.archive.logic")
    log.debug("not written")
    log.info("stored %d envelopes", 3, extra={"topic": "0x01020304", "level": "forged", "count": 3})
    (entry,) = lines(stream)
    assert RFC3339_UTC.match(str(entry.pop("ts")))
    assert entry == {
        "level": "INFO",
        "logger": "services.archive.logic",
        "msg": "stored 3 envelopes",
        "service": "archive",
        "topic": "0x01020304",
        "extra_level": "forged",  # our keys are never overwritten by extras
        "count": 3,
    }


def test_trace_and_span_ids_inside_a_span(stream: io.StringIO) -> None:
    setup_logging("svc", "DEBUG", "json", stream=stream)
    provider = TracerProvider()
    log = logging.getLogger("t")
    log.info("outside")
    with provider.get_tracer("t").start_as_current_span("work") as span:
        log.info("inside")
        ctx = span.get_span_context()
    outside, inside = lines(stream)
    assert "trace_id" not in outside and "span_id" not in outside
    assert inside["trace_id"] == f"{ctx.trace_id:032x}"
    assert inside["span_id"] == f"{ctx.span_id:016x}"
    provider.shutdown()


def test_exception_and_rpc_context(stream: io.StringIO) -> None:
    setup_logging("svc", "INFO", "json", stream=stream)

    def in_handler() -> None:
        bind_rpc("/pkg.Svc/Get", "ipv4:10.0.0.9:4242\nforged line")
        try:
            raise KeyError("k")
        except KeyError:
            logging.getLogger("t").exception("lookup failed")

    import contextvars

    contextvars.copy_context().run(in_handler)  # as each RPC's task has its own context
    logging.getLogger("t").info("after the call")
    failed, after = lines(stream)
    assert failed["rpc"] == "/pkg.Svc/Get"
    assert failed["peer"] == "ipv4:10.0.0.9:4242\\x0aforged line"
    assert "KeyError: 'k'" in str(failed["exc"])
    assert "rpc" not in after


def test_text_format_is_one_escaped_line(stream: io.StringIO) -> None:
    setup_logging("svc", "INFO", "text", stream=stream)
    logging.getLogger("t").warning("peer said", extra={"reason": "bye\r\nINFO fake entry"})
    (line,) = stream.getvalue().splitlines()
    assert re.match(r"^\S+Z WARNING t: peer said reason=bye\\x0d\\x0aINFO fake entry$", line)


def test_setup_twice_does_not_duplicate_lines(stream: io.StringIO) -> None:
    setup_logging("svc", "INFO", "json", stream=stream)
    setup_logging("svc", "INFO", "json", stream=stream)
    logging.getLogger("t").info("once")
    assert len(lines(stream)) == 1
    with pytest.raises(ValueError, match="json or text"):
        setup_logging("svc", "INFO", "yaml", stream=stream)


def test_trim_examples() -> None:
    assert trim("short") == "short"
    assert trim("a\nb\x1b[2J\u202eevil") == "a\\x0ab\\x1b[2J\\u202eevil"
    assert trim("x" * 1000, 10) == "x" * 10 + "…(+990 chars)"
    assert trim(b"\x00\xff" * 1000, 8) == "00ff00ff…(+3992 chars)"
    assert trim(b"\x00\xff", 4) == "00ff"  # short enough: shown whole, no cut mark
    assert trim(None) == "None"


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_trim_is_bounded_single_line_and_printable(value: str, max_len: int) -> None:
    out = trim(value, max_len)
    body, _, _ = out.partition("…(+")
    assert len(body) <= max_len
    assert out.isprintable()
    if len(value) <= max_len and value.isprintable():
        assert out == value
