"""A window join placed in the network (issue 36, deliverable 4), through eight real super-peers
in one process: photons at SP4, rare alerts at SP3, the join subscribed at SP1. The planner
joins them at SP4, where they meet, and only the joined stream travels SP4→SP5→SP1; a second
subscription with the same join at SP7 reuses that stream at SP5 instead of joining again.
Every result equals the reference evaluator's (itself checked against Saxon-HE, and the groups
against Saxon in ``test_joins_placed_upstream``); without a peer that runs joins the plan says
why and the join runs at the subscriber, as before."""

from __future__ import annotations

import pytest
from join_streams import photons_and_alerts
from network_harness import same, until
from superpeer_fakes import buffered_results, in_process_network

from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

JOIN = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
        'where $a/t >= $p/t - 0.3 and $a/t <= $p/t + 0.1 and $a/author = $p/src and $p/en > 0.5 '
        'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')
# the same join with a further selection on each input: served by the joined stream, narrowed at SP1
NARROWER = JOIN.replace("$p/en > 0.5", '$p/en > 1.2 and $a/author = "ivo://nasa.gsfc.gcn/SWIFT"')
WARM = 1000  # photons published before the subscriptions (their statistics price the join)
# the same band without the key ``$a/author = $p/src``, reading the same elements
UNKEYED = JOIN.replace(" and $a/author = $p/src", "").replace("{ $a/ivorn }", "{ $a/ivorn }{ $p/src }{ $a/author }")


def _expected(photons: list, alerts: list, query: str = JOIN) -> list[str]:
    documents = {"photons": StreamDocument.from_text("<photons>" + "".join(x for _, x in photons) + "</photons>"),
                 "alerts": StreamDocument.from_text("<alerts>" + "".join(x for _, x in alerts) + "</alerts>")}
    return list(evaluate(analyze(query).checked, documents).serialized_items())


@pytest.fixture
def network():
    net = in_process_network()
    photons, alerts = photons_and_alerts(3000)
    photons = [(k * 0.1, x) for k, x in enumerate(photons)]  # (with their times)
    sp4, sp3 = net.peers["SP4"], net.peers["SP3"]
    sp4.control.register_stream("photons", "photons", "photon", rate=100)
    sp3.control.register_stream("alerts", "alerts", "alert", rate=3)
    sp4.data.publish("photons", [x for _, x in photons[:WARM]])
    sp3.data.publish("alerts", [x for t, x in alerts if t < photons[WARM][0]])
    yield net, photons[WARM:], [(t, x) for t, x in alerts if t >= photons[WARM][0]]
    for p in net.peers.values():
        p.stop()


def _publish(net, photons: list, alerts: list) -> None:
    half = len(photons) // 2
    net.peers["SP4"].data.publish("photons", [x for _, x in photons[:half]])
    net.peers["SP3"].data.publish("alerts", [x for t, x in alerts if t <= photons[half][0] + 1])
    net.peers["SP4"].data.publish("photons", [x for _, x in photons[half:]])
    net.peers["SP3"].data.publish("alerts", [x for t, x in alerts if t > photons[half][0] + 1])
    net.peers["SP4"].data.close_stream("photons")
    net.peers["SP3"].data.close_stream("alerts")


def test_the_join_runs_where_its_inputs_meet_and_a_second_one_reuses_it(network) -> None:
    net, photons, alerts = network
    first = net.peers["SP1"].control.subscribe(JOIN)
    assert "join placed at SP4" in first.describe(), first.describe()
    joined = first.plan.parts[-1].result_stream
    assert first.plan.parts[-1].route == ("SP4", "SP5", "SP1")
    # only the joined stream of the photons' input reaches SP1: the photons themselves stop at SP4
    at_sp1 = [s.id for s in net.peers["SP1"].state.table if s.input.stream == "photons"]
    assert at_sp1 == [joined]
    second = net.peers["SP7"].control.subscribe(JOIN)
    assert f"reuse joined stream {joined} at SP5" in second.describe(), second.describe()
    narrower = net.peers["SP1"].control.subscribe(NARROWER)
    assert (f"reuse joined stream {joined} at SP1; route SP1; σ[en > 1.2] on its outer items; "
            f'σ[author = "ivo://nasa.gsfc.gcn/SWIFT"] on its inner items at SP1') in narrower.describe()
    assert [len(p.joins.readers) for p in net.peers.values() if p.joins is not None].count(1) == 1
    _publish(net, photons, alerts)
    expected = _expected(photons, alerts)
    assert len(expected) > 50
    assert same(buffered_results(first), expected)
    assert same(buffered_results(second), expected)
    fewer = _expected(photons, alerts, NARROWER)
    assert 10 < len(fewer) < len(expected) and same(buffered_results(narrower), fewer)
    status = net.peers["SP4"].status()["network_joins"]
    assert status[0]["stream"] == joined and status[0]["late_outer_items"] == 0


