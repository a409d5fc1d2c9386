"""The archive service: the gRPC front of the envelope archive (SQLite embedded or Cassandra)."""
