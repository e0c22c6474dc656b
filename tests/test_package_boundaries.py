"""DESIGN §2 boundaries, checked on the source: the pure packages import nothing that does I/O
with the outside world, and nothing above them; ``photons`` and ``streamglobe`` (units) sit at
the bottom."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Top-level modules each package must never import (directly, or lazily inside a function).
FORBIDDEN = {
    "wxquery": {"grpc", "pyspark", "threading", "socket", "matplotlib", "rich", "superpeer",
                "thinpeer", "sharing", "photons", "proto"},
    "sharing": {"grpc", "pyspark", "threading", "socket", "matplotlib", "rich", "superpeer",
                "thinpeer", "proto"},
    "streamglobe": {"grpc", "pyspark", "threading", "socket", "matplotlib", "rich", "superpeer",
                    "thinpeer", "sharing", "wxquery", "photons", "proto", "os", "io", "subprocess",
                    "pathlib"},
    "photons": {"grpc", "pyspark", "threading", "socket", "matplotlib", "rich", "superpeer",
                "thinpeer", "sharing", "wxquery", "proto"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_stay_within_its_layer(package: str):
    offending = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_modules(path) & FORBIDDEN[package]
        if bad:
            offending[str(path.relative_to(ROOT))] = sorted(bad)
    assert not offending, offending


# The thin peer's client library (what a program that publishes or subscribes imports) is the
# package less its command line (``cli/``), its operations tooling (``ops/``: launchers, keys,
# the web view…) and the files it ships for containers (``data/``): it must not need the
# super-peer, Spark or the planner.
THIN_PEER_TOOLING = ("cli", "ops", "data")
CLIENT_LIBRARY_FORBIDDEN = {"superpeer", "pyspark", "sharing"}


def client_library_modules() -> list[Path]:
    return [path for path in sorted((ROOT / "thinpeer").rglob("*.py"))
            if path.relative_to(ROOT / "thinpeer").parts[0] not in THIN_PEER_TOOLING]


def test_the_thin_peer_client_library_needs_no_superpeer_spark_or_sharing():
    modules = client_library_modules()
    assert {p.name for p in modules} >= {"__init__.py", "client.py", "credentials.py", "approximation.py"}
    offending = {str(p.relative_to(ROOT)): sorted(imported_modules(p) & CLIENT_LIBRARY_FORBIDDEN) for p in modules}
    assert not {p: bad for p, bad in offending.items() if bad}
