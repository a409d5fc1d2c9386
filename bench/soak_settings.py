"""The soak's settings and the vocabulary its processes share (``bench/soak.py`` and its role processes).

One :class:`SoakSettings` describes a run; the coordinator writes it as JSON for each role process
(``python -m bench.soak_role``). :data:`FULL` is ``make soak`` (10 minutes, 1,000 envelopes/s, 20 history
clients, 8 hostile peers); :data:`SMOKE` is the same code with tiny numbers for ``make test``
(``tests/e2e/test_e2e_soak_smoke.py``).

Traffic shape (docs/soak.md "Workload"): 1 KiB envelopes with a TTL of 10 s — status-go's default for a
chat message (status-protocol-go ``transport/whisper/whisper.go`` ``DefaultWhisperMessage``) — sealed to the
node minimum PoW (0.000002, as every bench suite) on :data:`TOPIC_COUNT` soak topics, posted in Messages
packets of :attr:`SoakSettings.packet` envelopes by :attr:`SoakSettings.publishers` peers.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from devp2p.config import ServerConfig, SessionConfig
from wakunode.client import CLIENT_CONFIG

__all__ = [
    "CLIENT_SERVER",
    "FULL",
    "LEDGER",
    "SMOKE",
    "TAG",
    "WAKU1_CLIENT",
    "SoakSettings",
    "soak_topics",
    "tag_of",
]

#: Every soak envelope's data starts with ``TAG + run id``: history clients refuse anything else.
TAG = b"SOAK"
#: One ledger record per posted envelope: hash, sent time, topic, acknowledged (1) or not (0).
LEDGER = struct.Struct(">32sI4sB")
#: Peers offer waku/1 only (a current status-go node) and advertise an empty topic interest, so the edge
#: peer's relay sends them nothing: the only traffic towards them is what they ask for (wakunode.client).
WAKU1_CLIENT = replace(CLIENT_CONFIG, capabilities=("waku/1",))
CLIENT_SERVER = ServerConfig(listen=False, session=SessionConfig(handshake_timeout=10.0))


def soak_topics(count: int) -> tuple[bytes, ...]:
    """The soak's topics: ``5a 4b 00 <k>`` for k < ``count``."""
    return tuple(bytes((0x5A, 0x4B, 0x00, k)) for k in range(count))


def tag_of(run_id: int) -> bytes:
    """The first 8 data bytes of every envelope of run ``run_id``."""
    return TAG + run_id.to_bytes(4, "big")


@dataclass(frozen=True)
class SoakSettings:
    """One soak run (sizes, rates, bounds); every field is recorded in the results."""

    duration_s: float = 600.0
    """Length of the load phase: publishers, history clients and hostile peers all run this long."""
    rate: float = 1000.0
    """Target envelopes/s over all publishers together (each packet is due on a fixed schedule)."""
    publishers: int = 4
    """Good publishing peers (each its own RLPx session)."""
    packet: int = 20
    """Envelopes per Messages packet."""
    data_size: int = 1024
    """Bytes of each envelope's data (the tag, a sequence number, then random bytes)."""
    ttl: int = 10
    """Envelope TTL in seconds (status-go's chat default, see the module docstring)."""
    topics: int = 8
    """Soak topics; envelopes cycle through them."""
    ack_window: int = 12
    """Packets a publisher may have sent but not yet seen confirmed (about a second of its traffic); when
    full it waits, so a slow mesh slows the publishers down instead of letting their envelopes age in
    queues past their TTL."""
    ack_timeout_s: float = 120.0
    """A packet without its Batch Ack this long after it was written is unacknowledged (a client error)."""
    history_clients: int = 20
    """Good requesters paging history over RLPx (0x7e, cursors) during the load."""
    history_limit: int = 100
    """Envelopes per page (the 0x7e limit)."""
    history_window_s: int = 5
    """Each walk asks for this many seconds of sent times, ending a little before now."""
    history_topics: int = 2
    """Topics per request (of :attr:`topics`)."""
    history_page_interval_s: float = 2.0
    """Pause between one client's pages (and walks): 20 clients × one page per 2 s = 10 pages/s."""
    page_timeout_s: float = 120.0
    """A page not complete after this long is a client error (a hang bound, not a latency target)."""
    hostile: int = 8
    """Hostile peers, each cycling through every misbehaviour (bench/soak_hostile.py)."""
    hostile_pause_s: float = 2.0
    """Mean pause between one hostile peer's misbehaviours (uniform in 0 – twice this)."""
    final_walks: int = 20
    """Exact-completeness walks after the drain (one per history client in the full run)."""
    drain_timeout_s: float = 900.0
    """Longest wait, after the load, for the archive to hold every acknowledged envelope (a hang bound)."""
    archive: str = "sqlite"
    """Archive backend: sqlite (a fresh file) or cassandra (the local node, keyspace mailmesh_soak)."""
    steady_fraction: float = 0.5
    """Slopes are fitted over this last fraction of the samples: before it, bounded caches are still
    filling (the archive's 256 MiB SQLite page cache took ~200 s at 1,000 envelopes/s): growth, no leak."""
    rss_slope_bound: float = 2.0
    """Largest allowed RSS slope of any process over the steady part, in MiB per minute: 20 MiB over a
    10-minute run, ~34 bytes per envelope at 1,000/s. Tighter bounds sit inside the noise of 300 one-second
    samples (a slowloris reader holds ~20 MB in the edge peer for up to a minute at a time)."""
    fd_slope_bound: float = 1.0
    """Largest allowed open-file-descriptor slope of any process over the steady part, per minute."""
    strict: bool = True
    """The rate target and the slope bounds are criteria too (off for the smoke: a loaded machine may not
    hold even the smoke's small rate, and 15 s of samples is all warm-up)."""
    run_id: int = 0
    """Tags this run's envelopes (set by the coordinator)."""

    def __post_init__(self) -> None:
        if self.archive not in ("sqlite", "cassandra"):
            raise ValueError(f"archive must be sqlite or cassandra, got {self.archive!r}")
        if self.publishers < 1 or self.packet < 1 or self.rate <= 0 or self.duration_s <= 0:
            raise ValueError("publishers, packet, rate and duration must be positive")
        if not 1 <= self.history_topics <= self.topics <= 256:
            raise ValueError("need 1 <= history_topics <= topics <= 256")
        if not 0 < self.steady_fraction <= 1:
            raise ValueError("steady_fraction must be in (0, 1]")
        if self.data_size < 16:
            raise ValueError("data_size must leave room for the tag and sequence number (16 bytes)")

    @property
    def packet_interval_s(self) -> float:
        """Seconds between two packets of one publisher."""
        return self.packet * self.publishers / self.rate

    def to_json(self) -> dict[str, Any]:
        """Every field, JSON-ready."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SoakSettings:
        """The inverse of :meth:`to_json`."""
        return cls(**data)

    def write(self, path: Path) -> None:
        """Write the settings for a role process."""
        path.write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def read(cls, path: Path) -> SoakSettings:
        """Read settings written by :meth:`write`."""
        return cls.from_json(json.loads(path.read_text()))


FULL = SoakSettings()
"""``make soak``."""

SMOKE = SoakSettings(
    duration_s=15.0,
    rate=150.0,
    publishers=2,
    packet=10,
    history_clients=3,
    history_page_interval_s=0.5,
    hostile=3,
    hostile_pause_s=0.2,
    final_walks=3,
    drain_timeout_s=300.0,
    strict=False,
)
"""``make test``'s smoke: every part of the soak in ~15 s of load, no slope bound."""
