"""Stream widening with three consumers, on real daemon processes (issue 31): A and B at SP1
and C at SP0 all read one stream of ra 120–125 that SP4 sends over SP5; N at SP7 needs ra
123–128 and the stream is widened for it in place (``serve --widening``): its readers first get
its own predicate and projection in front of them, then SP4 computes it with the wider
predicate, under the same id and along the same route, then N reads it. Under a steady
publish, no second stream crosses SP4–SP5, nobody moves, and every subscriber's results are the
reference evaluator's over the whole stream: no gap, no duplicate."""

from __future__ import annotations

from pathlib import Path

import pytest
from network_harness import SteadyPublisher, reference_results, same, until

from photons.generator import generate
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import up
from thinpeer.ops.topologies import shipped_topology

pytestmark = pytest.mark.slow

SERVE = ("--heartbeat-s", "0.5", "--reoptimise-every", "1s", "--reoptimise-cooldown", "2s", "--widening")


def ranged(lo: float, hi: float, en: float | None = None) -> str:
    energy = f" and $p/en >= {en}" if en is not None else ""
    return f"""<r>{{ for $p in stream("photons")/photons/photon
      where $p/coord/cel/ra >= {lo} and $p/coord/cel/ra <= {hi}{energy}
      return <x>{{ $p/coord/cel/ra }}{{ $p/en }}{{ $p/det_time }}</x> }}</r>"""


def test_a_stream_with_three_consumers_is_widened_and_every_result_stays_exact(tmp_path: Path) -> None:
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    network = up(path, state_dir=tmp_path / "state", serve_args=SERVE)
    try:
        address = network.addresses
        client = {p: SuperPeerClient(a) for p, a in address.items()}
        publisher = client["SP4"]
        publisher.register_stream("photons", "photons", "photon", rate=500)
        photons = [p.to_xml() for p in generate(60_000, seed=5)]
        publisher.publish("photons", photons[:200], position=0)
        until(lambda: all(s["photons"]["accepted"] == 200 if "photons" in s else True
                          for s in [client["SP4"].status()["streams_registered_here"]]), seconds=10)
        queries = {"A": ("SP1", ranged(120, 125)), "B": ("SP1", ranged(121, 124)),
                   "C": ("SP0", ranged(120, 125, en=0.5)), "N": ("SP7", ranged(123, 128))}
        subs = {}
        for name in "ABC":
            peer, q = queries[name]
            subs[name] = client[peer].subscribe(q)
        status = {name: (lambda name=name: client[queries[name][0]].status()["subscriptions"][subs[name].id])
                  for name in "ABCN"}
        narrow = next(iter(status["A"]()["inputs"].values()))
        tables = lambda: {p: {s["id"]: s for s in client[p].status()["stream_table"]}
                          for p in ("SP0", "SP1", "SP4", "SP5", "SP7")}
        before = {p: set(t) for p, t in tables().items()}
        was = tables()["SP4"][narrow]["selection"]
        n = subs["N"] = client["SP7"].subscribe(queries["N"][1])
        assert f"widened {narrow} in place" in n.description, n.description
        feed = SteadyPublisher(publisher, "photons", photons, 200, batch=200, rate=800).start()
        # the stream itself is wider now, at its origin and along its route; N reads it
        widened = tables()
        assert widened["SP4"][narrow]["selection"] == widened["SP5"][narrow]["selection"] != was
        assert not widened["SP5"][narrow]["held_for_widening"]
        chain, at = [], next(iter(status["N"]()["inputs"].values()))
        while at in widened["SP7"] or at in widened["SP5"]:  # (N's chain back to the original)
            entry = {**widened["SP5"], **widened["SP7"]}[at]
            if entry["original"]:
                break
            chain.append(at)
            at = entry["parent"]
        assert narrow in chain, (chain, narrow)
        # nothing new crosses SP4–SP5 but N's own leg beyond SP5, nobody moves
        assert not {s for s in set(widened["SP4"]) - before["SP4"] if "SP5" in widened["SP4"][s]["route"]}
        until(lambda: feed.published > 12_000, seconds=60)
        assert all(not status[k]().get("plan_history") for k in "ABC"), {k: status[k]() for k in "ABC"}
        published = feed.finish()
        for name, (peer, q) in queries.items():
            got = [item for _, item, _ in client[peer].results(subs[name].id, idle_timeout=60)]
            expected = reference_results(q, photons[200:published])
            assert expected and same(got, expected), (name, len(got), len(expected))
    finally:
        network.stop()
