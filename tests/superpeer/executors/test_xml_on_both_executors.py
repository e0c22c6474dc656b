"""Strings, attributes and partitioned windows (issue 36) through real daemons over gRPC, on each
executor: filters on attribute and element strings, attributes kept by projections and put on
results, a time window whose reference is an attribute, and windows per key (count and time, on
an element and on an attribute, one reused by a coarser one) — the same items as the reference
evaluator gives, in its order, on the inline executor and on Spark. Two window joins of the events
with a second stream, on an element string and a band of their time attributes, the second
narrower than the first."""

from __future__ import annotations

import random

import pytest

from network_harness import reference_results, running_network, same
from sharing.analysis import analyze
from thinpeer.client import SuperPeerClient
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = pytest.mark.slow
HEAD = 'for $e in stream("evs")/evs/ev'
QUERIES = [
    ("SP1", f'<r>{{ {HEAD} where $e/@role = "observation" and $e/src >= "GX" '
            f'return <a>{{ $e/@id }}{{ $e/src }}{{ $e/pos }}</a> }}</r>'),
    ("SP7", f'<r>{{ {HEAD} where $e/@role = "observation" and $e/src >= "GX" and $e/pos/@ra > 100 '
            f'return <a>{{ $e/@id }}</a> }}</r>'),
    ("SP6", f'<r>{{ {HEAD}[@role != "test"] where $e/pos/@dec < 0 return <b>{{ $e/pos/@ra }}{{ $e/en }}</b> }}</r>'),
    ("SP0", '<r>{ for $w in stream("evs")/evs/ev |@t diff 5 step 2.5| let $n := count($w) '
            'let $m := max($w/pos/@ra) return <w><n>{ $n }</n><m>{ $m }</m></w> }</r>'),
    ("SP1", ('<r>{ for $w in stream("evs")/evs/ev |@t diff 5 by src| let $n := count($w) '
             'let $a := avg($w/en) return <w>{ $w/src }<n>{ $n }</n><a>{ $a }</a></w> }</r>')),
    ("SP7", ('<r>{ for $w in stream("evs")/evs/ev |@t diff 10 step 5 by src| let $s := sum($w/en) '
             'where $w/src < "Sco" return <w>{ $w/src }<s>{ $s }</s></w> }</r>')),
    ("SP5", ('<r>{ for $w in stream("evs")/evs/ev[en > 1] |count 4 step 2 by @role| let $m := min($w/pos/@dec) '
             'return <w>{ $w/@role }{ $m }</w> }</r>')),
]


JOIN = ('<r>{{ for $e in stream("evs")/evs/ev for $a in stream("alerts")/alerts/alert '
        'where $a/@t >= $e/@t - {before} and $a/@t <= $e/@t + 1 and $a/src = $e/src and $e/en > {en} '
        'return <m>{{ $e/@id }}<a>{{ $a/@id }}</a>{{ $a/src }}</m> }}</r>')
JOINS = [("SP1", JOIN.format(before=2, en=1)), ("SP7", JOIN.format(before=1, en=1.5))]


def alerts(n: int) -> list[str]:
    rng = random.Random(5)
    return [f'<alert id="a{k}" t="{k * 0.7:.1f}"><src>{rng.choice(["Vela X-1", "Sco X-1"])}</src></alert>'
            for k in range(n)]


def events(n: int) -> list[str]:
    rng = random.Random(4)
    out = []
    for k in range(n):
        role = rng.choice(["observation", "test", None])
        said = f' role="{role}"' if role else ""
        src = rng.choice(["Vela X-1", "GX 301-2", "Cen X-3", "Sco X-1"])
        out.append(f'<ev id="{k}" t="{k / 10:.1f}"{said}><src>{src}</src><pos ra="{rng.uniform(0, 360):.3f}" '
                   f'dec="{rng.uniform(-90, 90):.3f}"/><en>{rng.uniform(0, 3):.2f}</en></ev>')
    return out


@pytest.mark.parametrize("executor", ["inline", "spark"])
def test_strings_and_attributes_through_real_daemons(tmp_path, executor: str) -> None:
    items, others = events(1500), alerts(215)
    with running_network(tmp_path, executor=executor) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("evs", "evs", "ev", rate=100)
        publisher.publish("evs", items[:100])
        second = SuperPeerClient(topology.address("SP2"))
        second.register_stream("alerts", "alerts", "alert", rate=10)
        ids, plans = [], []
        for peer, query in QUERIES + JOINS:
            client = SuperPeerClient(topology.address(peer))
            reply = client.subscribe(query)
            ids.append((client, reply.subscription))
            plans.append(reply.description)
        assert "reuse stream SP1." in plans[-1], plans[-1]  # (the second join reads the first's alerts)
        for k in range(100, len(items), 350):
            publisher.publish("evs", items[k:k + 350])
            second.publish("alerts", [a for a in others  # (those up to the events' latest time)
                                      if (k > 100) * k / 10 <= float(a.split('t="')[1].split('"')[0]) < (k + 350) / 10])
        publisher.close_stream("evs")
        second.close_stream("alerts")
        idle = 20 if executor == "inline" else 120
        for (client, sid), (_, query) in zip(ids, QUERIES + JOINS):
            got = [item for _, item, _ in client.results(sid, idle_timeout=idle)]
            if (_, query) in JOINS:
                documents = {"evs": StreamDocument.from_text("<evs>" + "".join(items[100:]) + "</evs>"),
                             "alerts": StreamDocument.from_text("<alerts>" + "".join(others) + "</alerts>")}
                expected = list(evaluate(analyze(query).checked, documents).serialized_items())
            else:
                expected = reference_results(query, items[100:], root="evs")
            assert expected and same(got, expected), (executor, query, len(got), len(expected))
