"""Query analysis time vs number of atoms, before and after the sparse predicate closure.

Run: python benchmarks/query_analysis.py [--sizes 25,50,100,250,1000,4000] [--cap 60]
                                         [--before-tree DIR | --base ddeb871] [--repeat 3]
                                         [--out FILE.json]

What a super-peer does with a subscription's text before planning it: ``analyze`` (parse,
static checks, satisfiability, properties) and, per input, the matching against the original
stream that every registration starts with (``full_pipeline``: the residual selection, i.e. the
minimal predicate graph). Times are the CPU time of that work (the machine may be shared; wall
time is in the JSON too). Two query forms, both from issue 11 (defect 1):

* chain:    ``$p/v0 >= $p/v1 + 1 and $p/v1 >= $p/v2 + 1 and ...`` (n atoms, n + 1 paths);
* distinct: ``$p/a0 <= 0 and $p/a1 >= 1 and $p/a2 <= 2 and ...`` (n atoms on n distinct paths,
  alternately bounded above and below, so all of them meet at the zero node).

"Before" is the same measurement on another source tree: by default the base commit, exported
with ``git archive`` under /tmp (or ``--before-tree``). Every measurement runs in its own
subprocess, stopped after ``--cap`` seconds of CPU (or ``--mem-cap-gb`` of memory), so a case
that does not finish is reported as "> cap" instead of hanging; once a size of a form exceeds
the cap, larger sizes of that form are not run on that tree. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "ddeb871"

CHILD = r"""
import json, resource, sys, time
form, n = sys.argv[1], int(sys.argv[2])
if form == "chain":
    atoms = " and ".join(f"$p/v{i} >= $p/v{i + 1} + 1" for i in range(n))
else:
    atoms = " and ".join(f"$p/a{i} {'>=' if i % 2 else '<='} {i}" for i in range(n))
text = f'<r>{{ for $p in stream("s")/s/i where {atoms} return <o>{{ $p/v0 }}</o> }}</r>'
from sharing.analysis import analyze
from sharing.matching import full_pipeline
start, cpu = time.perf_counter(), time.process_time()
analysis = analyze(text)
residual = [full_pipeline(inp) for inp in analysis.properties.inputs]
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
kept = sum(len(op.atoms) for m in residual for op in m.residual if hasattr(op, "atoms"))
print(json.dumps({"seconds": cpu, "wall_seconds": seconds, "bytes": len(text.encode()), "residual_atoms": kept,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def export_tree(base: str) -> Path:
    """The base commit's files under /tmp (``git archive``; reused when already there)."""
    sha = subprocess.run(["git", "rev-parse", "--short", base], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"streamglobe-before-{sha}"
    if not (tree / "sharing" / "predicate_graph.py").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def run_once(tree: Path, form: str, n: int, cap: float, mem_gb: float) -> dict:
    def limit() -> None:
        size = int(mem_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        seconds = int(math.ceil(cap))
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))

    try:
        r = subprocess.run([sys.executable, "-c", CHILD, form, str(n)], cwd=tree,
                           env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True,
                           text=True, timeout=10 * cap, preexec_fn=limit)
    except subprocess.TimeoutExpired:  # a very busy machine: wall time, not CPU, ran out
        return {"status": "timeout"}
    if r.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"status": "timeout"}
    if r.returncode != 0:
        status = "memory" if "MemoryError" in r.stderr else "error"
        return {"status": status, "stderr": r.stderr[-500:]}
    return {"status": "ok", **json.loads(r.stdout)}


def measure(tree: Path, form: str, n: int, cap: float, mem_gb: float, repeat: int) -> dict:
    runs = [run_once(tree, form, n, cap, mem_gb)]
    while runs[-1]["status"] == "ok" and len(runs) < repeat:
        runs.append(run_once(tree, form, n, cap, mem_gb))
    if runs[-1]["status"] != "ok":
        return runs[-1]
    return {**runs[0], "seconds": statistics.median(r["seconds"] for r in runs),
            "wall_seconds": statistics.median(r["wall_seconds"] for r in runs),
            "runs": [round(r["seconds"], 4) for r in runs],
            "peak_mb": max(r["peak_mb"] for r in runs)}


def shown(result: dict | None, cap: float, mem_gb: float) -> str:
    if result is None:
        return f"> {cap:g} s*"
    if result["status"] == "ok":
        return f"{result['seconds']:.4f} s"
    if result["status"] == "timeout":
        return f"> {cap:g} s"
    if result["status"] == "memory":
        return f"> {mem_gb:g} GB"
    return "error"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="25,50,100,250,1000,4000")
    ap.add_argument("--forms", default="chain,distinct")
    ap.add_argument("--cap", type=float, default=60.0, help="CPU seconds per measurement")
    ap.add_argument("--mem-cap-gb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (median); 1 for before")
    ap.add_argument("--before-tree", type=Path)
    ap.add_argument("--base", default=DEFAULT_BASE, help="commit exported as the before tree")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "query_analysis.json")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    forms = args.forms.split(",")
    before_tree = args.before_tree or export_tree(args.base)
    trees = {"before": before_tree, "after": ROOT}
    print(f"before: {before_tree}\nafter:  {ROOT}\nCPU seconds of analyze + full_pipeline; cap "
          f"{args.cap:g} s, {args.mem_cap_gb:g} GB per measurement; * = not run, a smaller size "
          "already exceeded the cap\n", flush=True)
    rows = []
    header = f"{'form':9s} {'atoms':>6s} {'bytes':>8s} {'before':>12s} {'after':>12s} {'speed-up':>9s} {'after MB':>9s}"
    print(header + "\n" + "-" * len(header), flush=True)
    for form in forms:
        given_up = {name: False for name in trees}
        for n in sizes:
            row: dict = {"form": form, "atoms": n}
            for name, tree in trees.items():
                if given_up[name]:
                    row[name] = None
                    continue
                row[name] = measure(tree, form, n, args.cap, args.mem_cap_gb,
                                    1 if name == "before" else args.repeat)
                given_up[name] = row[name]["status"] != "ok"
            before, after = row["before"], row["after"]
            size = next((r["bytes"] for r in (after, before) if r and r["status"] == "ok"), 0)
            speedup = ""
            if after and after["status"] == "ok":
                if before and before["status"] == "ok":
                    speedup = f"{before['seconds'] / after['seconds']:.0f}x"
                else:
                    speedup = f"> {args.cap / after['seconds']:.0f}x"
            print(f"{form:9s} {n:6d} {size:8d} {shown(before, args.cap, args.mem_cap_gb):>12s} "
                  f"{shown(after, args.cap, args.mem_cap_gb):>12s} {speedup:>9s} "
                  f"{(after or {}).get('peak_mb', 0):9.0f}", flush=True)
            rows.append({**row, "bytes": size, "speedup": speedup})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"before_tree": str(before_tree), "after_tree": str(ROOT),
                                    "cap_s": args.cap, "mem_cap_gb": args.mem_cap_gb,
                                    "rows": rows}, indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
