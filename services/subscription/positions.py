"""Where the records writer is in each input it follows, as stored in msgstore (``positions``), pure.

The live feeds of other processes — every edge peer's ``StreamEnvelopes``, every history-query instance's
``WatchServed`` — number their items per process: an *epoch* (the process) and a sequence within it. A
position is the last item applied, committed with the records it produced (msgstore "Input positions"), so
a restarted or new writer asks the feed to continue exactly after it. :data:`NO_POSITION` means "none
held": the feed is asked for everything it still holds (a resume epoch no process has), which is what a
writer without a position wants — merging again is idempotent.

The send service's ``WatchSendStatuses`` position is already opaque bytes (send.proto ``position``) and is
stored as it is, under :data:`SEND`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["NO_POSITION", "REPLAY_EVERYTHING", "SEND", "FeedPosition", "edge_name", "history_name"]

#: A resume epoch no process has: the feed then starts at the oldest item it still holds
#: (edgepeer.proto ``StreamEnvelopesResponse.resumed``; history.proto ``WatchServedResponse.resumed``).
REPLAY_EVERYTHING = "replay-everything-held"

#: The position name of the send service's status changes.
SEND = "send"


def edge_name(target: str) -> str:
    """The position name of an edge peer's envelope feed."""
    return f"edge/{target}"


def history_name(target: str) -> str:
    """The position name of a history-query instance's served-envelope feed."""
    return f"history/{target}"


@dataclass(frozen=True, slots=True)
class FeedPosition:
    """The last item applied from a feed: its process ``epoch`` and ``sequence`` (0 = none in it)."""

    epoch: str
    sequence: int

    @property
    def held(self) -> bool:
        """Whether this names an item (rather than "replay everything held")."""
        return self.epoch != REPLAY_EVERYTHING

    def encode(self) -> bytes:
        """The stored form (versioned JSON)."""
        return json.dumps({"v": 1, "epoch": self.epoch, "seq": self.sequence}, sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> FeedPosition:
        """The stored form back; :data:`NO_POSITION` for None or anything this code did not write."""
        if not raw:
            return NO_POSITION
        try:
            doc = json.loads(raw)
            epoch, sequence = doc["epoch"], doc["seq"]
        except (ValueError, KeyError, TypeError):
            return NO_POSITION
        if doc.get("v") != 1 or not isinstance(epoch, str) or not isinstance(sequence, int) or sequence < 0:
            return NO_POSITION
        return cls(epoch, sequence)


#: No position held: ask the feed for everything it still holds.
NO_POSITION = FeedPosition(REPLAY_EVERYTHING, 0)
