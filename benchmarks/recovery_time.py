"""From ``kill -9`` of an intermediate super-peer to the first result on the new route.

Run: python benchmarks/recovery_time.py [--trials 5] [--heartbeat-s 1.0] [--misses 3] [--rate 500]
     [--kill-after-s 3 60] [--victim intermediate|subscriber] [--query q1|items] [--baseline DIR]
     [--out FILE]

Each trial starts the paper example as processes on loopback (``network up``, inline executor,
a state directory per peer), registers photons at SP4 and Query 1 at SP1 (routed SP4→SP5→SP1),
publishes at ``--rate`` items/s, and kills SP5 with SIGKILL. Every result of Query 1 names its
photon (``det_time``), so the reader knows which item each result came from: the recovery time
is from the kill to the first result read for an item published after the kill — it can only
have come over the new route (SP4→SP3→SP2→SP0→SP1). The baseline of the same run is the delay
from publishing an item to reading its result before the kill. Each trial also checks that the
results equal the reference evaluator's (nothing lost or duplicated).

``--kill-after-s``: how long the stream has flowed when SP5 is killed (the history a re-plan
that recomputes from the subscription's first item replays; one that resumes does not). The
report also gives where the failure re-plan started its copy of the stream (``started_at_item``,
from the plan history; ``None`` where the code does not say), and the bytes the backbone carried
from the kill to the end per item published after the kill (counted by the peers that stay up).
``--victim subscriber``: SP1, the subscriber's own super-peer, is killed instead and started again
half a second later (the reader reads on from its offset once it answers); ``--query items``: a
selection whose results are its photons (``where ra >= 125 return $p``) instead of Query 1.
``--baseline DIR``: a checkout of another revision, run alternately with this one in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from local_network import code_of, percentile, write_report
from lxml import etree

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from network_harness import reference_results, same  # noqa: E402

from photons.generator import generate  # noqa: E402
from sharing.scenarios import example_query  # noqa: E402
from thinpeer.client import SuperPeerClient  # noqa: E402
from thinpeer.ops.processes import up  # noqa: E402
from thinpeer.ops.ports import with_free_ports  # noqa: E402
from thinpeer.ops.topologies import shipped_topology  # noqa: E402

def det_time(xml: str) -> str:
    return etree.fromstring(xml.encode()).findtext(".//det_time").strip()


ITEMS = ('<r>{ for $p in stream("photons")/photons/photon where $p/coord/cel/ra >= 125 '
         "return $p }</r>")  # (``--query items``: its results are its photons, passed through)


def backbone_bytes(address: dict[str, str], victim: str) -> int:
    """What the backbone links carried so far, counted by the peers that stay up (all but the victim)."""
    return sum(c["bytes"] for peer, a in address.items() if peer != victim
               for c in SuperPeerClient(a).status()["links"].values())


def read_all(address: str, sid: str, on_item) -> None:
    """Every result, in order, across a restart of the subscriber's super-peer (read on from
    the offset reached once it answers again)."""
    offset = 0
    while True:
        try:
            for at, item, _ in SuperPeerClient(address).results(sid, offset=offset, idle_timeout=60):
                offset = at + 1
                on_item(item)
            return
        except Exception:  # noqa: BLE001 - its super-peer is down: read on once it is back
            time.sleep(0.2)


def trial(heartbeat_s: float, misses: int, rate: float, n: int, kill_after_s: float,
          victim: str = "SP5", query: str = "") -> dict:
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        path = with_free_ports(shipped_topology("paper-example"), Path(tmp) / "paper-example.toml")
        network = up(path, state_dir=Path(tmp) / "state",
                     serve_args=("--heartbeat-s", str(heartbeat_s), "--heartbeat-misses", str(misses)))
        try:
            address = network.addresses
            publisher = SuperPeerClient(address["SP4"])
            publisher.register_stream("photons", "photons", "photon", rate=rate)
            photons = [p.to_xml() for p in generate(n, seed=11)]
            publisher.publish("photons", photons[:200], position=0)
            time.sleep(2 * heartbeat_s)
            query = query or example_query("q1")
            sid = SuperPeerClient(address["SP1"]).subscribe(query).subscription
            index_of = {det_time(x): i for i, x in enumerate(photons)}
            sent_at: dict[int, float] = {}

            def publish() -> None:
                client = SuperPeerClient(address["SP4"])
                for i in range(200, n, 10):
                    sent_at[i] = time.monotonic()
                    client.publish("photons", photons[i:i + 10], position=i, retry_s=60)
                    time.sleep(max(0.0, 10 / rate - (time.monotonic() - sent_at[i])))
                client.close_stream("photons")

            threading.Thread(target=publish, daemon=True).start()
            killed: list[float] = []
            killed_at_index: list[int] = []
            sent_before: list[int] = []

            def kill() -> None:
                time.sleep(kill_after_s)
                sent_before.append(backbone_bytes(address, victim))
                killed_at_index.append(max(sent_at) + 10)
                killed.append(time.monotonic())
                network.kill(victim)
                if victim == "SP1":  # (the subscriber's own super-peer: it comes back at once)
                    time.sleep(0.5)
                    network.start(victim)

            threading.Thread(target=kill, daemon=True).start()
            got, delays, recovery = [], [], []

            def on_item(item: str) -> None:
                now = time.monotonic()
                got.append(item)
                i = index_of[det_time(item)]
                batch = i - (i - 200) % 10
                if not killed and batch in sent_at:
                    delays.append(now - sent_at[batch])
                elif killed and not recovery and i >= killed_at_index[0]:
                    recovery.append(now - killed[0])

            read_all(address["SP1"], sid, on_item)
            recovery = recovery[0] if recovery else None
            expected = reference_results(query, photons[200:])
            after = n - killed_at_index[0] if killed_at_index else 0
            per_item = ((backbone_bytes(address, victim) - sent_before[0]) / after
                        if sent_before and after > 0 else None)
            history = SuperPeerClient(address["SP1"]).status()["subscriptions"][sid]["plan_history"]
            failure = next((e for e in history if e["why"].startswith("failure")), {})
            started = failure.get("resumed_at_item") or failure.get("recomputed_from_item")
            return {"kill_after_s": kill_after_s, "killed_at_item": killed_at_index[0] if killed_at_index else None,
                    "recovery_s": recovery, "baseline_delay_s": statistics.median(delays) if delays else None,
                    "started_at_item": started.get("p") if started else None,
                    "backbone_bytes_per_item_after_kill": round(per_item, 1) if per_item is not None else None,
                    "results": len(got), "expected": len(expected), "exact": same(got, expected)}
        finally:
            network.stop()


def summary(runs: list[dict]) -> dict:
    values = [r["recovery_s"] for r in runs if r["recovery_s"] is not None]
    baseline = [r["baseline_delay_s"] for r in runs if r["baseline_delay_s"] is not None]
    return {"recovery_s": {"p50": round(statistics.median(values), 3), "p90": round(percentile(values, 0.9), 3),
                           "max": round(max(values), 3)} if values else None,
            "baseline_delay_s_p50": round(statistics.median(baseline), 4) if baseline else None,
            "backbone_bytes_per_item_after_kill_p50": statistics.median(
                r["backbone_bytes_per_item_after_kill"] for r in runs) if runs else None,
            "all_exact": all(r["exact"] for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--heartbeat-s", type=float, default=1.0)
    parser.add_argument("--misses", type=int, default=3)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--kill-after-s", type=float, nargs="+", default=[3.0],
                        help="how long the stream flows before the kill (one set of trials each)")
    parser.add_argument("--items-after-kill", type=int, default=4000)
    parser.add_argument("--victim", choices=["intermediate", "subscriber"], default="intermediate",
                        help="kill SP5 on Query 1's route (default), or SP1, the subscriber's own super-peer, "
                             "and start it again at once")
    parser.add_argument("--query", choices=["q1", "items"], default="q1",
                        help="the paper's Query 1 (restructured results), or a selection whose results "
                             "are its photons (passed through)")
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    runs: dict[str, dict[str, list[dict]]] = {t: {} for t in trees}
    for after in args.kill_after_s:
        n = 200 + int(args.rate * after) + args.items_after_kill
        for k in range(args.trials):
            for tree in (list(trees) if k % 2 == 0 else list(reversed(trees))):
                with code_of(trees[tree]):
                    run = trial(args.heartbeat_s, args.misses, args.rate, n, after,
                                "SP1" if args.victim == "subscriber" else "SP5",
                                ITEMS if args.query == "items" else "")
                runs[tree].setdefault(str(after), []).append(run)
                print(f"{tree:8} history {after:g} s, trial {k + 1}: {run}", flush=True)
    report = {"benchmark": ("kill -9 of an intermediate super-peer to the first result on the new route "
                            "(paper example, SP5, Query 1 at SP1)" if args.victim == "intermediate" else
                            "kill -9 and restart of the subscriber's super-peer (paper example, SP1) to the "
                            "first result of an item published after the kill"),
              "victim": args.victim, "query": args.query,
              "heartbeat_s": args.heartbeat_s, "misses": args.misses, "rate": args.rate,
              "trials": runs, "summary": {t: {after: summary(r) for after, r in by.items()} for t, by in runs.items()}}
    for tree, by in report["summary"].items():
        for after, s in by.items():
            if s["recovery_s"]:
                print(f"{tree:8} history {after} s: recovery p50 {s['recovery_s']['p50']:.2f} s  "
                      f"p90 {s['recovery_s']['p90']:.2f} s  max {s['recovery_s']['max']:.2f} s  "
                      f"(heartbeat {args.heartbeat_s} s, {args.misses} misses; publish→result before the kill "
                      f"p50 {s['baseline_delay_s_p50']} s); backbone bytes per item published after the kill "
                      f"p50 {s['backbone_bytes_per_item_after_kill_p50']}; results exact in every trial: {s['all_exact']}")
    write_report("recovery_time", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
