"""CPU to print and read a lookup answer: a peer's streams of an input, as every registration
and re-optimisation round asks the peers on its search for them.

Run: python benchmarks/lookup_answers.py [--queries 200] [--rounds 200] [--out FILE.json]

The streams are those a planned network holds (``random`` scenario, planned with sharing); the
answer of the peer holding the most streams is printed and read ``--rounds`` times, in the same
run, whole (every stream printed and read as one JSON document, as before) and with each
stream's fixed part printed and read once (``superpeer.rpc.stream_wire``, warm: the steady
state of a peer answering the same streams again and again).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_network import write_report  # noqa: E402
from sharing import scenarios  # noqa: E402
from sharing.planner import Strategy  # noqa: E402
from sharing.serialization import stream_from_json, stream_to_json  # noqa: E402
from sharing.simulator import Simulation  # noqa: E402
from superpeer.rpc.stream_wire import StaticParses, StaticTexts  # noqa: E402


def per_round_ms(fn, rounds: int) -> float:
    start = time.process_time()
    for _ in range(rounds):
        fn()
    return (time.process_time() - start) / rounds * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", type=int, default=12)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scenario = scenarios.random_scenario(args.peers, args.queries, seed=1)
    sim = Simulation(scenario, photons=2000, verify=False)
    sim._push = lambda state, result: None  # type: ignore[method-assign]
    state = sim.run(Strategy.SHARING).state
    holders = Counter(p for s in state.streams.values() for p in s.route)
    peer, _ = holders.most_common(1)[0]
    streams = [s for s in state.streams.values() if peer in s.route]
    texts, parses = StaticTexts(), StaticParses()
    whole = json.dumps([stream_to_json(s) for s in streams])
    split = texts.answer(streams)
    parses.streams(split)
    assert [s.id for s in parses.streams(split)] == [s.id for s in streams]
    row = {"streams": len(streams), "answer_bytes": {"whole": len(whole), "split": len(split)},
           "print_ms": {"whole": per_round_ms(lambda: json.dumps([stream_to_json(s) for s in streams]), args.rounds),
                        "split": per_round_ms(lambda: texts.answer(streams), args.rounds)},
           "read_ms": {"whole": per_round_ms(lambda: [stream_from_json(j) for j in json.loads(whole)], args.rounds),
                       "split": per_round_ms(lambda: parses.streams(split), args.rounds)}}
    for what in ("print_ms", "read_ms"):
        row[what] = {k: round(v, 3) for k, v in row[what].items()}
        row[what]["speed-up"] = round(row[what]["whole"] / row[what]["split"], 1)
    print(f"an answer of {row['streams']} streams ({peer}): printed in {row['print_ms']['whole']} ms whole, "
          f"{row['print_ms']['split']} ms split ({row['print_ms']['speed-up']}×); read in "
          f"{row['read_ms']['whole']} ms whole, {row['read_ms']['split']} ms split ({row['read_ms']['speed-up']}×); "
          f"{row['answer_bytes']['whole']:,} vs {row['answer_bytes']['split']:,} bytes")
    write_report("lookup_answers", row, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
