"""Regenerate the committed Python modules for tfprof/schema/proto/*.proto.

Usage: python tools/gen_protos.py [--out DIR]

Without --out the modules are written next to the .proto files (what is committed).
tests/test_protos.py runs this with --out into a temporary folder and checks that the
result equals the committed modules byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "tfprof" / "schema" / "proto"


def generate(out: Path) -> list[Path]:
    """Run protoc (from grpcio-tools) over every .proto file; return the modules written."""
    from grpc_tools import protoc  # dev dependency only

    protos = sorted(p.relative_to(ROOT).as_posix() for p in PROTO_DIR.glob("*.proto"))
    out.mkdir(parents=True, exist_ok=True)
    rc = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out}", *protos])
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")
    return sorted((out / "tfprof" / "schema" / "proto").glob("*_pb2.py")) if out != ROOT else sorted(
        PROTO_DIR.glob("*_pb2.py")
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT, help="root folder to write tfprof/schema/proto/ into")
    args = ap.parse_args(argv)
    for path in generate(args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
