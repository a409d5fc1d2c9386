"""The send follower against a small in-process fake SendService over real gRPC (loopback, port 0): the
WatchSendStatuses client converts every field the record rules read, the follower resumes by position after
the last change it applied when the stream breaks, and a gap report makes it re-read every request's status
(ListSendStatuses). The pairing with the real send service: tests/e2e/test_e2e_send_subscription.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import grpc
import grpc.aio

from mailmesh.common.v1 import common_pb2
from mailmesh.send.v1 import send_pb2, send_pb2_grpc
from msgstore.types import MessageErrorKind, Record, SendState
from services.subscription.clients import Channels, SendFeedClient
from services.subscription.followers import Backoff, SendFollower
from services.subscription.inputs import RecordInputs
from services.subscription.rules import SendUpdate

REQUEST = "eeeeeeee-0000-4000-8000-000000000005"
OTHER = "eeeeeeee-0000-4000-8000-000000000006"


def status(
    sequence: int, *, sending: bool, sent: bool, error: bool = False, request_id: str = REQUEST
) -> send_pb2.SendStatus:
    out = send_pb2.SendStatus(
        request_id=request_id,
        message_hash=b"\x09" * 32,
        pubsub_topic="/waku/2/rs/1/0",
        message=common_pb2.WakuMessage(payload=b"p", content_topic="/a/1/b/proto", timestamp=7, meta=b"m"),
        sending=sending,
        sent=sent,
        envelope_hash=b"\x08" * 32,
        sequence=sequence,
        progress=common_pb2.SendProgress(
            state=common_pb2.SEND_STATE_SENDING, attempts=sequence, max_attempts=4
        ),
    )
    out.progress.scheduled_at.FromSeconds(1_700_000_000)
    out.updated_at.FromSeconds(1_700_000_000 + sequence)
    if error:
        out.error.CopyFrom(
            common_pb2.MessageError(kind=common_pb2.MESSAGE_ERROR_KIND_NO_PEERS, detail="none", attempt=1)
        )
    return out


class FakeSendService(send_pb2_grpc.SendServiceServicer):
    """WatchSendStatuses over a fixed change log (position = the change's number as decimal bytes); the
    first stream breaks after two changes unless ``gap_after`` names a position whose next changes are gone
    (then a resume there gets a gap report first). ListSendStatuses lists ``listing``."""

    def __init__(self, gap_after: bytes | None = None) -> None:
        self.log = [
            status(1, sending=True, sent=False),
            status(2, sending=False, sent=False, error=True),
            status(3, sending=False, sent=True),
        ]
        self.gap_after = gap_after
        self.listing = [status(9, sending=False, sent=True, request_id=OTHER)]
        self.requests: list[bytes] = []

    async def WatchSendStatuses(
        self, request: Any, context: Any
    ) -> AsyncIterator[send_pb2.WatchSendStatusesResponse]:
        assert request.HasField("after_position")
        self.requests.append(request.after_position)
        if request.after_position == self.gap_after:
            yield send_pb2.WatchSendStatusesResponse(position=request.after_position, gap_shards=[3])
        for entry in self.log[int(request.after_position or b"0") :]:
            yield send_pb2.WatchSendStatusesResponse(status=entry, position=str(entry.sequence).encode())
            if self.gap_after is None and len(self.requests) == 1 and entry.sequence == 2:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "send replica going away")
        await asyncio.Event().wait()

    async def ListSendStatuses(
        self, request: Any, context: Any
    ) -> AsyncIterator[send_pb2.ListSendStatusesResponse]:
        yield send_pb2.ListSendStatusesResponse(statuses=self.listing)


class RecordingInputs:
    """Records the updates and the positions committed with them; ``stored`` is the committed position a
    follower starts from."""

    def __init__(self, stored: bytes | None = None) -> None:
        self.updates: list[SendUpdate] = []
        self.positions: list[bytes | None] = []
        self.stored = stored

    async def position(self, name: str) -> bytes | None:
        assert name == "send"
        return self.stored

    async def send_update(
        self, update: SendUpdate, *, position: tuple[str, bytes] | None = None
    ) -> Record | None:
        self.updates.append(update)
        self.positions.append(position[1] if position else None)
        if position is not None:
            self.stored = position[1]
        return None


async def test_the_follower_converts_each_status_and_resumes_after_the_last_applied() -> None:
    fake = FakeSendService()  # type: ignore[abstract]  # only WatchSendStatuses is called
    server = grpc.aio.server()
    send_pb2_grpc.add_SendServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channels = Channels()
    inputs = RecordingInputs()
    delays: list[float] = []

    async def no_sleep(delay: float) -> None:
        delays.append(delay)

    follower = SendFollower(
        SendFeedClient(channels, f"127.0.0.1:{port}"), cast(RecordInputs, inputs), Backoff(sleep=no_sleep)
    )
    task = asyncio.create_task(follower.run())
    try:
        async with asyncio.timeout(10):
            while len(inputs.updates) < 3:
                await asyncio.sleep(0.01)
        assert fake.requests == [b"", b"2"]  # the replay from everything retained, then after change 2
        assert follower.position == b"3" and delays == [0.2] and follower.reloads == 0
        assert inputs.positions == [b"1", b"2", b"3"]  # each committed with its change
        first, failed, done = inputs.updates
        assert (first.request_id, first.message_hash, first.envelope_hash) == (
            REQUEST,
            b"\x09" * 32,
            b"\x08" * 32,
        )
        assert (
            first.message.payload,
            first.message.meta,
            first.message.timestamp,
            first.message.version,
        ) == (
            b"p",
            b"m",
            7,
            None,
        )
        assert first.progress is not None and first.progress.state is SendState.SENDING
        assert first.progress.scheduled_at == 1_700_000_000.0 and first.updated_at == 1_700_000_001.0
        assert (
            failed.error is not None and failed.error.kind is MessageErrorKind.NO_PEERS and not failed.sending
        )
        assert done.sent and done.error is None
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await channels.close()
        await server.stop(None)


async def test_a_gap_report_makes_the_follower_re_read_every_request_before_going_on() -> None:
    fake = FakeSendService(gap_after=b"1")  # type: ignore[abstract]  # only the two watched calls
    server = grpc.aio.server()
    send_pb2_grpc.add_SendServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    channels = Channels()
    inputs = RecordingInputs(stored=b"1")  # as if change 1 was committed before the follower lost touch
    follower = SendFollower(SendFeedClient(channels, f"127.0.0.1:{port}"), cast(RecordInputs, inputs))
    task = asyncio.create_task(follower.run())
    try:
        async with asyncio.timeout(10):
            while len(inputs.updates) < 3:
                await asyncio.sleep(0.01)
        assert fake.requests == [b"1"] and follower.reloads == 1
        listed, failed, done = inputs.updates
        assert listed.request_id == OTHER and listed.sent  # the re-read before the changes after the gap
        assert failed.request_id == REQUEST and failed.error is not None
        assert done.sent and follower.position == b"3"
        assert inputs.positions == [None, b"2", b"3"]  # the re-read moves no position
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await channels.close()
        await server.stop(None)
