"""Under pressure an approximate subscription goes down onto a sample another subscription's
stream already carries, when its bound allows, rather than one step coarser onto a stream of its
own (issue 35: "preferring samples that many subscriptions share"). Real parts of eight
super-peers in one process on the fake transport; moves are run by the test."""

from __future__ import annotations

from superpeer_fakes import buffered_results, in_process_network, publish_switching

from photons.generator import generate
from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.operators.sampling import kept
from wxquery.stream_document import StreamDocument

PHOTONS = [p.to_xml() for p in generate(3000, seed=21)]
ITEMS = """<r>{ for $p in stream("photons")/photons/photon where $p/en >= 0.5
  return <e>{ $p/en }{ $p/det_time }</e> }</r>"""
NARROWER = """<r>{ for $p in stream("photons")/photons/photon where $p/en >= 0.8
  return <e>{ $p/en }</e> }</r>"""


def reference(query: str, photons: list[str]) -> list[str]:
    doc = StreamDocument.from_text("<photons>" + "".join(photons) + "</photons>")
    return list(evaluate(analyze(query).checked, doc).serialized_items())


def test_a_subscription_under_pressure_joins_a_coarser_sample_that_already_flows():
    net = in_process_network()
    sp4, sp1 = net.peers["SP4"], net.peers["SP1"]
    try:
        sp4.control.register_stream("photons", "photons", "photon", rate=100)
        sp4.data.publish("photons", PHOTONS[:200])
        wide = sp1.control.subscribe(ITEMS, approximate=True)
        narrow = sp1.control.subscribe(NARROWER, approximate=True, min_rate=16)
        bounded = sp1.control.subscribe(NARROWER, approximate=True, min_rate=2)
        assert wide.sample == narrow.sample == bounded.sample == 1
        assert sp1.adaptive.lowered_rate(narrow) == 2  # (nothing coarser flows yet: one step)
        at = 200

        def publish(n: int) -> None:
            nonlocal at
            publish_switching(sp4, sp1, PHOTONS[at:at + n], 50)
            at += n

        assert sp1.adaptive.resample(wide, 8, "test: sample 1/1 → 1/8")
        publish(400)
        assert not sp1.reoptimiser.switches and wide.sample == 8
        sampled_stream = next(iter(wide.inputs.values()))
        # under pressure, the narrow one goes straight to the 1/8 sample that flows, within its bound
        assert sp1.adaptive.lowered_rate(narrow) == 8
        assert sp1.adaptive.lowered_rate(bounded) == 2  # (1/8 is beyond its bound)
        switched_at = at
        sp1.adaptive._change(narrow, sp1.adaptive.lowered_rate(narrow), "test")  # (as under pressure)
        assert sampled_stream in narrow.plan.parts[0].reused.split(",") or \
            narrow.plan.parts[0].reused == sampled_stream, narrow.describe()
        publish(1000)
        assert not sp1.reoptimiser.switches and narrow.sample == 8
        sp4.data.close_stream("photons")
        got = buffered_results(narrow)
        cut = narrow.plan_history[-1]["switched_at_item"]  # (an item of the original: whole before it)
        assert narrow.plan_history[-1]["sample"] == "1/1 → 1/8" and switched_at <= cut < at
        assert "(shared)" in narrow.plan_history[-1]["why"]
        after = [p for p, keep in zip(PHOTONS[cut:at], kept(PHOTONS[cut:at], 8)) if keep]
        assert got == reference(NARROWER, PHOTONS[200:cut]) + reference(NARROWER, after)
    finally:
        for p in net.peers.values():
            p.stop()