def test_the_joined_stream_outlives_its_first_subscriber_and_goes_with_its_last(network) -> None:
    net, photons, alerts = network
    first = net.peers["SP1"].control.subscribe(JOIN)
    second = net.peers["SP7"].control.subscribe(JOIN)
    joined = first.plan.parts[-1].result_stream
    net.peers["SP1"].control.unsubscribe(first.runtime.id)
    assert joined in net.peers["SP4"].joins.readers  # (the second still reads it)
    _publish(net, photons, alerts)
    assert same(buffered_results(second), _expected(photons, alerts))
    net.peers["SP7"].control.unsubscribe(second.runtime.id)
    until(lambda: not net.peers["SP4"].joins.readers and joined not in net.peers["SP4"].state.table, 10,
          what=lambda: net.peers["SP4"].joins.status())
    assert not any(r for readers in net.peers["SP4"].state.deliveries.values() for r, _ in readers
                   if r.__class__.__name__ == "JoinReader")


def test_without_a_peer_that_runs_joins_it_joins_at_the_subscriber_and_says_why(network) -> None:
    """As on peers started with ``--no-network-joins``: no usage report says ``joins``."""
    net, photons, alerts = network
    for p in net.peers.values():
        p.state.runs_joins = False
    record = net.peers["SP1"].control.subscribe(JOIN)
    assert "join at SP1 (the subscriber's super-peer): no peer upstream" in record.describe(), record.describe()
    assert not any(p.joins.readers for p in net.peers.values() if p.joins is not None)
    _publish(net, photons, alerts)
    assert same(buffered_results(record), _expected(photons, alerts))


def test_a_keyed_joined_stream_serves_only_joins_with_its_key(network) -> None:
    """The key ``$a/author = $p/src`` is applied at SP4: the joined stream carries only the
    alerts of the photon's source, and a join without that key gets a joined stream of its own."""
    net, photons, alerts = network
    keyed = net.peers["SP1"].control.subscribe(JOIN)
    joined = keyed.plan.parts[-1].result_stream
    assert f"join placed at SP4 (as {joined}; its inputs meet there; key $a/author = $p/src)" in keyed.describe()
    explained = keyed.runtime.analysis.properties.to_json()["post_processing"]  # (query explain)
    assert "key $a/author = $p/src" in explained["join_in_network"], explained
    unkeyed = net.peers["SP7"].control.subscribe(UNKEYED)
    assert joined not in unkeyed.describe() and "key" not in unkeyed.plan.join, unkeyed.describe()
    _publish(net, photons, alerts)
    assert same(buffered_results(keyed), _expected(photons, alerts))
    expected = _expected(photons, alerts, UNKEYED)
    assert len(expected) > 1.5 * len(_expected(photons, alerts)) and same(buffered_results(unkeyed), expected)
    status = {s["stream"]: s for p in net.peers.values() if p.joins is not None for s in p.joins.status()}
    assert status[joined]["unequal_inner_items"] > 20  # (about half the alerts of a band: another source)


def test_a_joined_stream_without_a_key_serves_a_join_with_one(network) -> None:
    net, photons, alerts = network
    unkeyed = net.peers["SP1"].control.subscribe(UNKEYED)
    joined = unkeyed.plan.parts[-1].result_stream
    assert "join placed at SP4" in unkeyed.describe() and "key" not in unkeyed.plan.join, unkeyed.describe()
    keyed = net.peers["SP7"].control.subscribe(JOIN)  # (its key tested at SP7, with the whole where clause)
    assert f"reuse joined stream {joined} at SP5" in keyed.describe(), keyed.describe()
    _publish(net, photons, alerts)
    assert same(buffered_results(unkeyed), _expected(photons, alerts, UNKEYED))
    assert same(buffered_results(keyed), _expected(photons, alerts))
