"""The archive service's errors, and the one place storage errors become them.

Each class is a :mod:`meshcore.errors` category (the interceptor picks the status code) and records the
``mailmesh.common.v1.ErrorReason`` it stands for in ``details["reason"]`` (meshcore does not attach an
ErrorDetail to the status yet, so the reason only reaches the log for now)::

    class               status               reason               when
    InvalidField        INVALID_ARGUMENT     INVALID_FIELD        a field is malformed (details["field"])
    InvalidRange        INVALID_ARGUMENT     INVALID_RANGE        "query range is invalid: lower > upper"
    LimitExceeded       INVALID_ARGUMENT     LIMIT_EXCEEDED       too many items, limit out of bounds
    EnvelopeNotFound    NOT_FOUND            ENVELOPE_NOT_FOUND   no such archived envelope
    ArchiveUnavailable  UNAVAILABLE          ARCHIVE_UNAVAILABLE  the store is unreachable (StoreUnavailable)
    ArchiveCorrupt      INTERNAL             -                    stored data failed a check (StoreCorrupt)
    ArchiveSchemaError  FAILED_PRECONDITION  PRECONDITION         schema missing/newer/failed (SchemaError)
    PlanConflict        FAILED_PRECONDITION  VERSION_CONFLICT     plan version changed (the API says ABORTED)
    PlanPrecondition    FAILED_PRECONDITION  PRECONDITION         the plan change would break an invariant
    ResponseTooLarge    RESOURCE_EXHAUSTED   -                    one envelope does not fit in a message
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from archivestore.errors import SchemaError, StoreCorrupt, StoreError, StoreUnavailable
from meshcore.errors import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from meshcore.logging import trim

__all__ = [
    "ArchiveCorrupt",
    "ArchiveSchemaError",
    "ArchiveUnavailable",
    "EnvelopeNotFound",
    "InvalidField",
    "InvalidRange",
    "LimitExceeded",
    "PlanConflict",
    "PlanPrecondition",
    "ResponseTooLarge",
    "store_errors",
]

_log = logging.getLogger(__name__)
#: Longest store error text passed on to a caller (ErrorDetail.message is at most 1024 bytes).
_MAX_TEXT = 512


class InvalidField(InvalidArgument):
    """A request field is malformed; the message starts with the field's name."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", {"reason": "INVALID_FIELD", "field": field})
        self.field = field


class InvalidRange(InvalidArgument):
    """``lower > upper`` in a time range (status-go's wording, protocol-notes §4.2)."""

    def __init__(self, field: str, lower: int, upper: int) -> None:
        super().__init__(
            f"query range is invalid: lower > upper ({field}: {lower} > {upper})",
            {"reason": "INVALID_RANGE", "field": field},
        )


class LimitExceeded(InvalidArgument):
    """A count or limit is outside what the API allows."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", {"reason": "LIMIT_EXCEEDED", "field": field})
        self.field = field


class EnvelopeNotFound(NotFound):
    """No visible archived envelope has this hash."""

    def __init__(self, kind: str, key: bytes) -> None:
        super().__init__(
            f"no archived envelope with {kind} 0x{key.hex()}",
            {"reason": "ENVELOPE_NOT_FOUND", kind: key.hex()},
        )


class ArchiveUnavailable(Unavailable):
    """The storage backend cannot be reached; nothing was acknowledged and the call may be retried."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"archive store unavailable: {problem}", {"reason": "ARCHIVE_UNAVAILABLE"})


class ArchiveCorrupt(Internal):
    """Stored data failed an integrity check; it is never served."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"archive data failed an integrity check: {problem}")


class ArchiveSchemaError(FailedPrecondition):
    """The store's schema is missing, newer than this code, or a migration failed."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"archive schema problem: {problem}", {"reason": "PRECONDITION"})


class PlanConflict(FailedPrecondition):
    """PutShardPlan's expected version is not the current one (the API names ABORTED; see README)."""

    def __init__(self, expected: int, current: int) -> None:
        super().__init__(
            f"shard plan version conflict: expected_version {expected}, current version {current}; "
            "re-read the plan and derive the change again",
            {"reason": "VERSION_CONFLICT", "expected": expected, "current": current},
        )


class PlanPrecondition(FailedPrecondition):
    """The shard plan change would break an invariant (lower a count, drop an entry, change defaults)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem, {"reason": "PRECONDITION"})


class ResponseTooLarge(ResourceExhausted):
    """A single envelope does not fit in one gRPC message with the requested view."""

    def __init__(self, needed: int, limit: int) -> None:
        super().__init__(
            f"an envelope needs {needed} bytes on the wire, more than the {limit}-byte message limit; "
            "ask for ENVELOPE_VIEW_NO_DATA",
            {"needed": needed, "limit": limit},
        )


@contextmanager
def store_errors(operation: str, on_error: Callable[[str], None] | None = None) -> Iterator[None]:
    """Translate storage errors raised inside the block into the service's errors (``raise … from err``).

    ``on_error(kind)`` is called first with ``unavailable``, ``corrupt``, ``schema`` or ``other`` (metrics).
    ``ValueError`` from an adapter means the store refused an argument the service let through; it is
    reported as INVALID_ARGUMENT with the adapter's reason.
    """
    try:
        yield
    except StoreError as err:
        kind = (
            "unavailable"
            if isinstance(err, StoreUnavailable)
            else "corrupt"
            if isinstance(err, StoreCorrupt)
            else "schema"
            if isinstance(err, SchemaError)
            else "other"
        )
        if on_error is not None:
            on_error(kind)
        text = trim(err, _MAX_TEXT)
        if kind == "unavailable":
            raise ArchiveUnavailable(text) from err
        if kind == "corrupt":
            raise ArchiveCorrupt(text) from err
        if kind == "schema":
            raise ArchiveSchemaError(text) from err
        _log.error("%s: storage error", operation, exc_info=err)
        raise Internal(f"archive storage error during {operation}") from err
    except ValueError as err:
        raise InvalidArgument(f"{operation}: {trim(err, _MAX_TEXT)}") from err
