"""How long a local network of super-peer processes takes to come up: every daemon of the paper
example started and answering its health check (``thinpeer.ops.processes.up``).

Run: python benchmarks/daemon_startup.py [--rounds 3] [--baseline DIR] [--out FILE.json]

``--baseline DIR``: a checkout of another revision (``git worktree add DIR REV``) whose daemons
come up in the same run, alternating with this one's. Eight daemons start at once on this
machine's cores: what each does before it serves (imports, the executor's warm-up, the state
it restores) is what the tests and ``network up`` wait for.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from local_network import alternating, code_of, local_network, write_report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    times: dict[str, list[float]] = {name: [] for name in trees}
    for _, name in alternating(args.rounds, list(trees)):
        with code_of(trees[name]):
            start = time.perf_counter()
            with local_network():
                times[name].append(time.perf_counter() - start)
    report = {"benchmark": "daemon_startup", "rounds": args.rounds}
    for name, values in times.items():
        report[name] = {"seconds": [round(v, 3) for v in values], "median_s": round(statistics.median(values), 3)}
        print(f"{name}: 8 daemons up and healthy in {statistics.median(values):.2f} s (median of "
              f"{len(values)}: {', '.join(f'{v:.2f}' for v in values)})")
    write_report("daemon_startup", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
