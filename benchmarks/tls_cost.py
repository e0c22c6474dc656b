"""What TLS and tokens cost: forwarding throughput and registration latency, secure and plaintext,
in the same run.

Run: python benchmarks/tls_cost.py [--photons 100000] [--rounds 2] [--out FILE.json]

Each round starts the paper's example network twice — secure (TLS for thin peers with a token
per call, mutual TLS between super-peers: the ``network up`` default) and ``--insecure`` —
alternating which goes first. In each: the forwarding benchmark (photons published at SP4 in
1,000-item batches; SP5 forwards every one to SP1 and SP7; photons/s through SP5), then the
registration latency of the 25-query paper-example workload, twice: over clients connected
beforehand (as a program using the client library keeps its connection: TLS's cost per
registration) and over a new client per call (each call also sets up a connection, and with TLS
its handshake). The report gives all three and TLS's cost (throughput lost, latency added), per
round and as medians.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from local_network import alternating, local_network, write_report
from network_measures import forwarding, registration

MODES = {"tls": True, "plaintext": False}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for k, mode in alternating(args.rounds, list(MODES)):
        with local_network(secure=MODES[mode]) as network:
            forwarded = forwarding(network.addresses, args.photons)
        with local_network(secure=MODES[mode]) as network:
            registered = registration(network.addresses, connected=True)
        with local_network(secure=MODES[mode]) as network:
            new_clients = registration(network.addresses)
        runs[mode].append({"forwarding": forwarded, "registration": registered,
                           "registration_new_clients": new_clients})
        print(f"round {k + 1} {mode:9s}: {forwarded['photons_per_s_through_sp5']:,} photons/s through SP5; "
              f"registration median {registered['median_ms']} ms, p99 {registered['p99_ms']} ms "
              f"(a new client per call: {new_clients['median_ms']} ms, {new_clients['p99_ms']} ms)", flush=True)
    rate = {m: statistics.median(r["forwarding"]["photons_per_s_through_sp5"] for r in rs) for m, rs in runs.items()}
    latency = {m: statistics.median(r["registration"]["median_ms"] for r in rs) for m, rs in runs.items()}
    fresh = {m: statistics.median(r["registration_new_clients"]["median_ms"] for r in rs) for m, rs in runs.items()}
    cost = 1 - rate["tls"] / rate["plaintext"]
    added = latency["tls"] / latency["plaintext"] - 1
    report = {"benchmark": "TLS and tokens vs plaintext: forwarding and registration",
              "runs": runs, "photons_per_s_median": rate, "registration_median_ms": latency,
              "registration_new_clients_median_ms": fresh,
              "tls_throughput_cost": round(cost, 3), "tls_registration_cost": round(added, 3),
              "tls_registration_added_ms": round(latency["tls"] - latency["plaintext"], 1),
              "tls_connection_added_ms": round(fresh["tls"] - fresh["plaintext"] - (latency["tls"] - latency["plaintext"]), 1)}
    print(f"median photons/s through SP5: TLS {rate['tls']:,.0f}, plaintext {rate['plaintext']:,.0f}: "
          f"TLS costs {100 * cost:.1f}% of forwarding throughput; registration median over a connected "
          f"client {latency['tls']:.2f} ms vs {latency['plaintext']:.2f} ms ({100 * added:+.1f}%), over a new "
          f"client per call {fresh['tls']:.2f} ms vs {fresh['plaintext']:.2f} ms (the connection's set-up)")
    write_report("tls_cost", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
