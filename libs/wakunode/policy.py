"""Our acceptance policy: the settings we advertise as the relay enforces them, and announcing changes.

- :func:`build_policy` turns what we advertise into the :class:`~wakucodec.validation.AcceptancePolicy` that
  incoming envelopes are checked against (protocol-notes §1.5). Right after a change the previous values stay
  tolerated for ``SETTINGS_TOLERANCE_S`` (status-go ``SetMinimumPoW`` / ``SetBloomFilter`` /
  ``SetTopicInterest`` with ``tolerate``): peers need a moment to learn the new ones.
- :func:`announce` tells one peer about a change: a Status Update (22) with only the changed options on
  waku/1 and waku/0 (§3.4), PoW requirement (2) and bloom exchange (3) packets on shh/6 (§3.1), which has no
  topic interest and gets the bloom of the topics instead.
"""

from __future__ import annotations

from wakucodec import rlp
from wakucodec.bloom import FULL_BLOOM, is_full_bloom, topics_to_bloom
from wakucodec.validation import AcceptancePolicy
from wakunode import constants as c
from wakunode.config import NodeConfig
from wakunode.peerstate import WakuPeer
from wakunode.status_options import StatusOptions, encode_options, pow_to_bits

__all__ = ["announce", "bloom_of", "build_policy"]


def bloom_of(options: StatusOptions) -> bytes:
    """The bloom that describes ``options``: its topics' bloom in topic-interest mode, else its bloom (full
    when absent)."""
    if options.topic_interest is not None:
        return topics_to_bloom(options.topic_interest)
    return options.bloom or FULL_BLOOM


def build_policy(
    config: NodeConfig, current: StatusOptions, previous: StatusOptions | None
) -> AcceptancePolicy:
    """The acceptance policy for ``current`` settings, tolerating ``previous`` ones when given."""

    def topics(opts: StatusOptions | None) -> frozenset[bytes] | None:
        return None if opts is None or opts.topic_interest is None else frozenset(opts.topic_interest)

    pow_now = current.pow_requirement or 0.0
    # Accepted if PoW >= min_pow or >= the tolerance: the tolerance is the lower of old and new.
    pow_before = pow_now if previous is None else min(pow_now, previous.pow_requirement or 0.0)
    bloom = None if current.bloom is None or is_full_bloom(current.bloom) else current.bloom
    return AcceptancePolicy(
        max_message_size=config.max_message_size,
        min_pow=pow_now,
        min_pow_tolerance=pow_before,
        bloom=bloom,
        bloom_tolerance=None if previous is None else bloom_of(previous),
        topic_interest=topics(current),
        topic_interest_tolerance=topics(previous),
        sync_allowance=config.sync_allowance,
    )


async def announce(session: WakuPeer, update: StatusOptions) -> None:
    """Send ``update`` (only the changed options) to one ready session, in its protocol's form."""
    peer, proto = session.peer, session.protocol
    if not session.flavor.is_shh:
        version = session.flavor.value[1]
        await peer.send(proto, c.STATUS_UPDATE_CODE, encode_options(update, version=version))
        return
    if update.pow_requirement is not None:
        await peer.send(proto, c.POW_REQUIREMENT_CODE, rlp.encode(pow_to_bits(update.pow_requirement)))
    if update.topic_interest is not None or update.bloom is not None:
        await peer.send(proto, c.BLOOM_EXCHANGE_CODE, rlp.encode(bloom_of(update)))
