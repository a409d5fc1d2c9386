"""Mailmesh benchmarks (`make bench`): throughput and latency targets live here, not in timed tests."""
