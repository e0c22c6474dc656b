"""A process that hosts one Spark executor, for the kill-and-restart test.

    python spark_host.py CHECKPOINT INPUT.txt OUTPUT.tsv

Installs the test chains (a restarted host finds them in the checkpoint), feeds the input's
items from where the durable feed stopped, appends every delivered output as a line
``stream <TAB> seq <TAB> json(texts) <TAB> end`` and exits when every chain has ended.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from operator_cases import CHAINS  # noqa: E402

from superpeer.executors.spark.executor import SparkExecutor

RESTART_CHAINS = ["select-project", "time-sliding", "count", "count-filter"]


def main() -> int:
    checkpoint, source, sink = sys.argv[1:4]
    items = Path(source).read_text().splitlines()
    out = open(sink, "a")

    def deliver(stream, seq, texts, end):
        out.write(f"{stream}\t{seq}\t{json.dumps(texts)}\t{int(end)}\n")
        out.flush()

    ex = SparkExecutor("host", checkpoint_dir=checkpoint, trigger_ms=100, deliver=deliver)
    ex.start()
    for name in RESTART_CHAINS:
        ex.install(name, tuple(CHAINS[name]), parent="photons")
    while not ex.ready:  # pace the input with the running loop
        time.sleep(0.05)
    at = ex.accepted("photons")
    print(f"resuming input at item {at}", file=sys.stderr, flush=True)
    while at < len(items):
        ex.push("photons", [], items[at:at + 100], at + 100 >= len(items))
        at += 100
        time.sleep(0.05)
    while not (len(ex.state.states) == len(RESTART_CHAINS) and all(s.ended for s in ex.state.states.values())):
        time.sleep(0.1)
    ex.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
