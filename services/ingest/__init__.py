"""Ingest service: validates Waku v1 envelopes as a status-go mailserver does and archives them in batches."""
