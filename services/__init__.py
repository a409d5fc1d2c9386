"""Mailmesh services: one package per service; each reaches the others only through generated gRPC stubs."""
