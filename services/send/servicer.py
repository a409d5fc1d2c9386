"""mailmesh.send.v1.SendService: proto ⇄ domain translation only.

Errors are meshcore categories (services.send.errors) mapped to status codes by the server's interceptor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from services.send.convert import filter_from, input_from, state_to, status_to, watch_start
from services.send.ports import FORWARDED
from services.send.service import SendApi

__all__ = ["LIST_CHUNK", "SERVICE_NAME", "SendServicer"]

SERVICE_NAME = "mailmesh.send.v1.SendService"
LIST_CHUNK = 100  # send.proto: at most 100 statuses per ListSendStatuses message


class SendServicer(send_pb2_grpc.SendServiceServicer):
    """The Send API over gRPC."""

    def __init__(self, api: SendApi) -> None:
        self._api = api

    async def Send(self, request: send_pb2.SendRequest, context: Any) -> send_pb2.SendResponse:  # noqa: N802
        """Validate, persist, answer the RequestID."""
        entry, created = await self._api.send(input_from(request))
        return send_pb2.SendResponse(
            request_id=entry.request_id, message_hash=entry.message_hash, created=created
        )

    async def Cancel(self, request: send_pb2.CancelRequest, context: Any) -> send_pb2.CancelResponse:  # noqa: N802
        """Cancel a pending request (a no-op for others)."""
        canceled, state = await self._api.cancel(request.request_id, forwarded=_forwarded(context))
        return send_pb2.CancelResponse(canceled=canceled, state=state_to(state))

    async def Resend(self, request: send_pb2.ResendRequest, context: Any) -> send_pb2.ResendResponse:  # noqa: N802
        """Re-queue a FAILED request."""
        rescheduled, state = await self._api.resend(request.request_id, forwarded=_forwarded(context))
        return send_pb2.ResendResponse(rescheduled=rescheduled, state=state_to(state))

    async def ListPendingRequests(  # noqa: N802 - gRPC method name
        self, request: send_pb2.ListPendingRequestsRequest, context: Any
    ) -> send_pb2.ListPendingRequestsResponse:
        """Ids of unfinished requests in serving order."""
        return send_pb2.ListPendingRequestsResponse(request_ids=await self._api.pending())

    async def GetSendStatus(  # noqa: N802 - gRPC method name
        self, request: send_pb2.GetSendStatusRequest, context: Any
    ) -> send_pb2.GetSendStatusResponse:
        """One request by id or message hash."""
        key = request.WhichOneof("key")
        entry = await self._api.status(
            request_id=request.request_id if key == "request_id" else "",
            message_hash=request.message_hash if key == "message_hash" else b"",
        )
        return send_pb2.GetSendStatusResponse(status=status_to(entry))

    async def ListSendStatuses(  # noqa: N802 - gRPC method name
        self, request: send_pb2.ListSendStatusesRequest, context: Any
    ) -> AsyncIterator[send_pb2.ListSendStatusesResponse]:
        """The filtered listing, in chunks of at most 100."""
        skip = request.skip if request.HasField("skip") else None
        take = request.take if request.HasField("take") else None
        entries = await self._api.list(filter_from(request), skip, take)
        for i in range(0, len(entries), LIST_CHUNK):
            yield send_pb2.ListSendStatusesResponse(
                statuses=[status_to(e) for e in entries[i : i + LIST_CHUNK]]
            )

    async def WatchSendStatuses(  # noqa: N802 - gRPC method name
        self, request: send_pb2.WatchSendStatusesRequest, context: Any
    ) -> AsyncIterator[send_pb2.WatchSendStatusesResponse]:
        """Every change, resumable by position."""
        async for item in self._api.watch(watch_start(request)):
            reply = send_pb2.WatchSendStatusesResponse(position=item.position, gap_shards=item.gap_shards)
            if item.change is not None:
                reply.status.CopyFrom(status_to(item.change.entry))
            yield reply


def _forwarded(context: Any) -> bool:
    """Whether another send replica forwarded this call (its metadata names it)."""
    return any(key == FORWARDED for key, _ in context.invocation_metadata() or ())
