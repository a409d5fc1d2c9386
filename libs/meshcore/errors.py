"""Errors that domain code raises without importing gRPC.

Every failure a service reports to a caller is one of the categories below. Domain modules
(``logic.py``, storage adapters) raise them or their subclasses; the server interceptor in
:mod:`meshcore.interceptors` turns them into a gRPC status with the code from the one table in
:mod:`meshcore.codes`, and :func:`meshcore.clients.translate_rpc_error` turns a status coming
back from another service into the same classes. The tree::

    MeshError
    ├── InvalidArgument      the request itself is wrong; retrying it unchanged cannot help
    ├── NotFound             the thing named does not exist
    ├── AlreadyExists        the thing to create exists already
    ├── FailedPrecondition   the system is not in a state that allows the call
    ├── ResourceExhausted    a limit or quota was hit (rate limit, full queue): back off
    ├── Unavailable          a transient failure (dependency down, shutting down): retry later
    ├── DeadlineExceeded     the caller's time ran out before the work finished
    ├── PermissionDenied     the caller may not do this
    │   └── Unauthenticated  the caller did not say who it is (no or an unknown credential)
    └── Internal             a bug or broken invariant on our side

Services subclass a category and carry the offending data, e.g.::

    class InvalidCursor(InvalidArgument):
        '''The cursor is malformed or its MAC does not verify.'''

        def __init__(self, cursor: str) -> None:
            super().__init__("invalid cursor", {"cursor": cursor})
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

__all__ = [
    "AlreadyExists",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "MeshError",
    "NotFound",
    "PermissionDenied",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
]


class MeshError(Exception):
    """Base of every error a Mailmesh service reports to its callers.

    ``message`` is sent to the caller as the status message, so it must not contain secrets;
    ``details`` is structured context for logs (it stays on the server). An empty message is
    replaced by the category's default so a status never goes out without one.
    """

    default_message: ClassVar[str] = "error"

    def __init__(self, message: str = "", details: Mapping[str, object] | None = None) -> None:
        self.message: str = message or self.default_message
        # Read-only view: an error is a value; handlers up the stack must not edit it in place.
        self.details: Mapping[str, object] = MappingProxyType(dict(details or {}))
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, {dict(self.details)!r})"


class InvalidArgument(MeshError):
    """The request is malformed or out of range; the caller must change it before retrying."""

    default_message = "invalid argument"


class NotFound(MeshError):
    """The entity the request names does not exist."""

    default_message = "not found"


class AlreadyExists(MeshError):
    """The entity the request would create exists already."""

    default_message = "already exists"


class FailedPrecondition(MeshError):
    """The system is not in the state the call needs (e.g. not configured, wrong mode)."""

    default_message = "failed precondition"


class ResourceExhausted(MeshError):
    """A limit was hit (rate limit, queue full, batch too large); the caller should back off."""

    default_message = "resource exhausted"


class Unavailable(MeshError):
    """A transient condition (dependency down, shutting down); the call may succeed if retried."""

    default_message = "unavailable"


class DeadlineExceeded(MeshError):
    """The caller's deadline ran out before the work could finish."""

    default_message = "deadline exceeded"


class PermissionDenied(MeshError):
    """The caller is not allowed to perform this call."""

    default_message = "permission denied"


class Unauthenticated(PermissionDenied):
    """The call carries no credential, or one nobody issued; a PermissionDenied callers can tell apart."""

    default_message = "unauthenticated"


class Internal(MeshError):
    """A bug or a broken invariant on our side; never the caller's fault."""

    default_message = "internal error"
