"""The Messaging API's persistence: leases, the send outbox, message records, subscriptions and events
(docs/messaging-store.md).

- :mod:`~msgstore.protocol` — ``MsgStore`` and its parts ``LeaseStore``, ``OutboxStore``, ``RecordStore``;
- :mod:`~msgstore.types`, :mod:`~msgstore.errors` — domain values and errors (no protos, no drivers);
- :mod:`~msgstore.paging`, :mod:`~msgstore.sharding`, :mod:`~msgstore.sequencing`,
  :mod:`~msgstore.allocation`, :mod:`~msgstore.replay`, :mod:`~msgstore.codec` — the backend-neutral rules;
- :mod:`~msgstore.config`, :mod:`~msgstore.settings` — ``StoreConfig`` (``MSGSTORE_*``) and what it sets;
- :mod:`~msgstore.factory` — ``create_store(config)`` / ``open_store(config)``;
- :mod:`msgstore.sqlite`, :mod:`msgstore.cassandra` — the backends, reached through the factory.

The send and subscription services use it; this ``__init__`` imports nothing.
"""
