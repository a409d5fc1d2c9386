"""The inputs that change records — receptions, send statuses, store confirmations (the recurring check
and envelopes the History API served) — applied through the :class:`~.recorder.Recorder` with the rules of
:mod:`.rules`, each with the position of its input (committed with the data; msgstore "Input positions").

Own messages: Waku v1 does not carry ``meta`` and the network's copy of a message we sent may come back
under a hash other than ours, so the receive path first looks the envelope hash up among the envelopes the
send service reported (bounded, most recent kept) and merges the reception into that record.

Store confirmation (MESSAGING-API "Acknowledgements"): the records to check are those on a content topic of
an active subscription with store confirmation on (including the reserved background subscription of
``confirmContentTopics``) that carry an envelope hash and are not yet stored. The candidates are kept in
memory, added as records are committed and rebuilt from the topic listings when this replica becomes the
writer.

Served history (MESSAGING-API "Acknowledgements": "the stored property MUST be updated for any other
messages received via the History API"): every record carrying an envelope hash a history-query instance
served becomes stored, whoever sent or received it, on any content topic (msgstore ``by_envelope``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from functools import partial

from msgstore.types import Record
from services.subscription.mapping import receptions
from services.subscription.ports import FeedEnvelope, LookupPort
from services.subscription.recorder import Recorder, Rule
from services.subscription.rules import Change, SendUpdate, merge_received, merge_send, merge_stored

__all__ = ["LOOKUP_CHUNK", "RecordInputs"]

#: HistoryQueryService.Lookup takes at most 1000 hashes per call (history.proto, LookupRequest).
LOOKUP_CHUNK = 1000
_OWN_ENVELOPES = 100_000


class RecordInputs:
    """Applies receptions, send statuses and store confirmations; tracks the stored check's candidates."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self._own: OrderedDict[bytes, bytes] = OrderedDict()
        self._unstored: dict[bytes, bytes] = {}
        recorder.on_commit.append(self._committed)
        recorder.on_role.append(self._role)
        self._reload = False

    # ------------------------------------------------------------------------------------------ receive

    async def position(self, name: str) -> bytes | None:
        """Input ``name``'s committed position."""
        return await self._recorder.position(name)

    async def save_position(self, name: str, value: bytes) -> None:
        """Commit input ``name``'s position alone."""
        await self._recorder.save_position(name, value)

    async def receive(self, envelope: FeedEnvelope) -> list[Record]:
        """One envelope from an edge peer's feed: every active subscription on its topic receives it."""
        return await self.receive_many([envelope])

    async def receive_many(
        self, envelopes: Sequence[FeedEnvelope], *, position: tuple[str, bytes] | None = None
    ) -> list[Record]:
        """A feed batch: every reception of every envelope, committed together (with ``position``)."""
        index = self._recorder.index
        now = self._recorder.now()
        items: list[tuple[bytes, Rule]] = []
        for envelope in envelopes:
            # The edge peer's acceptance time orders the listings (created_at, then hash) in arrival order.
            when = envelope.received_at or now
            found = receptions(
                index,
                topic=envelope.topic,
                data=envelope.data,
                sent=envelope.sent,
                received_at=envelope.received_at,
            )
            for reception in found:
                target = self._own.get(envelope.envelope_hash, reception.message_hash)
                rule = partial(
                    merge_received,
                    message_hash=target,
                    pubsub_topic=reception.pubsub_topic,
                    message=reception.message,
                    envelope_hash=envelope.envelope_hash,
                    subscription_id=reception.subscription_id,
                    now=when,
                )
                items.append((target, rule))
        if not items and position is None:
            return []
        return [r for r in await self._recorder.update_many(items, position=position) if r is not None]

    # ------------------------------------------------------------------------------------------ send

    async def send_update(
        self, update: SendUpdate, *, position: tuple[str, bytes] | None = None
    ) -> Record | None:
        """A WatchSendStatuses change merged into its message's record (committed with ``position``)."""
        if update.envelope_hash:
            self._own[update.envelope_hash] = update.message_hash
            self._own.move_to_end(update.envelope_hash)
            while len(self._own) > _OWN_ENVELOPES:
                self._own.popitem(last=False)
        now = self._recorder.now()
        return await self._recorder.update(
            update.message_hash, lambda prev: merge_send(prev, update, now=now), position=position
        )

    # ------------------------------------------------------------------------------------------ served

    async def served(
        self, envelope_hashes: Sequence[bytes], *, position: tuple[str, bytes] | None = None
    ) -> list[Record]:
        """Envelopes a history-query instance served: the records carrying them become stored."""
        found = await self._recorder.store.records.by_envelope(envelope_hashes) if envelope_hashes else []
        now = self._recorder.now()
        items: list[tuple[bytes, Rule]] = [
            (r.message_hash, partial(_stored, now=now)) for r in found if not r.stored
        ]
        if not items and position is None:
            return []
        done = await self._recorder.update_many(items, position=position)
        return [r for r in done if r is not None and r.stored]

    # ------------------------------------------------------------------------------------------ stored

    def _monitored(self) -> set[str]:
        return {
            topic
            for sub in self._recorder.index.subscriptions
            if sub.store_confirmation
            for topic in sub.content_topics
        }

    def _committed(self, change: Change, record: Record) -> None:
        if record.stored:
            self._unstored.pop(record.message_hash, None)
        elif record.envelope_hash and record.message.content_topic in self._monitored():
            self._unstored[record.message_hash] = record.envelope_hash

    def _role(self, writer: bool) -> None:
        self._unstored.clear()
        self._reload = writer

    async def _reload_candidates(self) -> None:
        self._reload = False
        for topic in sorted(self._monitored()):
            for record in await self._recorder.store.records.list_by_topic(topic, None, None):
                if not record.stored and record.envelope_hash:
                    self._unstored[record.message_hash] = record.envelope_hash

    @property
    def unstored(self) -> int:
        """Records waiting for the stored check."""
        return len(self._unstored)

    async def check_stored(self, lookup: LookupPort) -> list[Record]:
        """One recurring stored check: ask the archive for every candidate's envelope; mark those it holds."""
        if self._reload:
            await self._reload_candidates()
        candidates = list(self._unstored.items())
        by_envelope: dict[bytes, list[bytes]] = {}
        for message_hash, envelope_hash in candidates:
            by_envelope.setdefault(envelope_hash, []).append(message_hash)
        envelopes: Sequence[bytes] = list(by_envelope)
        marked = []
        for start in range(0, len(envelopes), LOOKUP_CHUNK):
            found = await lookup.stored(envelopes[start : start + LOOKUP_CHUNK])
            for envelope_hash in envelopes[start : start + LOOKUP_CHUNK]:
                if envelope_hash not in found:
                    continue
                for message_hash in by_envelope[envelope_hash]:
                    rule = partial(_stored, now=self._recorder.now())
                    record = await self._recorder.update(message_hash, rule)
                    self._unstored.pop(message_hash, None)
                    if record is not None and record.stored:
                        marked.append(record)
        return marked


def _stored(previous: Record | None, *, now: float) -> Change | None:
    # A record that vanished meanwhile (retention) has nothing to mark.
    return merge_stored(previous, now=now) if previous is not None else None
