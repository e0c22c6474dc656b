"""Bytes on the links saved when subscriptions over the same past share a running replay
(issue 15), against each taking a replay of its own, in the same run.

Run: python benchmarks/shared_replays.py [--old 20000] [--recent 4000] [--rate 2000] [--rounds 1] [--out FILE.json]

On the paper-example network (every super-peer with `--replay-rate RATE`), SP4 registers
"photons" and gets `--old` photons, then two seconds later `--recent` more. SP1 subscribes to
every photon `--from-start`: SP4 replays the log to it over SP5 at RATE items/s. While that
replay runs, SP0, SP5, SP6 and SP7 subscribe to every photon `--since` the recent ones. In mode
`sharing` (the default strategy) each takes a new copy of the running replay at a super-peer of
its route; in mode `own-replays` (`--strategy data-shipping`: never shares) each gets a replay of
its own from SP4. Then the rest of the stream is published live and it is closed. Mode
`first-only` runs SP1's subscription alone: what the later ones add is a mode's bytes minus its.

Per mode: the bytes every link carried from the first subscription until every subscription's
results had ended (the super-peers' `links` counters; only this workload runs), how many of the
subscriptions shared a replay, the seconds until the last result, and each subscription's result
count (both modes must agree: the same photons reached each subscriber).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

from local_network import alternating, local_network, write_report
from network_measures import WHOLE

from photons.generator import generate
from thinpeer.client import SuperPeerClient

LATER = ("SP0", "SP5", "SP6", "SP7")
LIVE = 1000  # photons published after the subscriptions
STRATEGY = {"sharing": "sharing", "own-replays": "data-shipping", "first-only": "sharing"}
STREAM_RATE = 500.0  # photons/s the stream is registered with (the planner's estimate)


def link_bytes(address: dict[str, str]) -> dict[str, int]:
    """Bytes each directed link has carried so far, from every super-peer's status."""
    out: dict[str, int] = {}
    for a in address.values():
        with SuperPeerClient(a) as client:
            out.update({link: c["bytes"] for link, c in client.status()["links"].items()})
    return out


def read_all(client: SuperPeerClient, sid: str, counts: dict[str, int], done: dict[str, float],
             started: float) -> None:
    n = 0
    for batch in client.result_batches(sid, 0, idle_timeout=600):
        n += len(batch.items)
    counts[sid], done[sid] = n, time.perf_counter() - started


def one_round(old: int, recent: int, rate: float, mode: str) -> dict:
    items = [p.to_xml() for p in generate(old + recent + LIVE, 11)]
    with local_network(serve_args=("--replay-rate", str(rate))) as network:
        address = network.addresses
        source = SuperPeerClient(address["SP4"])
        source.register_stream("photons", "photons", "photon", rate=STREAM_RATE)
        source.publish("photons", items[:old])
        time.sleep(2.0)  # the input: an old part, then a recent one (not a wait for a condition)
        recent_at = time.time()
        source.publish("photons", items[old:old + recent])
        before = link_bytes(address)
        started = time.perf_counter()
        first = SuperPeerClient(address["SP1"])
        subs = {"SP1": (first, first.subscribe(WHOLE, strategy=STRATEGY[mode], from_start=True).subscription)}
        for peer in (LATER if mode != "first-only" else ()):
            client = SuperPeerClient(address[peer])
            since = time.time() - recent_at + 1.0  # from the middle of the pause: the recent photons
            subs[peer] = (client, client.subscribe(WHOLE, strategy=STRATEGY[mode], since_s=since).subscription)
        shared = []
        for peer, (client, sid) in subs.items():
            [part] = client.status()["subscriptions"][sid]["plan"]["parts"]
            if part["reused_stream"] != "photons":
                shared.append(peer)
        counts: dict[str, int] = {}
        done: dict[str, float] = {}
        readers = [threading.Thread(target=read_all, args=(c, sid, counts, done, started), daemon=True)
                   for c, sid in subs.values()]
        for r in readers:
            r.start()
        source.publish("photons", items[old + recent:])
        source.close_stream("photons")
        for r in readers:
            r.join(900)
        after = link_bytes(address)
        carried = {link: after.get(link, 0) - before.get(link, 0) for link in after}
        return {"mode": mode, "link_bytes": sum(carried.values()),
                "per_link_bytes": {k: v for k, v in sorted(carried.items()) if v},
                "shared_replays": shared, "last_result_s": round(max(done.values(), default=float("nan")), 2),
                "results": {peer: counts.get(sid) for peer, (_, sid) in subs.items()},
                "expected": {peer: old + recent + LIVE if peer == "SP1" else recent + LIVE for peer in subs}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=int, default=20_000)
    ap.add_argument("--recent", type=int, default=4_000)
    ap.add_argument("--rate", type=float, default=2_000.0, help="--replay-rate of every super-peer")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    runs = []
    for k, mode in alternating(args.rounds, list(STRATEGY)):
        r = one_round(args.old, args.recent, args.rate, mode)
        runs.append({"round": k, **r})
        ok = "ok" if r["results"] == r["expected"] else f"MISMATCH (expected {r['expected']})"
        print(f"round {k} {mode:12s} links carried {r['link_bytes'] / 1e6:8.2f} MB, shared at "
              f"{','.join(r['shared_replays']) or '-':15s} last result after {r['last_result_s']:6.1f} s; "
              f"results {r['results']} {ok}")
    by = {m: statistics.median(r["link_bytes"] for r in runs if r["mode"] == m) for m in STRATEGY}
    added = {m: by[m] - by["first-only"] for m in ("sharing", "own-replays")}
    saved = 1 - by["sharing"] / max(1, by["own-replays"])
    added_saved = 1 - added["sharing"] / max(1, added["own-replays"])
    print(f"links carried (median): first subscription alone {by['first-only'] / 1e6:.2f} MB; with the "
          f"{len(LATER)} later ones sharing {by['sharing'] / 1e6:.2f} MB, on replays of their own "
          f"{by['own-replays'] / 1e6:.2f} MB ({100 * saved:.1f}% less when shared); what the later ones added: "
          f"{added['sharing'] / 1e6:.2f} MB vs {added['own-replays'] / 1e6:.2f} MB ({100 * added_saved:.1f}% less)")
    write_report("shared_replays", {"old": args.old, "recent": args.recent, "replay_rate": args.rate,
                                    "later_subscribers": list(LATER), "runs": runs,
                                    "median_link_bytes": by, "later_bytes": added,
                                    "bytes_saved_fraction": round(saved, 4),
                                    "later_bytes_saved_fraction": round(added_saved, 4)}, args.out)


if __name__ == "__main__":
    main()
