"""A window join placed at a super-peer of the Spark executor (issue 36, deliverable 4, on both
executors): real super-peers in one process, SP4 on real Spark (``local[2]``), the others inline.
Photons at SP4, rare alerts at SP3, the join subscribed at SP1 and placed at SP4, where Spark
computes both inputs (σπ of the photons, π of the alerts) and the join reads Spark's outputs;
a second subscription at SP7 reuses the joined stream. Both subscribers' results equal the
reference evaluator's — all of them while the streams are still open, through the watermarks of
the quiet streams, which pass Spark's chains in their place after the items before them (else
the last photons' groups would wait for an alert that never comes) — and the join's outer
input is not pushed into Spark's feed for nothing. Spark's outputs carry their origins, so the
groups say which items they hold (where a re-plan of a reused join starts).

And the same through real daemons, every one on Spark, over gRPC: the join placed at SP4,
reused at SP5 for SP7, both subscribers' results the reference's."""

from __future__ import annotations

import time

import pytest
from join_streams import photons_and_alerts
from network_harness import paper_example_part, same, until
from superpeer_fakes import buffered_results, in_process_network

from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import up

from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = pytest.mark.slow

JOIN = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
        'where $a/t >= $p/t - 0.3 and $a/t <= $p/t + 0.1 and $a/author = $p/src and $p/en > 0.5 '
        'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')
WARM = 500  # photons published before the subscriptions (their statistics price the join)


def _results_so_far(record, want: int, seconds: float) -> list[str]:
    """The results in the subscription's buffer once there are ``want`` (the streams open)."""
    def read() -> list[str] | None:
        _, items, _, _ = record.runtime.buffer.read(0, 100_000, 0.05)
        return items if len(items) >= want else None
    return until(read, seconds, what=lambda: f"{len(record.runtime.buffer.read(0, 100_000, 0)[1])} of {want}")


@pytest.mark.timeout(300)
def test_a_join_placed_at_a_spark_peer_is_shared_and_equals_the_reference() -> None:
    net = in_process_network(spark={"SP4": {"trigger_ms": 50, "master": "local[2]", "cores": 2}})
    try:
        sp4, sp3 = net.peers["SP4"], net.peers["SP3"]
        assert sp4.executor.name == "spark" and sp4.state.runs_joins
        photons, alerts = photons_and_alerts(2500)
        sp4.control.register_stream("photons", "photons", "photon", rate=100, event_time="t", event_time_rate=50)
        sp3.control.register_stream("alerts", "alerts", "alert", rate=3, event_time="t", event_time_rate=50)
        warm_t = WARM * 0.1
        sp4.data.publish("photons", photons[:WARM])
        sp3.data.publish("alerts", [x for t, x in alerts if t < warm_t])
        first = net.peers["SP1"].control.subscribe(JOIN)
        assert "join placed at SP4" in first.describe(), first.describe()
        joined = first.plan.parts[-1].result_stream
        second = net.peers["SP7"].control.subscribe(JOIN)
        assert f"reuse joined stream {joined} at SP5" in second.describe(), second.describe()
        assert set(sp4.joins.readers) == {joined}
        later = [(t, x) for t, x in alerts if t >= warm_t]
        for k in range(WARM, len(photons), 500):  # (each input in order of t; alerts up to the photons')
            sp4.data.publish("photons", photons[k:k + 500])
            sp3.data.publish("alerts", [x for t, x in later if k * 0.1 <= t < (k + 500) * 0.1])
        documents = {"photons": StreamDocument.from_text("<photons>" + "".join(photons[WARM:]) + "</photons>"),
                     "alerts": StreamDocument.from_text("<alerts>" + "".join(x for _, x in later) + "</alerts>")}
        expected = list(evaluate(analyze(JOIN).checked, documents).serialized_items())
        assert len(expected) > 30

        def quiet() -> list[str] | None:  # (the streams idle: their watermarks, as heartbeats send them)
            for peer in (sp3, sp4):
                peer.data.idle_watermarks(0.05)
            got = first.runtime.buffer.read(0, 100_000, 0.05)[1]
            return got if len(got) >= len(expected) else None

        began = time.monotonic()
        until(quiet, 120, what=lambda: f"{len(first.runtime.buffer.read(0, 100_000, 0)[1])} of {len(expected)} "
                                       f"results; {sp4.status()['network_joins']}")
        assert same(_results_so_far(second, len(expected), 30), expected)
        sp4.data.close_stream("photons")
        sp3.data.close_stream("alerts")
        assert same(buffered_results(first, 60), expected)
        assert same(buffered_results(second, 60), expected)
        # Spark computed both inputs at SP4; nothing of the join's own inputs went into its feed
        inputs = {first.plan.parts[0].result_stream, first.plan.parts[1].result_stream}
        assert inputs <= set(sp4.executor.installed()), (inputs, sp4.executor.installed())
        assert not inputs & set(sp4.executor.feed.names), sp4.executor.feed.names
        status = sp4.status()["network_joins"][0]
        assert status["stream"] == joined and status["late_outer_items"] == 0
        # Spark's outputs said which items of the originals they came from, so the groups do: a
        # re-plan of either subscription joins again from where its joined stream began for it
        assert set(first.runtime.join_starts()) == set(second.runtime.join_starts()) == {"photons", "alerts"}
        print(f"results of both subscribers before the streams closed within {time.monotonic() - began:.1f} s")
    finally:
        for p in net.peers.values():
            p.stop()


