"""Waku v2 content topics (23/WAKU2-TOPICS) and their mapping onto 4-byte Waku v1 / Whisper topics.

Format (docs/protocol-notes.md §11.3): ``/{application}/{version}/{name}/{encoding}``, with
an optional autosharding generation prefix ``/{generation}/…``. Parsing follows nwaku's
``NsContentTopic.parse`` (leading slash, 4 or 5 parts, every part non-empty, numeric generation) plus its
sharding rule that only generation 0 exists yet; we accept ASCII digits only (nwaku's ``parseInt`` would
also take a sign).

v1 ↔ v2 mapping (docs/design.md "Messaging API decisions"; protocol-notes §11.5; nwaku's wakubridge
and status-go's ``wakuv2/common/topic.go``):

- v1 → v2: ``/waku/1/0x<8 lowercase hex>/rfc26``.
- v2 → v1: a *bridgeable* content topic — application ``waku``, version ``1``, encoding ``rfc26``, no
  generation or generation 0, name of 8 hex digits (either case, ``0x`` optional as in nwaku) — maps to
  those 4 bytes; **any other string** maps to ``keccak256(content_topic)[:4]``, the rule Status uses for
  public-chat topics (protocol-notes §2.6). That branch never fails, so any string a Messaging API
  caller sends has a v1 topic; validating it is the caller's business (:meth:`ContentTopic.parse`).
"""

from __future__ import annotations

from dataclasses import dataclass

from wakucodec.errors import InvalidTopic
from wakucodec.keccak import keccak256

__all__ = [
    "ContentTopic",
    "content_topic_to_v1_topic",
    "is_bridgeable",
    "v1_topic_to_content_topic",
]

_TOPIC_LENGTH = 4
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class ContentTopic:
    """A parsed, namespaced content topic."""

    #: Application name, e.g. ``waku`` or ``status``.
    application: str
    #: Application version, e.g. ``1``.
    version: str
    #: Topic name within the application.
    name: str
    #: Payload encoding, e.g. ``proto`` or ``rfc26``.
    encoding: str
    #: Autosharding generation prefix, None when absent (only 0 is valid today).
    generation: int | None = None

    @classmethod
    def parse(cls, text: str) -> ContentTopic:
        """Parse ``/app/version/name/encoding`` or ``/gen/app/version/name/encoding``.

        Raises :class:`InvalidTopic` (with nwaku's wording) for anything else.
        """
        if not isinstance(text, str):
            raise InvalidTopic("content topic must be a string")
        if not text.startswith("/"):
            raise InvalidTopic(f"content topic {text!r:.80} must start with a slash")
        parts = text[1:].split("/")
        generation: int | None = None
        if len(parts) == 5:
            gen = parts.pop(0)
            if not gen:
                raise InvalidTopic("content topic is missing its generation")
            if not (gen.isascii() and gen.isdigit()):
                raise InvalidTopic("generation should be a numeric value")
            generation = int(gen)
            if generation != 0:
                raise InvalidTopic("Generation > 0 are not supported yet")
        elif len(parts) != 4:
            raise InvalidTopic(
                "Invalid content topic structure. Expected either /<application>/<version>/<topic-name>/"
                "<encoding> or /<gen>/<application>/<version>/<topic-name>/<encoding>"
            )
        for label, part in zip(("application", "version", "topic-name", "encoding"), parts, strict=True):
            if not part:
                raise InvalidTopic(f"content topic is missing its {label}")
        app, version, name, encoding = parts
        return cls(application=app, version=version, name=name, encoding=encoding, generation=generation)

    def __str__(self) -> str:
        """Render as on the wire (a generation of ``00`` in the input renders as ``0``)."""
        prefix = "" if self.generation is None else f"/{self.generation}"
        return f"{prefix}/{self.application}/{self.version}/{self.name}/{self.encoding}"


def v1_topic_to_content_topic(topic: bytes) -> str:
    """Map a 4-byte v1 topic to its bridge content topic ``/waku/1/0x<8 lowercase hex>/rfc26``."""
    if not isinstance(topic, (bytes, bytearray)) or len(topic) != _TOPIC_LENGTH:
        raise InvalidTopic(f"a Waku v1 topic is {_TOPIC_LENGTH} bytes, got {topic!r:.40}")
    return f"/waku/1/0x{bytes(topic).hex()}/rfc26"


def _bridged_topic(text: str) -> bytes | None:
    """The 4 bytes named by a bridgeable content topic, or None if ``text`` is not one."""
    try:
        topic = ContentTopic.parse(text)
    except InvalidTopic:
        return None
    if (topic.application, topic.version, topic.encoding) != ("waku", "1", "rfc26"):
        return None
    digits = topic.name[2:] if topic.name[:2] in ("0x", "0X") else topic.name
    if len(digits) != 2 * _TOPIC_LENGTH or not set(digits) <= _HEX_DIGITS:
        return None
    return bytes.fromhex(digits)


def is_bridgeable(content_topic: str) -> bool:
    """Whether ``content_topic`` names a v1 topic directly (rather than via keccak256)."""
    return _bridged_topic(content_topic) is not None


def content_topic_to_v1_topic(content_topic: str) -> bytes:
    """Map a content topic to the 4-byte v1 topic its messages travel on (rules in the module docstring)."""
    if not isinstance(content_topic, str):
        raise InvalidTopic("content topic must be a string")
    bridged = _bridged_topic(content_topic)
    if bridged is not None:
        return bridged
    try:
        encoded = content_topic.encode("utf-8")
    except UnicodeEncodeError as err:  # lone surrogates: not a string any peer could have sent
        raise InvalidTopic("content topic is not valid unicode") from err
    return keccak256(encoded)[:_TOPIC_LENGTH]
