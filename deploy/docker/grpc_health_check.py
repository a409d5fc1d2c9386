"""Check that every given gRPC server reports SERVING over ``grpc.health.v1`` (the chart's helm test hook).

    python grpc_health_check.py [--timeout SECONDS] [--attempts N] TARGET=SERVICE [TARGET=SERVICE ...]

``TARGET`` is a gRPC target (``host:port``); ``SERVICE`` the full service name sent in the
``HealthCheckRequest`` (``mailmesh.archive.v1.ArchiveService``; empty = the whole server). Each target gets
``--attempts`` tries, one ``--timeout`` deadline each, a second apart: a pod that has just turned Ready may
still be opening its store. Exit 0 when every one is SERVING; otherwise exit 1 with one line per failure.
The image's own Python and grpcio-health-checking, so the check needs nothing the services do not ship.
"""

from __future__ import annotations

import argparse
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def parse_check(raw: str) -> tuple[str, str]:
    """``host:port=service`` → (target, service)."""
    target, sep, service = raw.partition("=")
    if not sep or not target:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected TARGET=SERVICE")
    return target, service


def check(target: str, service: str, timeout: float) -> str:
    """The serving status name of ``service`` at ``target``, or the RPC error that prevented the answer."""
    with grpc.insecure_channel(target) as channel:
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
    failed = 0
    for target, service in args.checks:
        status = ""
        for attempt in range(args.attempts):
            if attempt:
                time.sleep(1.0)
            status = check(target, service, args.timeout)
            if status == "SERVING":
                break
        ok = status == "SERVING"
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {target} {service or '(server)'}: {status}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
