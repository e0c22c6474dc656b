"""Stream widening in place (issue 31), in process like ``test_widening_moves``: a near miss
widens the running stream itself — its readers first get the residual, then the stream widens,
then the new subscription attaches — so one stream, under its old id, crosses the backbone, and
nobody moves. Every result is the reference evaluator's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from network_harness import same
from reoptimisation_harness import WARMUP, Feed, link_items, photon_network, ranged, reference, switch_all
from superpeer_fakes import buffered_results

from sharing.analysis import analyze
from superpeer.errors import NodeError

COUNTED = """<r>{ for $w in stream("photons")/photons/photon[coord/cel/ra >= 120 and coord/cel/ra <= 125] |count 7|
  let $a := avg($w/en)
  let $n := count($w/en)
  return <w><a>{ $a }</a><n>{ $n }</n></w> }</r>"""


@pytest.fixture
def net():
    yield from photon_network()


def in_place(net, *peers: str) -> None:
    for p in peers or net.peers:
        net.peers[p].control.widening = net.peers[p].control.widen_in_place = True  # (``serve --widening``)


def one_reader(net):
    """Widening in place everywhere, and A at SP1 reading ra 120–125 from the first item on,
    200 photons published since."""
    in_place(net)
    feed = Feed(net)
    a = net.peers["SP1"].control.subscribe(ranged(120, 125))
    feed.publish(200)
    return feed, a


def stream_ids(net) -> dict[str, set[str]]:
    return {p: {s.id for s in n.state.table if not s.original} for p, n in net.peers.items()}


def test_three_readers_keep_their_results_while_their_stream_widens_under_them(net):
    """A and B at SP1 and C at SP0 read (or compute from) one stream of ra 120–125 made at SP4;
    N at SP7 needs ra 123–128: the stream is widened in place — same id, same route, its
    readers narrowed where they stand — and N reads it. No new stream crosses SP4–SP5, no
    stream is removed, and all four results are exact over a publish that runs throughout."""
    in_place(net)
    feed = Feed(net)
    sp0, sp1, sp7 = net.peers["SP0"], net.peers["SP1"], net.peers["SP7"]
    queries = {"A": (sp1, ranged(120, 125)), "B": (sp1, ranged(121, 124)), "C": (sp0, ranged(120, 125, en=0.5)),
               "W": (sp1, COUNTED)}
    subs, first = {}, {}
    for name, (peer, q) in queries.items():
        subs[name], first[name] = peer.control.subscribe(q), feed.at
        feed.publish(100)
    narrow = subs["A"].plan.parts[0].result_stream
    readers = {name for name, r in subs.items() if narrow in {s.id for s in r.plan.parts[0].new_streams}
               or r.plan.parts[0].reused == narrow}
    assert {"B", "C"} <= readers | {"A"}, {k: r.describe() for k, r in subs.items()}
    before = stream_ids(net)
    n = sp7.control.subscribe(ranged(123, 128))
    first["N"] = feed.at
    (part,) = n.plan.parts
    assert part.in_place is not None and part.widened == narrow, n.describe()
    assert f"widened {narrow} in place" in n.describe()
    links = sp7.state.backbone.links  # (its items' path, watched for failures: each peer once, by links)
    assert all(len(set(path)) == len(path) and all(frozenset(hop) in links for hop in zip(path, path[1:]))
               for path in n.paths), n.paths
    assert part.reused == narrow and not part.new_streams or part.new_streams[0].parent == narrow
    entry = net.peers["SP4"].state.table.get(narrow)
    assert entry.properties == part.in_place.wide.properties  # (at its origin, and along its route)
    assert net.peers["SP5"].state.table.get(narrow).properties == entry.properties
    assert not any(p.widening.held for p in net.peers.values())
    crossing = link_items(net)
    feed.publish(1000)
    after = stream_ids(net)
    assert all(before[p] <= after[p] for p in before)  # (nothing replaced: nobody moved)
    assert len(after["SP5"] - before["SP5"]) <= 1, after["SP5"] - before["SP5"]  # (at most N's leg to SP7)
    assert link_items(net) > crossing
    feed.close()
    queries["N"] = (sp7, ranged(123, 128))
    for name, (peer, q) in queries.items():
        record = n if name == "N" else subs[name]
        expected = reference(q, first[name], feed.at)
        assert expected and same(buffered_results(record), expected), name  # (windows: sums merged in another order)


def test_a_widening_a_reader_cannot_follow_is_refused_and_planned_without_it(net, monkeypatch):
    """Where a reader of the stream cannot be narrowed (here: SP1's executor refuses), nothing
    widens: SP5 lets the stream go again, N gets a plan of its own, and A's results are exact."""
    feed, a = one_reader(net)
    sp1, sp7, a_query, a_first = net.peers["SP1"], net.peers["SP7"], ranged(120, 125), WARMUP
    narrow = a.plan.parts[0].result_stream

    def refuse(*args):
        raise NodeError("FAILED_PRECONDITION", "a reader here cannot be narrowed")
    monkeypatch.setattr(sp1.widening, "step", refuse)
    n = sp7.control.subscribe(ranged(123, 128))
    n_first = feed.at
    assert not any(p.in_place or p.widened for p in n.plan.parts), n.describe()
    assert not any(p.widening.held for p in net.peers.values())
    assert net.peers["SP4"].state.table.get(narrow).properties == a.plan.parts[0].new_streams[0].properties
    feed.publish(600)
    feed.close()
    assert buffered_results(a) == reference(a_query, a_first, feed.at)
    assert buffered_results(n) == reference(ranged(123, 128), n_first, feed.at)


def test_a_held_stream_is_not_reused_until_it_settles(net):
    """Between its narrowing and its settling at a peer, a stream is held there: a reservation
    that reuses it is refused as a conflict (it would be planned over properties about to
    change), and accepted again once it has settled."""
    sp5 = net.peers["SP5"]
    sp5.widening.held["SP4.9"] = "txn-1"
    why = sp5.widening.refusal("txn-2", ["SP4.9"], [])
    assert "being widened at SP5" in why
    assert sp5.widening.refusal("txn-1", ["SP4.9"], []) == ""
    del sp5.widening.held["SP4.9"]
    assert sp5.widening.refusal("txn-2", ["SP4.9"], []) == ""


def test_a_narrowed_reader_moves_later_with_its_residual_and_stays_exact(net):
    """Once the subscription that widened the stream is gone, the stream's one reader left pays
    for the wide stream alone: its next round moves it onto a narrow stream of its own, live —
    the switch takes over its delivery with the residual in front of it — and its results stay
    exact through the widening and the move."""
    feed, a = one_reader(net)
    sp1, sp7, a_query, a_first = net.peers["SP1"], net.peers["SP7"], ranged(120, 125), WARMUP
    n = sp7.control.subscribe(ranged(123, 128))
    assert n.plan.parts[0].in_place is not None, n.describe()
    wide = a.plan.parts[0].result_stream
    feed.publish(300)
    sp7.control.unsubscribe(n.runtime.id)
    a.last_replan = 0
    feed.publish(100)
    sp1.reoptimiser.round("test")
    feed.publish(400, switch_all(net))
    assert a.plan_history and a.plan_history[-1]["state"] == "switched", a.reoptimisation
    assert all(wide not in {s.id for s in p.state.table} for p in net.peers.values())
    feed.close()
    assert buffered_results(a) == reference(a_query, a_first, feed.at)


def test_readers_of_a_projected_stream_get_its_projection_back_in_front_of_them(net):
    """The stream carries ra and en; the near miss needs det_time too: the wide stream carries
    all three, and the residual in front of the old readers projects ra and en again (a
    restructuring subscription at SP1 reading it, one computed from it at SP0)."""
    in_place(net)
    feed = Feed(net)
    sp0, sp1, sp7 = net.peers["SP0"], net.peers["SP1"], net.peers["SP7"]
    a_query = """<r>{ for $p in stream("photons")/photons/photon where $p/coord/cel/ra >= 120
      and $p/coord/cel/ra <= 125 return <x>{ $p/coord/cel/ra }{ $p/en }</x> }</r>"""
    b_query = """<r>{ for $p in stream("photons")/photons/photon where $p/coord/cel/ra >= 121
      and $p/coord/cel/ra <= 124 return <y>{ $p/en }</y> }</r>"""
    a, a_first = sp1.control.subscribe(a_query), feed.at
    feed.publish(100)
    b, b_first = sp0.control.subscribe(b_query), feed.at
    feed.publish(100)
    n, n_first = sp7.control.subscribe(ranged(123, 128)), feed.at
    (part,) = n.plan.parts
    assert part.in_place is not None and any(str(op).startswith("π") for op in part.in_place.residual), n.describe()
    feed.publish(800)
    feed.close()
    for record, q, first in ((a, a_query, a_first), (b, b_query, b_first), (n, ranged(123, 128), n_first)):
        assert buffered_results(record) == reference(q, first, feed.at)


def test_steps_that_do_not_fit_the_stream_are_refused_with_their_reason(net):
    """A step names the stream as widened and as the plan saw it; the peer works out the
    residual itself. Refused: a wide stream computed elsewhere, a wide stream that does not
    serve the narrow one, a switch where the stream is not made, an unknown step."""
    feed = Feed(net)
    a = net.peers["SP1"].control.subscribe(ranged(120, 125))
    feed.publish(100)
    sid = a.plan.parts[0].result_stream
    sp4, sp5 = net.peers["SP4"], net.peers["SP5"]
    was = sp5.state.table.get(sid)
    narrower = analyze(ranged(121, 122)).properties.inputs[0]
    cases = {
        "another origin": (sp5, "narrow", replace(was, origin="SP5")),
        "narrower": (sp5, "narrow", replace(was, properties=replace(was.properties, selection=narrower.selection))),
        "not made here": (sp5, "switch", replace(was, properties=replace(was.properties, selection=None))),
        "no such step": (sp5, "widen", was),
    }
    for name, (peer, step, wide) in cases.items():
        with pytest.raises(NodeError) as refused:
            peer.widen_stream("txn-x", step, wide, was)
        assert refused.value.code in ("INVALID_ARGUMENT", "FAILED_PRECONDITION"), (name, refused.value)
    assert not sp5.widening.held and sp4.state.table.get(sid).properties == was.properties
    feed.publish(100)
    feed.close()
    assert buffered_results(a) == reference(ranged(120, 125), WARMUP, feed.at)


def test_a_stream_widened_twice_keeps_its_first_readers_exact(net):
    """A reads ra 120–125; N widens it to 120–128, M to 118–128: A's delivery has two
    residuals in front of it, one behind the other, and every result is exact."""
    in_place(net)
    feed = Feed(net)
    sp1, sp7, sp0 = net.peers["SP1"], net.peers["SP7"], net.peers["SP0"]
    queries = [(sp1, ranged(120, 125)), (sp7, ranged(123, 128)), (sp0, ranged(118, 127))]
    subs = []
    for peer, q in queries:
        subs.append((q, peer.control.subscribe(q), feed.at))
        feed.publish(150)
    widened = [p for _, r, _ in subs for p in r.plan.parts if p.in_place is not None]
    assert len(widened) == 2 and widened[0].widened == widened[1].widened, [r.describe() for _, r, _ in subs]
    feed.publish(600)
    feed.close()
    for q, record, first in subs:
        assert buffered_results(record) == reference(q, first, feed.at)
