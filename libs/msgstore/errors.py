"""Errors raised by the Messaging API store.

::

    MsgStoreError
    ├── StoreUnavailable    the backend cannot be reached or timed out (retryable; nothing was acknowledged)
    ├── SchemaError         the schema is missing, newer than this code, or a migration failed
    ├── RequestIdConflict   a request id is already used by a different message
    ├── LeaseLost           the caller no longer holds (or is about to lose) the lease it writes under
    ├── SequenceExpired     a resume point is older than what the store still retains
    ├── InvalidPosition     an outbox resume position cannot be decoded or has the wrong shard count
    └── NotFound            no entry, record or subscription for the key

Backends translate their driver's exceptions into these at their boundary (``raise X from err``); nothing
else leaves a :class:`~msgstore.protocol.MsgStore` method except ``ValueError`` for a caller's mistake.
"""

from __future__ import annotations

__all__ = [
    "InvalidPosition",
    "LeaseLost",
    "MsgStoreError",
    "NotFound",
    "RequestIdConflict",
    "SchemaError",
    "SequenceExpired",
    "StoreUnavailable",
]


class MsgStoreError(Exception):
    """Base class of Messaging API store errors."""


class StoreUnavailable(MsgStoreError):
    """The backend is unreachable or timed out; the operation may be retried. Nothing was acknowledged."""


class SchemaError(MsgStoreError):
    """The schema is missing, from a newer version of Mailmesh, or a migration failed."""


class RequestIdConflict(MsgStoreError):
    """A caller-supplied request id is already used by a different message (gRPC ALREADY_EXISTS)."""

    def __init__(self, request_id: str) -> None:
        super().__init__(f"request id {request_id} is already used by a different message")
        self.request_id = request_id


class LeaseLost(MsgStoreError):
    """A write was refused because the caller's lease is lost or too close to expiry to write safely."""

    def __init__(self, name: str, epoch: int, why: str) -> None:
        super().__init__(f"lease {name} (epoch {epoch}): {why}")
        self.name = name
        self.epoch = epoch


class SequenceExpired(MsgStoreError):
    """A resume point is older than the retention window; ``oldest`` is the oldest sequence still held."""

    def __init__(self, oldest: int) -> None:
        super().__init__(f"resume point expired; oldest retained sequence is {oldest}")
        self.oldest = oldest


class InvalidPosition(MsgStoreError):
    """An outbox resume position is malformed, of an unknown version, or for another shard count."""


class NotFound(MsgStoreError):
    """No entry, record or subscription for the key given."""

    def __init__(self, what: str, key: str) -> None:
        super().__init__(f"{what} {key} not found")
        self.what = what
        self.key = key
