"""Errors and the code table: every category maps, subclasses inherit, Go names are complete."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import grpc
import grpc.aio
import pytest
from prometheus_client import CollectorRegistry

from meshcore import errors
from meshcore.codes import ERROR_CODES, GO_CODE_NAMES, error_class_for, go_code_name, status_code_for
from meshcore.interceptors import _Method
from meshcore.metrics import ServerMetrics


class InvalidCursor(errors.InvalidArgument):
    """How a service subclasses a category and carries its data."""

    def __init__(self, cursor: str) -> None:
        super().__init__("invalid cursor", {"cursor": cursor})


def test_subclasses_inherit_their_category_code() -> None:
    err = InvalidCursor("abc")
    assert status_code_for(err) is grpc.StatusCode.INVALID_ARGUMENT
    assert err.message == "invalid cursor" and str(err) == "invalid cursor"
    assert err.details == {"cursor": "abc"}
    assert repr(err) == "InvalidCursor('invalid cursor', {'cursor': 'abc'})"
    with pytest.raises(TypeError):
        err.details["cursor"] = "changed"  # type: ignore[index]


def test_every_category_is_in_the_table_and_round_trips() -> None:
    categories = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.MeshError)]
    assert set(categories) == set(ERROR_CODES)
    for category, code in ERROR_CODES.items():
        if category is not errors.MeshError:
            assert error_class_for(code) is category


def test_empty_message_falls_back_to_the_category_default() -> None:
    assert errors.NotFound().message == "not found"
    assert errors.Unavailable("").message == "unavailable"
    assert status_code_for(errors.MeshError("uncategorised")) is grpc.StatusCode.INTERNAL


def test_go_code_names_cover_every_status() -> None:
    assert set(GO_CODE_NAMES) == set(grpc.StatusCode)
    assert go_code_name(grpc.StatusCode.CANCELLED) == "Canceled"
    assert go_code_name(grpc.StatusCode.DEADLINE_EXCEEDED) == "DeadlineExceeded"
    assert error_class_for(grpc.StatusCode.OK) is errors.Internal  # OK is not an error; never asked


class _GoneContext:
    """The bits of a servicer context the error guard reads, for a call whose client already left."""

    def __init__(self, cancelled: bool) -> None:
        self._cancelled = cancelled
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def cancelled(self) -> bool:
        return self._cancelled

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    def time_remaining(self) -> float | None:
        return None

    def code(self) -> grpc.StatusCode | None:
        return None if self.aborted is None else self.aborted[0]

    async def abort(self, code: grpc.StatusCode, message: str, trailing_metadata: object = ()) -> None:
        self.aborted = (code, message)
        raise grpc.aio.AbortError()


async def _failing(request: object, context: object) -> object:
    raise RuntimeError("write on a finished call")  # what grpc raises when the client has left


@pytest.mark.parametrize("gone", [True, False])
async def test_a_failure_after_the_client_left_ends_quietly(
    gone: bool, caplog: pytest.LogCaptureFixture
) -> None:
    log = logging.getLogger("test.guard")
    m = ServerMetrics.for_registry(CollectorRegistry()).rpc("/pkg.Svc/Query", "unary")
    guarded = _Method("/pkg.Svc/Query", m, None, log).wrap(_failing, False, False)
    fake = _GoneContext(cancelled=gone)
    context = cast(Any, fake)  # only the methods the guard calls
    with caplog.at_level(logging.DEBUG, logger="test.guard"):
        if gone:
            with pytest.raises(asyncio.CancelledError):
                await guarded(b"", context)
        else:
            with pytest.raises(grpc.aio.AbortError):
                await guarded(b"", context)
    errors_logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
    if gone:
        assert errors_logged == [] and fake.aborted is None
    else:  # a real fault still logs ERROR and answers INTERNAL
        assert [r.levelno for r in errors_logged] == [logging.ERROR]
        assert fake.aborted is not None and fake.aborted[0] is grpc.StatusCode.INTERNAL
