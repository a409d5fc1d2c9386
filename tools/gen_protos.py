"""Generate the Python protobuf/gRPC code for every file under protos/ into one package tree.

This is the only place generated code comes from (`make protos`); services import it as
``mailmesh.<domain>.v1.<domain>_pb2``. The output directory is rebuilt from scratch each time so a
deleted .proto never leaves a stale module behind.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import grpc_tools
from grpc_tools import protoc


def generate(protos: Path, out: Path) -> None:
    """Run protoc (python, grpc, mypy stubs) over every .proto below ``protos`` into ``out``."""
    files = sorted(str(p) for p in protos.rglob("*.proto"))
    if not files:
        raise SystemExit(f"no .proto files under {protos}")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    bindir = Path(sys.executable).parent  # mypy-protobuf's plugins live beside the venv's python
    args = [
        "grpc_tools.protoc",
        f"-I{protos}",
        f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={bindir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bindir / 'protoc-gen-mypy_grpc'}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *files,
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    # Regular packages (not namespace packages) so mypy and importers resolve them the same way.
    for directory in [out, *(d for d in out.rglob("*") if d.is_dir())]:
        if directory != out:
            (directory / "__init__.py").touch()
    (out / "mailmesh" / "py.typed").touch()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--protos", type=Path, default=Path("protos"))
    parser.add_argument("--out", type=Path, default=Path("gen/python"))
    ns = parser.parse_args(argv)
    generate(ns.protos, ns.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
