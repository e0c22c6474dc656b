"""Inline executor throughput (photons/s) on the operator chains of the paper's Queries 1–4.

Run: python benchmarks/inline_executor.py [--photons 200000] [--batch 1000] [--repeat 3] [--out FILE]

Drives the executor through its public interface exactly as a super-peer does: the chain each
query needs from the raw ``photons`` stream (query shipping's operators) is installed, and the
stream's wire texts are pushed in batches as ``Publish``/``Transfer`` deliver them. An executor
that wants parsed values (``wants_text`` false) gets them parsed the way the node parses, and
that parsing is counted: it is work the super-peer does for that executor. Reported per query
alone and for all four chains on one stream, best of ``--repeat`` runs, as wall-clock and CPU
(process time) photons per second; the process is single-threaded, so CPU rate is per core.
The script runs unchanged on older checkouts, to compare before and after in one session.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from lxml import etree

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sharing.analysis import analyze  # noqa: E402
from sharing.matching import full_pipeline  # noqa: E402
from superpeer.executors import make_executor

try:  # moved out of thinpeer by the packaging step of issue 10
    from photons.generator import generate  # noqa: E402
except ImportError:  # older checkouts
    from thinpeer.photon_generator import generate  # noqa: E402

QUERIES = ("q1", "q2", "q3", "q4")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def query_text(name: str) -> str:
    try:
        from importlib import resources

        return (resources.files("sharing") / "data" / "queries" / f"{name}.wxq").read_text()
    except (FileNotFoundError, ModuleNotFoundError):
        return (ROOT / "examples" / "queries" / f"{name}.wxq").read_text()


def chain_of(name: str) -> tuple:
    props = analyze(query_text(name)).properties
    return full_pipeline(props.inputs[0]).residual


def run(chains: dict[str, tuple], texts: list[str], batch: int) -> tuple[float, float, int]:
    delivered = [0]

    def count(stream: str, seq: int, out: list, end: bool) -> None:
        delivered[0] += len(out)

    executor = make_executor("inline", deliver=count)
    executor.start()
    for name, ops in chains.items():
        executor.install(name, ops, parent="photons", parent_kind="items")
    wall, cpu = time.perf_counter(), time.process_time()
    for at in range(0, len(texts), batch):
        chunk = texts[at:at + batch]
        end = at + batch >= len(texts)
        if executor.wants_text:
            executor.push("photons", [], chunk, end)
        else:
            values = [etree.fromstring(t.encode("utf-8"), parser=_PARSER) for t in chunk]
            executor.push("photons", values, chunk, end)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    executor.stop()
    return wall, cpu, delivered[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000, help="items per pushed batch")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label", default="", help="a name for this checkout in the JSON")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "inline_executor.json")
    args = parser.parse_args()

    texts = [p.to_xml() for p in generate(args.photons, seed=args.seed)]
    chains = {name: chain_of(name) for name in QUERIES}
    cases = [(name, {name: chains[name]}) for name in QUERIES] + [("q1-q4", chains)]
    print(f"{args.photons} photons in batches of {args.batch}, best of {args.repeat} runs", flush=True)
    rows = []
    for label, installed in cases:
        best = None
        for _ in range(args.repeat):
            result = run(installed, texts, args.batch)
            if best is None or result[0] < best[0]:
                best = result
        assert best is not None
        wall, cpu, out = best
        row = {"chains": label, "photons_per_s": round(args.photons / wall),
               "photons_per_cpu_s": round(args.photons / max(cpu, 1e-9)), "seconds": round(wall, 3),
               "outputs": out}
        rows.append(row)
        print(f"  {label:6s} {row['photons_per_s']:>10,} photons/s  "
              f"{row['photons_per_cpu_s']:>10,} per CPU-s  ({wall:.2f} s, {out} outputs)", flush=True)
    report = {"benchmark": "inline executor throughput", "label": args.label, "photons": args.photons,
              "batch": args.batch, "python": platform.python_version(), "machine": platform.machine(),
              "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
