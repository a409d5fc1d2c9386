"""The Waku Messaging API's node-wide vocabulary, shared by the send and subscription services.

MESSAGING-API ("Initial configuration", "Send", "Subscribe") fixes a configuration every part of the API reads
(``mode``, ``clusterId``, ``shards``, ``storeNodes``, ``bootstrapNodes``, ``storeConfirmation``,
``filterConfirmation``, ``confirmContentTopics``) and the rule that a pubsub topic the node does not serve is
refused. Both services must agree on them, so they are declared once here:

- :mod:`msgapi.config` — :class:`~msgapi.config.MessagingConfig`, the ``MSGAPI_*`` variables;
- :mod:`msgapi.topics` — static-sharding pubsub topics (RELAY-SHARDING) and the spec's refusal texts;
- :mod:`msgapi.errors` — the typed errors the services map to gRPC codes (and the gateway to HTTP).

Pure: no gRPC, no generated protos, no storage.
"""
