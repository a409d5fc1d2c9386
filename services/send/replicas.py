"""The other send replicas, as this one calls them: Cancel and Resend forwarded to the owner of a request's
outbox shard (services.send.service; the addresses come from the replicas' member rows).

Every call carries a deadline and the metadata :data:`~services.send.ports.FORWARDED` naming this replica,
so the receiver answers itself and never forwards again; a gRPC failure becomes a meshcore error.
"""

from __future__ import annotations

import grpc
import grpc.aio
from opentelemetry import trace
from prometheus_client import REGISTRY, CollectorRegistry

from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from meshcore import remaining_timeout, translate_rpc_error
from msgstore.types import SendState
from services.send.clients import channel as channel_to
from services.send.ports import FORWARDED

__all__ = ["SendReplicas"]


class SendReplicas:
    """The other send replicas, reached at the address each advertises in its member row (one channel per
    address, kept while the process runs: replicas are few)."""

    def __init__(
        self,
        me: str,
        *,
        call_timeout_s: float,
        registry: CollectorRegistry = REGISTRY,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self._me = me
        self._timeout_s = call_timeout_s
        self._registry = registry
        self._tracer_provider = tracer_provider
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, address: str) -> send_pb2_grpc.SendServiceAsyncStub:
        channel = self._channels.get(address)
        if channel is None:
            service = "mailmesh.send.v1.SendService"
            channel = channel_to(address, service, self._timeout_s, self._registry, self._tracer_provider)
            self._channels[address] = channel
        return send_pb2_grpc.SendServiceStub(channel)

    async def cancel(self, address: str, request_id: str) -> tuple[bool, SendState]:
        """Cancel on the replica at ``address``: (canceled, state after)."""
        try:
            reply = await self._stub(address).Cancel(
                send_pb2.CancelRequest(request_id=request_id),
                timeout=remaining_timeout(self._timeout_s),
                metadata=((FORWARDED, self._me),),
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return reply.canceled, SendState(reply.state)

    async def resend(self, address: str, request_id: str) -> tuple[bool, SendState]:
        """Resend on the replica at ``address``: (rescheduled, state after)."""
        try:
            reply = await self._stub(address).Resend(
                send_pb2.ResendRequest(request_id=request_id),
                timeout=remaining_timeout(self._timeout_s),
                metadata=((FORWARDED, self._me),),
            )
        except grpc.aio.AioRpcError as err:
            raise translate_rpc_error(err) from err
        return reply.rescheduled, SendState(reply.state)

    async def close(self) -> None:
        """Close every channel."""
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
