"""Installed size: a thin peer (the base install) against everything (``[all]``), in fresh venvs.

Run: python benchmarks/install_size.py [--out FILE]

Each is a plain venv (pip, setuptools and the package's dependencies, nothing else), filled by
``pip install`` of this checkout (dependencies through pip's cache); the size is the bytes of
every file under the venv. The numbers say what ``pip install streamglobe`` costs a user who only
publishes and subscribes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "dist", "tests", "benchmarks",
                              ".hypothesis", ".pytest_cache", "out")


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def installed(spec: str, where: Path) -> int:
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    empty = tree_bytes(venv)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    spec], check=True, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return tree_bytes(venv) - empty


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "install_size.json")
    args = parser.parse_args()
    sizes = {}
    with tempfile.TemporaryDirectory(prefix="sg-size-") as tmp:
        source = Path(tmp) / "source"
        shutil.copytree(ROOT, source, ignore=SKIP, symlinks=True)
        for label, spec in (("thin peer (base)", str(source)), ("all", f"{source}[all]")):
            where = Path(tmp) / label.split()[0]
            where.mkdir()
            sizes[label] = installed(spec, where)
            print(f"{label:18s} {sizes[label] / 2**20:8.0f} MiB", flush=True)
    ratio = sizes["all"] / sizes["thin peer (base)"]
    print(f"the thin peer is {1 / ratio:.0%} of everything ({ratio:.1f}x smaller)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"benchmark": "installed size", "bytes": sizes, "ratio": round(ratio, 2)},
                                   indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
