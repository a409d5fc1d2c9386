"""The load the fault campaign keeps up through a faulted hop, and what "nothing lost" means for it.

Each :class:`Traffic` runs in the background from before the fault until after it clears, records what its
client was told (an envelope the edge peer confirmed, a Send that returned a request id, an answered query),
and after the fault says which of those did not arrive where they must (:meth:`Traffic.missing`): archived,
SUCCEEDED, recorded by the subscription service. Queries have nothing to lose; theirs is "answered again".
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable

import grpc
import grpc.aio

from bench.faults_mesh import BRIDGED, TOPIC, FaultMesh
from mailmesh.archive.v1 import archive_pb2, archive_pb2_grpc
from mailmesh.common.v1 import common_pb2
from mailmesh.health.v1 import health_pb2
from mailmesh.history.v1 import history_pb2
from mailmesh.send.v1 import send_pb2
from mailmesh.subscription.v1 import subscription_pb2 as sub_pb
from wakucodec.envelope import make_envelope
from wakucodec.historyrequest import Dialect, HistoryRequest
from wakunode.errors import RequestFailed

__all__ = ["HealthReads", "HistoryReads", "Posts", "RlpxHistory", "Sends", "Traffic", "archived"]

PACE_S = 0.1
"""Between two operations of a load: a steady, light load (the point is the fault, not the throughput)."""


class Traffic:
    """A background load; subclasses implement :meth:`one` and :meth:`missing`."""

    def __init__(self, mesh: FaultMesh) -> None:
        self.mesh = mesh
        self.acked: list[bytes | str] = []
        """What the load's client was told succeeded, in order."""
        self.outcomes: Counter[str] = Counter()
        """Operations by result (``OK`` or the failure's name)."""
        self._task: asyncio.Task[None] | None = None

    async def one(self) -> None:
        """One operation: append to :attr:`acked` what was acknowledged, raise what failed."""
        raise NotImplementedError

    async def missing(self) -> list[bytes | str]:
        """The acknowledged items that have not arrived where they must (empty when nothing is lost)."""
        return []

    async def _run(self) -> None:
        while True:
            try:
                await self.one()
                self.outcomes["OK"] += 1
            except grpc.aio.AioRpcError as err:
                self.outcomes[err.code().name] += 1
            except (TimeoutError, ConnectionError) as err:
                self.outcomes[type(err).__name__] += 1  # RequestTimeout is a TimeoutError
            await asyncio.sleep(PACE_S)  # the load's pace, not a synchronisation

    def start(self) -> None:
        """Begin (call from the event loop)."""
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """End after the operation in flight is cancelled."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def until_more(self, count: int, timeout: float) -> float:
        """Wait until ``count`` more operations succeeded; returns the seconds it took."""
        began, want = time.monotonic(), self.outcomes["OK"] + count
        async with asyncio.timeout(timeout):
            while self.outcomes["OK"] < want:
                await asyncio.sleep(0.02)  # polling the counter _run updates
        return time.monotonic() - began


async def archived(mesh: FaultMesh, hashes: list[bytes]) -> set[bytes]:
    """Which of ``hashes`` the archive holds (asked directly, past every proxy)."""
    stub = archive_pb2_grpc.ArchiveServiceStub(mesh.channel("archive"))
    found: set[bytes] = set()
    for start in range(0, len(hashes), 500):
        request = archive_pb2.ContainsEnvelopesRequest(envelope_hashes=hashes[start : start + 500])
        found.update((await stub.ContainsEnvelopes(request, timeout=30)).present_envelope_hashes)
    return found


_numbers = itertools.count(1)


class Posts(Traffic):
    """The RLPx peer posts 10 fresh envelopes at a time; acknowledged = confirmed by the edge peer; they must
    end in the archive and, as received records, in the subscription service."""

    def __init__(self, mesh: FaultMesh, *, recorded: bool = False) -> None:
        super().__init__(mesh)
        self.recorded = recorded

    async def one(self) -> None:
        now, first = int(time.time()), next(_numbers) * 10
        batch = [
            make_envelope(expiry=now + 600, ttl=600, topic=TOPIC, data=i.to_bytes(4, "big") * 8, nonce=i)
            for i in range(first, first + 10)
        ]
        result = await self.mesh.peer.post(self.mesh.peer_key, batch, confirm_timeout=30)
        if result.response is None:
            raise TimeoutError("no confirmation")
        refused = {e.envelope_hash for e in result.response.errors}
        self.acked.extend(e.hash for e in batch if e.hash not in refused)

    async def missing(self) -> list[bytes | str]:
        hashes = [h for h in self.acked if isinstance(h, bytes)]
        held = await archived(self.mesh, hashes)
        if self.recorded:
            held &= await _received(self.mesh)
        return [h for h in hashes if h not in held]


async def _received(mesh: FaultMesh) -> set[bytes]:
    """Envelope hashes of the campaign topic's records in the subscription service."""
    request = sub_pb.ListMessageRecordsRequest(filter=sub_pb.RecordFilter(content_topic=BRIDGED))
    return {
        r.envelope_hash
        async for reply in mesh.subscription.ListMessageRecords(request, timeout=30)
        for r in reply.records
    }


