"""Check that every given gRPC server reports SERVING over ``grpc.health.v1`` (the chart's helm test hook).

    python grpc_health_check.py [--timeout SECONDS] [--attempts N] TARGET=SERVICE [TARGET=SERVICE ...]

With mutual TLS between the services (docs/security.md "Mutual TLS") the check presents the certificate
``MAILMESH_TLS_CERT``/``MAILMESH_TLS_KEY`` and trusts ``MAILMESH_TLS_CA`` — the same variables and mounted
Secret as the services, so the hook pod reaches the TLS gRPC ports as any service does;
``MAILMESH_TLS_SERVER_NAME`` overrides the name checked in server certificates. grpc.health.v1 needs no
bearer token, so the token Secret is not mounted.

``TARGET`` is a gRPC target (``host:port``); ``SERVICE`` the full service name sent in the
``HealthCheckRequest`` (``mailmesh.archive.v1.ArchiveService``; empty = the whole server). Each target gets
``--attempts`` tries, one ``--timeout`` deadline each, a second apart: a pod that has just turned Ready may
still be opening its store. Exit 0 when every one is SERVING; otherwise exit 1 with one line per failure.
The image's own Python and grpcio-health-checking, so the check needs nothing the services do not ship.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def parse_check(raw: str) -> tuple[str, str]:
    """``host:port=service`` → (target, service)."""
    target, sep, service = raw.partition("=")
    if not sep or not target:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected TARGET=SERVICE")
    return target, service


class Tls:
    """Mutual-TLS credentials from the ``MAILMESH_TLS_*`` variables (None: plaintext)."""

    def __init__(self, credentials: grpc.ChannelCredentials, server_name: str) -> None:
        self.credentials = credentials
        self.server_name = server_name

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Tls | None:
        """All three files or none (as the services require); SystemExit naming what is missing."""
        files = {
            var: env.get(var, "").strip()
            for var in ("MAILMESH_TLS_CERT", "MAILMESH_TLS_KEY", "MAILMESH_TLS_CA")
        }
        if not any(files.values()):
            return None
        missing = [var for var, path in files.items() if not path]
        if missing:
            raise SystemExit(f"mutual TLS needs {', '.join(missing)} too")
        cert, key, ca = (Path(path).read_bytes() for path in files.values())
        credentials = grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=cert
        )
        return cls(credentials, env.get("MAILMESH_TLS_SERVER_NAME", "").strip())

    def channel(self, target: str) -> grpc.Channel:
        """A TLS channel to ``target`` (checking ``server_name`` in its certificate when set)."""
        options = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return grpc.secure_channel(target, self.credentials, options=options)


def check(target: str, service: str, timeout: float, tls: Tls | None = None) -> str:
    """The serving status name of ``service`` at ``target``, or the RPC error that prevented the answer."""
    with tls.channel(target) if tls else grpc.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as err:
            return f"{err.code().name}: {err.details()}"  # type: ignore[attr-defined]
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def main(argv: list[str] | None = None) -> int:
    """Check every TARGET=SERVICE; print one line each; 0 when all are SERVING."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="deadline of one Check call, seconds")
    parser.add_argument("--attempts", type=int, default=30, help="tries per target before it fails")
    parser.add_argument("checks", nargs="+", type=parse_check, metavar="TARGET=SERVICE")
    args = parser.parse_args(argv)
    tls = Tls.from_env(dict(os.environ))
    failed = 0
    for target, service in args.checks:
        status = ""
        for attempt in range(args.attempts):
            if attempt:
                time.sleep(1.0)
            status = check(target, service, args.timeout, tls)
            if status == "SERVING":
                break
        ok = status == "SERVING"
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {target} {service or '(server)'}: {status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
