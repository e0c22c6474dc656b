"""Where a registration's time goes (issue 32, deliverable 5): the paper-example workload
registered one after the other on eight super-peers served by real gRPC servers in this
process, each step of ``Subscribe`` timed where it runs.

Run: python benchmarks/registration_breakdown.py [--rounds 2] [--reoptimise] [--out FILE.json]

Steps timed on the registering peer: the query's analysis, the planning view (the lookups of
SUBSCRIBE's search and the statistics of the input), the planner, the two phases (reserve,
commit) and the state store's writes. On the way: each lookup as its asking thread sees it
(gRPC round trip and the answer read; the registering peer's lookup of its own table, without a
call, counts there too), and as the answering peer's handler spends it. After
the workload, in the same run, the physical limits these are made of: a lookup of one peer
answered with the counters of the statistics only, and with their whole sample, and the same
lookup handed to the lookup threads as the search does. Each daemon in its own process
(``network_registration.py``) costs the same on this machine; here the steps can be timed
without a change to the daemon. ``--reoptimise``: the daemons re-plan running subscriptions
as they do by default (off here: their rounds run in between and blur the steps).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from local_network import ROOT, write_report  # (puts the checkout on sys.path)

sys.path.append(str(ROOT / "tests"))  # (after the packages: tests/superpeer is not superpeer)

from network_harness import running_network  # noqa: E402
from photons.generator import generate  # noqa: E402
from sharing.properties import InputStream  # noqa: E402
from sharing.scenarios import paper_example  # noqa: E402
from superpeer.control import control_plane, remote_view, two_phase  # noqa: E402
from superpeer.control.reoptimisation_settings import ReoptimisationSettings  # noqa: E402
from superpeer.history import state_store  # noqa: E402
from superpeer.rpc import peer_channels, service, stream_wire  # noqa: E402
from sharing import planner  # noqa: E402
from thinpeer.client import SuperPeerClient  # noqa: E402


class Steps:
    """Durations per step, taken only while a registration is under way: ``own`` steps in the
    registering thread, the others (handlers, lookup threads) in any thread."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = defaultdict(list)
        self.registering = threading.local()
        self.under_way = False

    def wrap(self, owner, name: str, label: str, own: bool) -> None:
        f = getattr(owner, name)

        @functools.wraps(f)
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                if getattr(self.registering, "on", False) or (not own and self.under_way):
                    self.times[label].append((time.perf_counter() - start) * 1000)

        setattr(owner, name, timed)

    def registering_in(self, owner, name: str) -> None:
        """The steps of the thread that runs ``owner.name`` (the peer's handler) are ``own``."""
        f = getattr(owner, name)

        @functools.wraps(f)
        def marked(*args, **kwargs):
            self.registering.on = True
            try:
                return f(*args, **kwargs)
            finally:
                self.registering.on = False

        setattr(owner, name, marked)

    @contextmanager
    def registration(self):
        self.under_way = True
        try:
            yield
        finally:
            self.under_way = False


def instrument(steps: Steps) -> None:
    own = [(control_plane.ControlPlane, "subscribe", "subscribe (whole, at the peer)"),
           (control_plane, "analyze", "analysis of the query"),
           (control_plane, "fetch_planning_view", "planning view (lookups, statistics)"),
           (remote_view, "_ask", "  a wave of lookups (the first included)"),
           (planner.Planner, "subscribe", "planner (SUBSCRIBE, cost model)"),
           (two_phase.Coordinator, "reserve", "reserve (first phase)"),
           (two_phase.Coordinator, "commit", "commit (second phase)"),
           (state_store.StateStore, "add_subscription", "state store: the subscription"),
           (state_store.StateStore, "set_plan", "state store: its plan")]
    anywhere = [(peer_channels.GrpcPeerChannels, "lookup", "lookup, as the asker sees it (its own too)"),
                (service.SuperPeerService, "LookupStreams", "lookup, the answering handler"),
                (stream_wire.StaticParses, "streams", "lookup, its answer read")]
    for owner, name, label in own:
        steps.wrap(owner, name, label, own=True)
    for owner, name, label in anywhere:
        steps.wrap(owner, name, label, own=False)
    steps.registering_in(control_plane.ControlPlane, "subscribe")


