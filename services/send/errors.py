"""Errors the send service reports to its callers; each maps to one gRPC code through meshcore's table.

The texts are the client-visible ones: MESSAGING-API's REST 404 for an unsupported pubsub topic and the
``RECORD_NOT_FOUND`` texts of ``send.proto`` (GetSendStatus), so a gateway can pass them through unchanged.
"""

from __future__ import annotations

from meshcore.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, Unavailable

__all__ = [
    "InvalidMessage",
    "NoOwner",
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
    """A forwarded Cancel/Resend reached a replica that no longer owns the request's outbox shard (reason
    NOT_OWNER): the shard changed hands meanwhile. The forwarding replica looks the owner up again.

    Only the shard's owner writes its requests (docs/messaging-store.md, "Outbox"); a call from a client is
    forwarded to the owner instead (services.send.service).
    """

    def __init__(self, request_id: str, shard: int) -> None:
        super().__init__(
            f"request '{request_id}' is owned by another send replica (outbox shard {shard}); retry",
            {"reason": "NOT_OWNER", "shard": shard},
        )
        self.shard = shard


class NoOwner(Unavailable):
    """No live replica owns the request's outbox shard right now (reason NO_OWNER): its owner died and the
    lease has not been taken over yet, or the shard is changing hands. Retryable: within one lease TTL a
    replica owns it again."""

    def __init__(self, request_id: str, shard: int, why: str) -> None:
        super().__init__(
            f"no send replica owns request '{request_id}' (outbox shard {shard}) right now: {why}; retry",
            {"reason": "NO_OWNER", "shard": shard},
        )
