"""Shared by the network benchmarks: a topology of super-peer processes on free loopback ports."""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from thinpeer.network import up, with_free_ports  # noqa: E402
from thinpeer.topologies import shipped_topology  # noqa: E402


@contextmanager
def local_network(topology: str = "paper-example", serve_args: tuple[str, ...] = ()):
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        path = with_free_ports(shipped_topology(topology), Path(tmp) / f"{topology}.toml")
        network = up(path, state_dir=Path(tmp) / "state", serve_args=serve_args)
        try:
            yield network
        finally:
            network.stop()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def write_report(name: str, report: dict, out: Path | None) -> None:
    out = out or ROOT / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
