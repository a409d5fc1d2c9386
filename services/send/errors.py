"""Errors the send service reports to its callers; each maps to one gRPC code through meshcore's table.

The texts are the client-visible ones: MESSAGING-API's REST 404 for an unsupported pubsub topic and the
``RECORD_NOT_FOUND`` texts of ``send.proto`` (GetSendStatus), so a gateway can pass them through unchanged.
"""

from __future__ import annotations

from meshcore.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound

__all__ = [
    "InvalidMessage",
    "NotOwner",
    "RequestIdTaken",
    "RequestNotFound",
    "UnsupportedPubsubTopic",
]


class InvalidMessage(InvalidArgument):
    """The message or an option of the request is invalid (reason INVALID_MESSAGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, {"reason": "INVALID_MESSAGE"})


class UnsupportedPubsubTopic(NotFound):
    """A pubsub topic the node does not serve (reason UNSUPPORTED_PUBSUB_TOPIC); the text is the spec's."""

    def __init__(self, text: str, pubsub_topic: str) -> None:
        super().__init__(text, {"reason": "UNSUPPORTED_PUBSUB_TOPIC", "pubsub_topic": pubsub_topic})


class RequestIdTaken(AlreadyExists):
    """A caller-supplied request id already names a different message (reason REQUEST_ID_CONFLICT)."""

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"requestId '{request_id}' is already used by a different message",
            {"reason": "REQUEST_ID_CONFLICT", "request_id": request_id},
        )


class RequestNotFound(NotFound):
    """No request with this id or message hash (reason RECORD_NOT_FOUND), with send.proto's texts."""

    @classmethod
    def by_id(cls, request_id: str) -> RequestNotFound:
        """Unknown request id."""
        return cls(f"Message with requestId '{request_id}' not found", {"reason": "RECORD_NOT_FOUND"})

    @classmethod
    def by_hash(cls, message_hash: bytes) -> RequestNotFound:
        """Unknown message hash (shown as 0x-prefixed hex, as the REST API spells hashes)."""
        return cls(f"Message with hash '0x{message_hash.hex()}' not found", {"reason": "RECORD_NOT_FOUND"})


class NotOwner(FailedPrecondition):
    """Cancel/Resend reached a replica that does not own the request's outbox shard (reason NOT_OWNER).

    Only the shard's owner writes its requests (docs/messaging-store.md, "Outbox"); the caller retries
    (through a load-balanced address another replica answers).
    """

    def __init__(self, request_id: str, shard: int) -> None:
        super().__init__(
            f"request '{request_id}' is owned by another send replica (outbox shard {shard}); retry",
            {"reason": "NOT_OWNER", "shard": shard},
        )
