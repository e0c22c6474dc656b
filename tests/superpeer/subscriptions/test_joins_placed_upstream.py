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
from test_window_joins import BANDS, _alerts, _parsed, _photons, _query, _read_all, _saxon

from sharing.analysis import analyze
from superpeer.data.network_joins import INNER, OUTER, JoinReader
from superpeer.subscriptions.runtime import SubscriptionRuntime
from wxquery.operators import definitions as alg
from wxquery.operators.items import atom_test
from wxquery.operators.records import serialize


def _placed(where: str, photons: list[str], alerts: list[str], rng: random.Random) -> tuple[list[str], JoinReader]:
    """The results when the join runs at another peer: both inputs in random interleaved
    batches there, its groups over the wire (text, parsed again) into the subscriber's runtime."""
    analysis = analyze(_query('stream("photons")', 'stream("alerts")', where))
    band = analysis.properties.post_processing.network_join
    assert band is not None, "the join cannot be placed"
    runtime = SubscriptionRuntime("j", analysis, 1_000_000)
    runtime.start()  # (before it learns its plan, as a subscription does)
    runtime.join_upstream(True)
    sent_on: list[str] = []

    def emit(stream: str, values: list, end: bool, serialized, origins=None) -> None:
        texts = [serialize(v) for v in values]
        sent_on.extend(texts)
        parsed = list(etree.fromstring("<b>" + "".join(texts) + "</b>")) if texts else []
        runtime.feed(band.outer, parsed, end)

    reader = JoinReader("J", alg.BandJoin("a", band.outer_path, band.inner_path, band.low, band.high), emit)
    inputs = {OUTER: _parsed("photons", photons), INNER: _parsed("alerts", alerts)}
    for inp in analysis.properties.inputs:  # (what the network applies before the join)
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