class Sends(Traffic):
    """Sends through the send service; acknowledged = a request id; each must end SUCCEEDED, and with
    ``recorded`` also be a sent record in the subscription service."""

    def __init__(self, mesh: FaultMesh, *, recorded: bool = False) -> None:
        super().__init__(mesh)
        self.recorded = recorded

    async def one(self) -> None:
        message = common_pb2.WakuMessage(payload=b"f%d" % next(_numbers), content_topic=BRIDGED)
        reply = await self.mesh.send.Send(send_pb2.SendRequest(message=message), timeout=10)
        self.acked.append(reply.request_id)

    async def missing(self) -> list[bytes | str]:
        lost: list[bytes | str] = []
        for rid in self.acked:
            assert isinstance(rid, str)
            status = await self.mesh.send.GetSendStatus(
                send_pb2.GetSendStatusRequest(request_id=rid), timeout=10
            )
            succeeded = status.status.progress.state == common_pb2.SEND_STATE_SUCCEEDED
            if not succeeded or (self.recorded and not await _sent_record(self.mesh, rid)):
                lost.append(rid)
        return lost


async def _sent_record(mesh: FaultMesh, rid: str) -> bool:
    try:
        reply = await mesh.subscription.GetMessageRecord(
            sub_pb.GetMessageRecordRequest(request_id=rid), timeout=10
        )
    except grpc.aio.AioRpcError as err:
        if err.code() is grpc.StatusCode.NOT_FOUND:
            return False
        raise
    return reply.record.sent


class HistoryReads(Traffic):
    """history-query's Query over gRPC for the campaign topic (its reads go to the archive)."""

    async def one(self) -> None:
        request = history_pb2.HistoryQueryRequest(lower=1, upper=0, topics=[TOPIC], limit=50)
        async for reply in self.mesh.history.Query(request, timeout=10):
            if reply.WhichOneof("kind") == "complete":
                return
        raise TimeoutError("history ended without a completion")


class RlpxHistory(Traffic):
    """The RLPx peer asks the edge peer for history (0x7e), which asks history-query."""

    async def one(self) -> None:
        request = HistoryRequest(lower=1, upper=int(time.time()) + 60, topics=(TOPIC,), limit=50)
        page = self.mesh.peer.request_history(self.mesh.peer_key, request, Dialect.STATUS_PLAIN, timeout=20)
        try:
            async for _ in page:
                pass
        except RequestFailed as err:  # 0x7d ERROR=: the edge peer answered in time, with the failure
            raise ConnectionError(str(err)) from err


class HealthReads(Traffic):
    """The node's health as the health service reports it (it polls the edge peer itself); "recovered" is
    Healthy again (the RLPx peer is connected all along)."""

    async def one(self) -> None:
        await self.mesh.health.GetHealth(health_pb2.GetHealthRequest(), timeout=10)

    async def missing(self) -> list[bytes | str]:
        reply = await self.mesh.health.GetHealth(health_pb2.GetHealthRequest(), timeout=10)
        healthy = reply.report.status == common_pb2.HEALTH_STATUS_HEALTHY
        return [] if healthy else [common_pb2.HealthStatus.Name(reply.report.status)]


Factory = Callable[[FaultMesh], Traffic]
"""How a hop's load is made for one case."""
Check = Callable[[FaultMesh], Awaitable[bool]]
"""A recovery condition a hop may add (the health service reports the node healthy again)."""
