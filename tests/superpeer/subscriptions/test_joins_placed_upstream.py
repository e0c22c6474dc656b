"""A window join placed upstream of the subscriber (issue 36, deliverable 4): the join peer's
band join on pushed batches (``wxquery.band_join``, through ``data.network_joins``' group items)
and the subscriber's runtime reading those groups give what Saxon-HE gives for the nested loop,
whatever the interleaving of the two inputs' batches. Real runtimes; Saxon as the oracle."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from oracle import result_items, saxon_query
from test_window_joins import BANDS, _alerts, _parsed, _photons, _query, _read_all, _saxon

from sharing.analysis import analyze
from sharing.join_planning import joined_properties, residual_on_groups
from superpeer.data.network_joins import INNER, OUTER, JoinReader
from superpeer.subscriptions.runtime import SubscriptionRuntime
from wxquery.operators import definitions as alg
from wxquery.operators.items import atom_test
from wxquery.operators.records import serialize


def _placed(where: str, photons: list[str], alerts: list[str], rng: random.Random,
            running: str | None = None, query=_query) -> tuple[list[str], JoinReader]:
    """The results when the join runs at another peer: both inputs in random interleaved
    batches there, its groups over the wire (text, parsed again) into the subscriber's runtime.
    ``running``: the where clause of the joined stream's first subscriber, which this one reuses
    (its groups narrowed to this one's: ``residual_on_groups``)."""
    analysis = analyze(query('stream("photons")', 'stream("alerts")', where))
    joined = analyze(query('stream("photons")', 'stream("alerts")', running or where))
    band = joined.properties.post_processing.network_join
    assert band is not None, "the join cannot be placed"
    runtime = SubscriptionRuntime("j", analysis, 1_000_000)
    runtime.start()  # (before it learns its plan, as a subscription does)
    runtime.join_upstream(True, _narrowing(joined, analysis))
    sent_on: list[str] = []

    def emit(stream: str, values: list, end: bool, serialized, origins=None) -> None:
        texts = [serialize(v) for v in values]
        sent_on.extend(texts)
        parsed = list(etree.fromstring("<b>" + "".join(texts) + "</b>")) if texts else []
        runtime.feed(band.outer, parsed, end)

    keys = joined.properties.post_processing.network_join_keys  # (the running join's: its groups)
    reader = JoinReader("J", alg.BandJoin("a", band.outer_path, band.inner_path, band.low, band.high, keys), emit)
    inputs = {OUTER: _parsed("photons", photons), INNER: _parsed("alerts", alerts)}
    for inp in joined.properties.inputs:  # (what the network applies before the join)
        tests = [atom_test(a) for a in (inp.selection.atoms if inp.selection else ())]
        side = OUTER if inp.variable == band.outer else INNER
        inputs[side] = [i for i in inputs[side] if all(t(i) for t in tests)]
    sent = {OUTER: 0, INNER: 0}
    while any(sent[v] < len(inputs[v]) for v in inputs):
        v = rng.choice([v for v in inputs if sent[v] < len(inputs[v])])
        k = rng.randint(1, 7)
        reader.feed(v, inputs[v][sent[v]:sent[v] + k], False)
        sent[v] += k
    for v in rng.sample(sorted(inputs), 2):
        reader.feed(v, [], True)
    assert reader.ended
    return _read_all(runtime), reader


def _narrowing(running, analysis) -> tuple | None:
    """The atoms ``analysis``'s subscription tests on the groups of ``running``'s joined stream."""
    def joined(a):
        post = a.properties.post_processing
        band = post.network_join
        outer, inner = (next(i for i in a.properties.inputs if i.variable == v) for v in (band.outer, band.inner))
        return joined_properties(outer, inner, band, post.network_join_keys)

    narrowed = residual_on_groups(joined(running), joined(analysis))
    assert narrowed is not None, "the running join does not serve it"
    return narrowed


@pytest.mark.oracle
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), band=st.sampled_from(BANDS[:2]),
       narrower=st.sampled_from(["$p/en > 1", '$a/author != "ivo://nasa.gsfc.gcn/Fermi"',
                                 '$p/en >= 1.5 and $a/author = "ivo://nasa.gsfc.gcn/SWIFT"']))
