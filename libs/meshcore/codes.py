"""The one place where error categories meet gRPC status codes.

:data:`ERROR_CODES` is the single table the server interceptor uses to choose a status code for
a :class:`~meshcore.errors.MeshError`; the client side reads the same table backwards, so a
``NotFound`` raised by the archive arrives in history-query as a ``NotFound`` again.
:data:`GO_CODE_NAMES` gives the spelling Go's ``codes.Code.String()`` uses, which is what
go-grpc-prometheus puts in the ``grpc_code`` label and therefore what dashboards expect.
"""

from __future__ import annotations

from types import MappingProxyType

import grpc

from meshcore.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    MeshError,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

__all__ = ["ERROR_CODES", "GO_CODE_NAMES", "error_class_for", "go_code_name", "status_code_for"]

ERROR_CODES: MappingProxyType[type[MeshError], grpc.StatusCode] = MappingProxyType(
    {
        InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
        NotFound: grpc.StatusCode.NOT_FOUND,
        AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
        FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
        ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
        Unavailable: grpc.StatusCode.UNAVAILABLE,
        DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
        PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
        Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
        Internal: grpc.StatusCode.INTERNAL,
        # A bare MeshError names no category: treat it as our bug rather than guess.
        MeshError: grpc.StatusCode.INTERNAL,
    }
)
"""Error category → status code. Subclasses inherit their category's code (looked up by MRO)."""

# Codes no category produces, folded onto the nearest category for callers. CANCELLED and
# ABORTED mean "the other side gave up or lost a race": transient, so Unavailable. UNIMPLEMENTED
# and DATA_LOSS mean a deployment skew or corruption on their side: Internal to us.
_EXTRA_CODE_CATEGORIES: MappingProxyType[grpc.StatusCode, type[MeshError]] = MappingProxyType(
    {
        grpc.StatusCode.CANCELLED: Unavailable,
        grpc.StatusCode.ABORTED: Unavailable,
        grpc.StatusCode.UNKNOWN: Internal,
        grpc.StatusCode.OUT_OF_RANGE: InvalidArgument,
        grpc.StatusCode.UNIMPLEMENTED: Internal,
        grpc.StatusCode.DATA_LOSS: Internal,
    }
)

_CATEGORY_BY_CODE: dict[grpc.StatusCode, type[MeshError]] = {
    code: cls for cls, code in ERROR_CODES.items() if cls is not MeshError
} | dict(_EXTRA_CODE_CATEGORIES)

GO_CODE_NAMES: MappingProxyType[grpc.StatusCode, str] = MappingProxyType(
    {
        grpc.StatusCode.OK: "OK",
        grpc.StatusCode.CANCELLED: "Canceled",  # sic: Go spells it with one "l"
        grpc.StatusCode.UNKNOWN: "Unknown",
        grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
        grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
        grpc.StatusCode.NOT_FOUND: "NotFound",
        grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
        grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
        grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
        grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
        grpc.StatusCode.ABORTED: "Aborted",
        grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
        grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
        grpc.StatusCode.INTERNAL: "Internal",
        grpc.StatusCode.UNAVAILABLE: "Unavailable",
        grpc.StatusCode.DATA_LOSS: "DataLoss",
        grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
    }
)
"""grpc.StatusCode → the name Go's ``codes.Code.String()`` prints (go-grpc-prometheus labels)."""


def status_code_for(error: MeshError) -> grpc.StatusCode:
    """Return the status code for ``error``, walking its MRO so subclasses get their category's."""
    for cls in type(error).__mro__:
        if issubclass(cls, MeshError) and cls in ERROR_CODES:
            return ERROR_CODES[cls]
    return grpc.StatusCode.INTERNAL  # unreachable: MeshError itself is in the table


def error_class_for(code: grpc.StatusCode) -> type[MeshError]:
    """Return the error category a caller should raise for a non-OK status ``code``."""
    return _CATEGORY_BY_CODE.get(code, Internal)


def go_code_name(code: grpc.StatusCode) -> str:
    """Return Go's name for ``code`` (``NOT_FOUND`` → ``NotFound``)."""
    return GO_CODE_NAMES[code]
