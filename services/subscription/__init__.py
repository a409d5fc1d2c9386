"""The subscription service: subscriptions, message records and the Messaging API event source."""
