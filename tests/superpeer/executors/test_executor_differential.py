"""The same subscriptions on two networks, one per executor, compared item by item.

Both networks get the paper's four queries and seeded random selection and window queries,
registered at different super-peers so that they share streams and reuse windows, and the same
photons (including late and non-numeric ones). Every subscription's results must be the same
items in the same order on both executors (numbers equal to 12 significant digits where window
sums are merged from panes or finer windows).
"""

from __future__ import annotations

import random

import pytest

from network_harness import running_network, same
from sharing.scenarios import example_query
from random_queries import random_pair
from thinpeer.client import SuperPeerClient
from photons.generator import generate

pytestmark = pytest.mark.slow
PEERS = ["SP0", "SP1", "SP2", "SP3", "SP5", "SP6", "SP7"]


def subscriptions() -> list[tuple[str, str]]:
    queries = [(peer, example_query(n))
               for n, peer in (("q1", "SP1"), ("q2", "SP7"), ("q3", "SP0"), ("q4", "SP6"))]
    rng = random.Random(7)
    for seed in range(14):
        queries.append((rng.choice(PEERS), random_pair(1000 + seed).wxquery))
    # values compared as strings, by codepoint ("n/a …" included), in the network as well
    head = 'for $p in stream("photons")/photons/photon'
    queries.append(("SP2", f'<s>{{ {head} where $p/phc >= "18" and $p/phc < "19" return $p/en }}</s>'))
    queries.append(("SP3", f'<s>{{ {head} where $p/en > "1.7" and $p/phc != "181" return <e>{{ $p/en }}</e> }}</s>'))
    return queries


def photons(n: int) -> list[str]:
    rng = random.Random(3)
    out = []
    for p in generate(n, seed=21, rate=40.0):
        text = p.to_xml()
        if rng.random() < 0.02:
            text = text.replace("<det_time>", "<det_time>-")  # late: counted and dropped
        elif rng.random() < 0.02:
            text = text.replace("<en>", "<en>n/a ")  # not a number: compares false
        out.append(text)
    return out


def run(tmp_path, executor: str, queries: list[tuple[str, str]], items: list[str]) -> list[list[str]]:
    (tmp_path / executor).mkdir()
    with running_network(tmp_path / executor, executor=executor) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=100)
        publisher.publish("photons", items[:300])
        ids = []
        for peer, text in queries:
            client = SuperPeerClient(topology.address(peer))
            ids.append((client, client.subscribe(text).subscription))
        for k in range(300, len(items), 500):
            publisher.publish("photons", items[k:k + 500])
        publisher.close_stream("photons")
        idle = 20 if executor == "inline" else 120
        return [[item for _, item, _ in client.results(sid, idle_timeout=idle)] for client, sid in ids]


def test_inline_and_spark_give_the_same_items(tmp_path):
    queries = subscriptions()
    items = photons(4000)
    inline = run(tmp_path, "inline", queries, items)
    spark = run(tmp_path, "spark", queries, items)
    assert sum(map(len, inline)) > 1000
    for (peer, text), a, b in zip(queries, inline, spark):
        assert same(b, a), (peer, text, len(a), len(b))