@pytest.mark.timeout(600)
def test_a_join_placed_at_a_spark_daemon_is_shared_and_equals_the_reference(tmp_path) -> None:
    path = paper_example_part({"SP3", "SP4", "SP5", "SP1", "SP7"}, tmp_path / "route.toml")
    network = up(path, "spark", state_dir=tmp_path / "state", spark={"trigger_ms": 50, "master": "local[1]"})
    try:
        address = network.addresses
        sp4, sp3 = SuperPeerClient(address["SP4"]), SuperPeerClient(address["SP3"])
        photons, alerts = photons_and_alerts(2500)
        sp4.register_stream("photons", "photons", "photon", rate=100)
        sp3.register_stream("alerts", "alerts", "alert", rate=3)
        sp4.publish("photons", photons[:WARM])
        sp3.publish("alerts", [x for t, x in alerts if t < WARM * 0.1])
        until(lambda: sp4.status()["streams_registered_here"]["photons"]["statistics"]["items_observed"] >= WARM
              or None, 30)
        first = SuperPeerClient(address["SP1"]).subscribe(JOIN)
        assert "join placed at SP4" in first.description, first.description
        second = SuperPeerClient(address["SP7"]).subscribe(JOIN)
        assert "reuse joined stream" in second.description and "at SP5" in second.description, second.description
        later = [(t, x) for t, x in alerts if t >= WARM * 0.1]
        sp4.publish("photons", photons[WARM:])
        sp3.publish("alerts", [x for _, x in later])
        sp4.close_stream("photons")
        sp3.close_stream("alerts")
        documents = {"photons": StreamDocument.from_text("<photons>" + "".join(photons[WARM:]) + "</photons>"),
                     "alerts": StreamDocument.from_text("<alerts>" + "".join(x for _, x in later) + "</alerts>")}
        expected = list(evaluate(analyze(JOIN).checked, documents).serialized_items())
        assert len(expected) > 30
        for peer, record in (("SP1", first), ("SP7", second)):
            got = [item for _, item, _ in SuperPeerClient(address[peer]).results(record.subscription, idle_timeout=120)]
            assert same(got, expected), (peer, len(got), len(expected))
        joins = sp4.status()["network_joins"]
        assert len(joins) == 1 and joins[0]["unequal_inner_items"] > 0, joins  # (the key applied at SP4)
    finally:
        network.stop()
