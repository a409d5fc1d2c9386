"""The send service: the Messaging API's Send API as a durable, sharded outbox with retries."""
