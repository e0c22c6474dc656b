"""Items per second one super-peer forwards and duplicates, on loopback — durable and in memory.

Run: python benchmarks/network_forwarding.py [--photons 200000] [--rounds 2] [--baseline DIR] [--out FILE.json]

In the same run, the physical limits (``physical_limits``): a gRPC echo of the same batches
between two processes and lxml's parse rate of the same photons, and the ratios to them.

Photons are published at SP4; two subscriptions that take the whole stream sit at SP1 and SP7,
so SP5 receives every photon once and sends it twice (SP5→SP1 and SP5→SP7), without parsing it.
The rate is photons per second through SP5, from the first to the last photon on both output links
(SP5's own link counters). SP5's CPU per photon is given whole and without its idle cost
(heartbeats, the benchmark's status polls), measured for 2 s before the photons come; and each
part of the pipeline's CPU per photon (the publisher's thread, SP4, SP5, SP1, SP7, idle cost
included): where the pipeline's cost is.

The cost of durability: every round runs the network twice, with a state directory per peer
(the default: SP4 logs every photon before it acknowledges the batch, SP1 and SP7 store every
result) and with ``--in-memory``, alternating which goes first; the report gives both rates and
the slowdown of the durable one, per round and overall (median). ``--baseline DIR``: a checkout
of another revision (``git worktree add DIR REV``) runs the same rounds, alternating with this
one's, and its rates are reported beside these.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from local_network import alternating, code_of, local_network, write_report
from network_measures import forwarding
from physical_limits import describe, measure, photons

MODES = {"durable": (), "in_memory": ("--in-memory",)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    baseline: dict[str, list[dict]] = {mode: [] for mode in MODES}
    keys = [(False, m) for m in MODES] + ([(True, m) for m in MODES] if args.baseline else [])
    for k, (old, mode) in alternating(args.rounds, keys):
        with code_of(args.baseline if old else None), local_network(serve_args=MODES[mode]) as network:
            (baseline if old else runs)[mode].append(forwarding(network.addresses, args.photons))
        r = (baseline if old else runs)[mode][-1]
        print(f"round {k + 1} {'baseline ' if old else ''}{mode:9s}: SP5 forwarded and duplicated {r['photons']} photons in "
              f"{r['seconds']:.2f} s: {r['photons_per_s_through_sp5']:,} photons/s "
              f"({r['sp5_photons_per_cpu_second']:,} per SP5 CPU-second; "
              f"{r['sp5_photons_per_forwarding_cpu_second']:,} without its idle cost, "
              f"{r['sp5_idle_cpu_per_s']:.3f} CPU-s/s); CPU µs per photon: "
              + ", ".join(f"{p} {us}" for p, us in r["cpu_us_per_photon"].items()), flush=True)
    rate = {mode: statistics.median(r["photons_per_s_through_sp5"] for r in rs) for mode, rs in runs.items()}
    slowdown = 1 - rate["durable"] / rate["in_memory"]
    limits = measure(photons(args.photons))
    echo, parse = limits["grpc_echo"]["unary_items_per_s"], limits["lxml"]["batch_parse_items_per_cpu_s"]
    per_cpu = statistics.median(r["sp5_photons_per_cpu_second"] for r in runs["in_memory"])
    forwarding_cpu = statistics.median(r["sp5_photons_per_forwarding_cpu_second"] for r in runs["in_memory"])
    ratios = {"in_memory_vs_grpc_echo": round(rate["in_memory"] / echo, 3),
              "sp5_per_cpu_second_vs_lxml_batch_parse": round(per_cpu / parse, 3),
              "sp5_per_forwarding_cpu_second_vs_lxml_batch_parse": round(forwarding_cpu / parse, 3)}
    report = {"benchmark": "forwarding and duplication at one super-peer, durable and in memory",
              "runs": runs, "photons_per_s_median": rate, "durable_slowdown": round(slowdown, 3),
              "limits": limits, "ratios": ratios}
    if args.baseline:
        old_rate = {mode: statistics.median(r["photons_per_s_through_sp5"] for r in rs) for mode, rs in baseline.items()}
        report["baseline"] = {"runs": baseline, "photons_per_s_median": old_rate,
                              "durable_slowdown": round(1 - old_rate["durable"] / old_rate["in_memory"], 3)}
        print(f"baseline, same run: durable {old_rate['durable']:,.0f}, in memory {old_rate['in_memory']:,.0f} "
              f"photons/s: durability costs {100 * report['baseline']['durable_slowdown']:.1f}%")
    print(f"median photons/s through SP5: durable {rate['durable']:,.0f}, in memory {rate['in_memory']:,.0f}: "
          f"durability costs {100 * slowdown:.1f}% (whole pipeline on this machine's cores: publisher, "
          f"SP4, SP5 and two subscribers)")
    print(describe(limits))
    print(f"in memory, the pipeline moves {100 * ratios['in_memory_vs_grpc_echo']:.1f}% of what a gRPC echo of the "
          f"same batches moves; SP5 forwards {ratios['sp5_per_cpu_second_vs_lxml_batch_parse']:.2f}× as many "
          f"photons per CPU-second as lxml parses ({ratios['sp5_per_forwarding_cpu_second_vs_lxml_batch_parse']:.2f}× "
          f"without its idle cost: {forwarding_cpu:,.0f} photons per forwarding CPU-second)")
    write_report("network_forwarding", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