def limits(peers: dict, rounds: int = 40) -> dict[str, float]:
    """One peer's lookup at another, answered three ways (medians, ms)."""
    node = peers["SP1"].node
    link = node.control.link
    photons = InputStream("photons", ("photons", "photon"))
    held = node.state.statistics_held.get("photons")
    ways = {"lookup, no statistics": lambda: link.lookup("SP4", photons),
            "lookup with the statistics' counters": lambda: link.lookup("SP4", photons,
                                                                        statistics_of=held.sample_id if held else 0),
            "lookup with the statistics' whole sample": lambda: link.lookup("SP4", photons, statistics_of=0),
            "lookup handed to a lookup thread": lambda: remote_view._lookup_pool().submit(
                link.lookup, "SP4", photons).result()}
    out = {}
    for label, call in ways.items():
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1000)
        out[label] = round(statistics.median(times), 3)
    return out


def one_round(reoptimise: bool, steps: Steps) -> tuple[list[float], dict[str, float]]:
    options = None if reoptimise else {f"SP{k}": {"reoptimisation": ReoptimisationSettings(enabled=False)}
                                       for k in range(8)}
    with tempfile.TemporaryDirectory() as tmp, running_network(Path(tmp), peer_options=options) as (topology, peers):
        source = SuperPeerClient(topology.address("SP4"))
        source.register_stream("photons", "photons", "photon", rate=150)
        source.publish("photons", [p.to_xml() for p in generate(1000, 1)])
        time.sleep(1.2)  # (one heartbeat: every peer has heard of the stream)
        clients = {}
        times = []
        for q in paper_example(1).queries:
            client = clients.setdefault(q.peer, SuperPeerClient(topology.address(q.peer)))
            start = time.perf_counter()
            with steps.registration():
                client.subscribe(q.text)
            times.append((time.perf_counter() - start) * 1000)
        return times, limits(peers)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2, help="fresh networks, each registering the workload")
    ap.add_argument("--reoptimise", action="store_true", help="leave re-optimisation on (the default of serve)")
    ap.add_argument("--out", type=Path, default=None, help="default benchmarks/results/registration_breakdown.json")
    args = ap.parse_args()
    steps = Steps()
    instrument(steps)
    registrations: list[float] = []
    measured_limits: list[dict[str, float]] = []
    for k in range(args.rounds):
        times, found = one_round(args.reoptimise, steps)
        registrations += times
        measured_limits.append(found)
        print(f"round {k + 1}: median {statistics.median(times):.2f} ms over {len(times)} registrations", flush=True)
    n = len(registrations)
    rows = {label: {"per_registration_ms": round(sum(t) / n, 3), "calls_per_registration": round(len(t) / n, 2),
                    "median_call_ms": round(statistics.median(t), 3)}
            for label, t in steps.times.items()}
    print(f"\nregistration through gRPC, client to answer: median {statistics.median(registrations):.2f} ms, "
          f"mean {statistics.fmean(registrations):.2f} ms ({n} registrations, re-optimisation "
          f"{'on' if args.reoptimise else 'off'})")
    print(f"{'step':45s} {'ms per registration':>20s} {'calls':>6s} {'median call ms':>15s}")
    for label, row in sorted(rows.items(), key=lambda kv: -kv[1]["per_registration_ms"]):
        print(f"{label:45s} {row['per_registration_ms']:20.2f} {row['calls_per_registration']:6.2f} "
              f"{row['median_call_ms']:15.2f}")
    merged = {label: round(statistics.median(m[label] for m in measured_limits), 3) for label in measured_limits[0]}
    print("\nthe same lookup alone (SP1 asks SP4, median ms):")
    for label, ms in merged.items():
        print(f"  {label:45s} {ms:8.2f}")
    write_report("registration_breakdown", {"benchmark": "registration_breakdown", "rounds": args.rounds,
                            "reoptimise": args.reoptimise, "registrations": n,
                            "median_ms": round(statistics.median(registrations), 3),
                            "mean_ms": round(statistics.fmean(registrations), 3),
                            "steps": rows, "single_lookup_ms": merged}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