def test_a_reused_join_narrowed_at_its_subscriber_gives_what_saxon_gives(seed: int, band: str, narrower: str) -> None:
    """A later subscription with the same band and further conditions on one input or both
    reads the running joined stream, its groups narrowed at its super-peer (both return the
    elements the conditions read: a joined stream serves only the same projections)."""
    rng = random.Random(seed)
    photons, alerts = _photons(rng.randint(0, 40), rng), _alerts(rng.randint(0, 15), rng)
    where = f"{band} and {narrower}"
    got, _ = _placed(where, photons, alerts, rng, running=band, query=_returning_more)
    document = "<both><photons>" + "".join(photons) + "</photons><alerts>" + "".join(alerts) + "</alerts></both>"
    assert got == result_items(saxon_query(_returning_more("/both", "/both", where), document))[1]


def _returning_more(source_p: str, source_a: str, where: str) -> str:
    return (f"<r>{{ for $p in {source_p}/photons/photon for $a in {source_a}/alerts/alert where {where} "
            f"return <m>{{ $p/id }}{{ $p/en }}{{ $a/ivorn }}{{ $a/author }}</m> }}</r>")


@pytest.mark.oracle
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), where=st.sampled_from(BANDS))
def test_a_join_placed_upstream_gives_what_saxon_gives(seed: int, where: str) -> None:
    rng = random.Random(seed)
    photons, alerts = _photons(rng.randint(0, 40), rng), _alerts(rng.randint(0, 15), rng)
    got, reader = _placed(where, photons, alerts, rng)
    assert got == _saxon(where, photons, alerts)
    status = reader.status()
    assert status["late_outer_items"] == status["late_inner_items"] == 0


def test_groups_leave_while_both_streams_flow_and_hold_only_the_band() -> None:
    """The join peer hands each outer item on once the inner input passed its band, without
    either stream ending, and keeps only the inner items the outer items to come can match."""
    rng = random.Random(3)
    photons, alerts = _photons(400, rng), _alerts(60, rng)
    groups: list = []
    reader = JoinReader("J", alg.BandJoin("a", "t", "t", -5, 2), lambda s, v, e, t, origins=None: groups.extend(v))
    p, a = _parsed("photons", photons), _parsed("alerts", alerts)
    most = 0
    for k in range(0, 400, 10):
        reader.feed(OUTER, p[k:k + 10], False)
        reader.feed(INNER, [x for x in a if float(x.findtext("t")) <= float(p[min(k + 9, 399)].findtext("t")) + 3], False)
        a = [x for x in a if float(x.findtext("t")) > float(p[min(k + 9, 399)].findtext("t")) + 3]
        most = max(most, reader.status()["kept_inner_items"])
    assert len(groups) > 100
    assert all(g.tag == "join" and g[0].tag == "photon" and all(i.tag == "alert" for i in g[1:]) for g in groups)
    assert most < 10  # (the band is 7 s wide; alerts come every 0.5–7 s)


@pytest.mark.parametrize("said, starts", [
    (("", ' o="7" i="3 4"'), {}),  # (a group handed on again after Spark restarted: no origins)
    ((' o="5" i="2"', ' o="7" i="3 4"'), {"photons": 5, "alerts": 2}),
])
def test_a_re_plan_starts_where_the_first_group_came_from_or_is_not_known(said, starts) -> None:
    """Where a reused joined stream began for a subscription is its first group's items; if
    that group did not say, it is not known (a later group's would skip the first results)."""
    analysis = analyze(_query('stream("photons")', 'stream("alerts")', BANDS[0]))
    runtime = SubscriptionRuntime("j", analysis, 1000)
    runtime.start()
    runtime.join_upstream(True)
    groups = [f"<join{attrs}><photon><id>{k}</id><t>{k}</t></photon><alert><ivorn>a{k}</ivorn><t>{k}</t></alert>"
              "</join>" for k, attrs in enumerate(said)]
    runtime.feed("p", list(etree.fromstring("<b>" + "".join(groups) + "</b>")), True)
    assert len(_read_all(runtime)) == 2
    assert runtime.join_starts() == starts
