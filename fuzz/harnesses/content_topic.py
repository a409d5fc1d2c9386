"""Content topics from Messaging API clients (wakucodec.contenttopic; 23/WAKU2-TOPICS, protocol-notes §11.3).

The input, decoded as UTF-8 (invalid bytes become lone surrogates, as a careless client library could pass
them), is parsed and mapped to its 4-byte v1 topic. Contract: ``parse`` raises only InvalidTopic and its
result renders to a string that parses the same; the mapping raises only InvalidTopic (lone surrogates)
and gives 4 bytes; a bridgeable topic maps to the bytes it names and back.
"""

from __future__ import annotations

import atheris

from fuzz.harnesses import INSTRUMENTED

with atheris.instrument_imports(include=INSTRUMENTED):
    from fuzz.support import fuzz_main
    from wakucodec.contenttopic import (
        ContentTopic,
        content_topic_to_v1_topic,
        is_bridgeable,
        v1_topic_to_content_topic,
    )
    from wakucodec.errors import InvalidTopic


def test_one_input(data: bytes) -> None:
    """Parse and map ``data`` as a content topic; check the contract above."""
    text = data.decode("utf-8", errors="surrogateescape")
    try:
        topic = ContentTopic.parse(text)
    except InvalidTopic:
        pass
    else:
        assert ContentTopic.parse(str(topic)) == topic
    try:
        v1 = content_topic_to_v1_topic(text)
    except InvalidTopic:
        assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)
        return
    assert len(v1) == 4
    if is_bridgeable(text):
        assert content_topic_to_v1_topic(v1_topic_to_content_topic(v1)) == v1
        assert v1.hex() in text.lower()


if __name__ == "__main__":
    fuzz_main(test_one_input)
