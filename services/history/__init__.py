"""history-query service: mailserver history semantics (caps, HMAC cursors, batches) over the archive."""
