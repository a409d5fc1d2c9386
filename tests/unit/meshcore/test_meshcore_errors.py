"""Errors and the code table: every category maps, subclasses inherit, Go names are complete."""

from __future__ import annotations

import grpc
import pytest

from meshcore import errors
from meshcore.codes import ERROR_CODES, GO_CODE_NAMES, error_class_for, go_code_name, status_code_for


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
