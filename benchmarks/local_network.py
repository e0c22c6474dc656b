"""Shared by the network benchmarks: a topology of super-peer processes on free loopback ports."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from thinpeer.credentials import CA_ENV, TOKEN_ENV  # noqa: E402
from thinpeer.ops.processes import up  # noqa: E402
from thinpeer.ops.ports import with_free_ports  # noqa: E402
from thinpeer.ops.topologies import shipped_topology  # noqa: E402


@contextmanager
def local_network(topology: str = "paper-example", serve_args: tuple[str, ...] = (), secure: bool = False):
    """``secure``: TLS and tokens; the clients the benchmark makes meanwhile use the network's
    admin credentials (through ``STREAMGLOBE_CA`` / ``STREAMGLOBE_TOKEN``)."""
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        path = with_free_ports(shipped_topology(topology), Path(tmp) / f"{topology}.toml")
        network = up(path, state_dir=Path(tmp) / "state", serve_args=serve_args, secure=secure)
        saved = {k: os.environ.get(k) for k in (CA_ENV, TOKEN_ENV)}
        if secure:
            os.environ[CA_ENV] = str(Path(tmp) / "state" / "tls" / "ca.pem")
            os.environ[TOKEN_ENV] = network.credentials.token or ""
        try:
            yield network
        finally:
            network.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@contextmanager
def code_of(tree: Path | None):
    """The super-peers started meanwhile run the code in ``tree`` (None: this checkout's). They
    start as ``python -m`` in the working directory, which Python puts before ``PYTHONPATH``:
    both name the tree (before, a baseline's daemons ran the code of wherever the benchmark was
    started from — this checkout's, so comparisons compared it with itself)."""
    root = (tree or ROOT).resolve()
    saved, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
    os.environ["PYTHONPATH"] = str(root)
    os.chdir(root)
    try:
        yield
    finally:
        os.chdir(cwd)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def alternating(rounds: int, modes: list[str]):
    """(round, mode) for every round and mode, which mode goes first alternating per round: a
    comparison in the same run, with the machine's drift shared out evenly."""
    for k in range(rounds):
        for mode in (modes if k % 2 == 0 else list(reversed(modes))):
            yield k, mode


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def write_report(name: str, report: dict, out: Path | None) -> None:
    out = out or ROOT / "benchmarks" / "results" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"wrote {out}")
