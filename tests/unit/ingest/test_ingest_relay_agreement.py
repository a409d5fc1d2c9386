"""The relay (edge peer) and ingest give every envelope the same verdict at the same instant.

Both call :func:`wakucodec.validation.check_envelope`; this property checks the two call sites end to end —
the relay's policy built from a :class:`~wakunode.config.NodeConfig` and ingest's from its
:class:`~services.ingest.validation.Rules` — so a setting translated differently on one side shows up here.
A topic allow-list has no relay counterpart (a mailserver is a full node), so both sides run without one.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.ingest.validation import Invalid, Rules, Valid, validate
from wakucodec.constants import STATUS_MIN_POW, UINT32_MAX
from wakucodec.envelope import Envelope, make_envelope
from wakucodec.pow import calculate_pow
from wakunode.config import NodeConfig
from wakunode.metrics import WakuMetrics
from wakunode.policy import build_policy
from wakunode.ports import SystemClock
from wakunode.relay import Relay

NOW = 1_700_000_000

uint32 = st.integers(min_value=0, max_value=UINT32_MAX)
#: Times clustered around the boundaries the rules care about, plus anything in uint32.
near_now = st.one_of(st.integers(min_value=NOW - 300, max_value=NOW + 300), uint32)
ttls = st.one_of(st.integers(min_value=0, max_value=150), uint32)
pows = st.one_of(st.just(0.0), st.just(STATUS_MIN_POW), st.floats(min_value=0.0, max_value=0.05))


def relay_verdict(env: Envelope, now: float, config: NodeConfig) -> str | None:
    """The relay's cache-failure label for one envelope (None = accepted)."""
    relay = Relay(
        config,
        build_policy(config, config.status_options(), None),
        WakuMetrics(),
        SystemClock(),
        None,
        list,
    )
    (admission,) = relay.admit([env], now, None)
    verdict = admission.verdict
    assert verdict is not None  # a fresh relay has nothing cached
    return None if verdict.fault is None else verdict.fault.value


def ingest_verdict(raw: bytes, now: int, rules: Rules) -> str | None:
    """Ingest's fault label for one envelope (None = accepted)."""
    result = validate(raw, now, rules)
    return result.fault.value if isinstance(result, Invalid) else None


@settings(max_examples=300)
@given(
    sent_offset=st.one_of(st.integers(min_value=-500, max_value=80), uint32),
    ttl=ttls,
    size=st.integers(min_value=0, max_value=600),
    nonce=st.integers(min_value=0, max_value=2**64 - 1),
    now=near_now,
    fraction=st.floats(min_value=0.0, max_value=0.999),
    max_size=st.integers(min_value=20, max_value=700),
    min_pow=pows,
    allowance=st.integers(min_value=0, max_value=60),
)
def test_relay_and_ingest_agree(
    sent_offset: int,
    ttl: int,
    size: int,
    nonce: int,
    now: int,
    fraction: float,
    max_size: int,
    min_pow: float,
    allowance: int,
) -> None:
    sent = (now + sent_offset) & UINT32_MAX  # mostly near now, where the time rules draw their lines
    env = make_envelope(
        expiry=(sent + ttl) & UINT32_MAX, ttl=ttl, topic=b"\x01\x02\x03\x04", data=b"\xa5" * size, nonce=nonce
    )
    config = NodeConfig(max_message_size=max_size, pow_requirement=min_pow, sync_allowance=allowance)
    rules = Rules(max_message_size=max_size, min_pow=min_pow, sync_allowance_s=allowance)
    # The relay sees the node's float clock; ingest the whole second of received_at (Go: uint32(Unix())).
    relay = relay_verdict(env, now + fraction, config)
    assert relay == ingest_verdict(env.raw, now, rules)
    if relay is None:
        accepted = validate(env.raw, now, rules)
        assert isinstance(accepted, Valid) and accepted.pow == calculate_pow(env)  # archived with diff = 0
