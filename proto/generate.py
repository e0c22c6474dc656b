"""Generate the Python gRPC modules from ``streamglobe.proto`` (the only way they are made).

Run: python proto/generate.py   — writes proto/streamglobe_pb2.py, _pb2_grpc.py and _pb2.pyi.
The generated files are checked in and never edited by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path

from grpc_tools import protoc


def main() -> int:
    here = Path(__file__).resolve().parent
    root = here.parent
    args = ["grpc_tools.protoc", f"-I{root}", f"--python_out={root}", f"--pyi_out={root}",
            f"--grpc_python_out={root}", str(here / "streamglobe.proto")]
    code = protoc.main(args)
    if code != 0:
        print("protoc failed", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
