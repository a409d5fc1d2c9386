"""Store confirmation against a real status-go v0.50.0 mailserver given as ``MSGAPI_STORE_NODES``: the send
service publishes through our edge peer, which relays to the status-go peer it dialled; status-go archives the
envelope in its mailserver, and the send service finds it there over the mailserver protocol."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mailmesh.common.v1 import common_pb2
from mailmesh.edgepeer.v1 import edgepeer_pb2
from mailmesh.send.v1 import send_pb2
from tests.integration.send.send_support import S, Watch, start_mesh, start_send
from tests.interop.peers_support import MS_PASSWORD, PASSWORD, STATUSPEER, TOPICS, go_peer

TOPIC = TOPICS["status-mailserver"]
CONTENT_TOPIC = f"/waku/1/{TOPIC}/rfc26"


async def test_store_confirmation_by_a_statusgo_mailserver(interop_peers: None, tmp_path: Path) -> None:
    mesh = await start_mesh(tmp_path)
    args = ["-topic", TOPIC, "-password", PASSWORD, "-payload", "unused"]
    args += ["-mailserver", str(tmp_path / "status-ms-db"), "-mailserver-password", MS_PASSWORD]
    try:
        with go_peer(STATUSPEER, args, tmp_path / "status-send.log") as status:
            await mesh.edge.stub.AddPeer(edgepeer_pb2.AddPeerRequest(enode=status.enode), timeout=10)
            await asyncio.to_thread(status.command, "wait-peer 20")
            send = await start_send(
                mesh, tmp_path / "msg.db", MSGAPI_STORE_NODES=status.enode, SEND_HISTORY_ADDR="127.0.0.1:1"
            )
            watch = Watch(send)
            try:
                message = common_pb2.WakuMessage(payload=b"stored by status-go", content_topic=CONTENT_TOPIC)
                reply = await send.send(message=message, confirm_mode=send_pb2.CONFIRM_MODE_STORE)
                done = await watch.until(reply.request_id, S.SEND_STATE_SUCCEEDED, timeout=60)
                assert done.sent and done.stored and done.progress.relayed_peers == 1
                # status-go saw the envelope on the wire (its relay accepted our PoW and topic).
                wire = {e["hash"] for e in status.select("envelope", dir="in", code="messages")}
                assert done.envelope_hash.hex() in wire
            finally:
                await watch.close()
                await send.stop()
    finally:
        await mesh.close()
