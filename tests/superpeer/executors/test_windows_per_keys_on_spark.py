"""Windows partitioned by several keys (issue 36) on the Spark executor, through real daemons over
gRPC: time windows per (src, @role) and a coarser one per the keys reordered reusing its stream,
time windows per fewer keys (planned as the costs say), and count windows per two keys (numbered per combination in the scan tasks'
pieces) — the same items as the reference evaluator gives, in its order."""

from __future__ import annotations

import random

import pytest

from network_harness import reference_results, running_network, same
from thinpeer.client import SuperPeerClient

pytestmark = pytest.mark.slow
W = 'for $w in stream("evs")/evs/ev'
QUERIES = [
    ("SP1", f'<r>{{ {W} |@t diff 5 by src, @role| let $n := count($w) let $a := avg($w/en) '
            f'return <w>{{ $w/@role }}{{ $w/src }}<n>{{ $n }}</n><a>{{ $a }}</a></w> }}</r>'),
    ("SP7", f'<r>{{ {W} |@t diff 10 step 5 by @role, src| let $s := sum($w/en) '
            f'where $w/src < "Sco" return <w>{{ $w/@role }}{{ $w/src }}<s>{{ $s }}</s></w> }}</r>'),
    ("SP6", f'<r>{{ {W} |@t diff 10 by src| let $a := avg($w/en) return <w>{{ $w/src }}{{ $a }}</w> }}</r>'),
    ("SP5", f'<r>{{ {W}[en > 1] |count 4 step 2 by @role, src| let $m := max($w/en) '
            f'return <w>{{ $w/@role }}{{ $w/src }}{{ $m }}</w> }}</r>'),
]


def events(n: int) -> list[str]:
    rng = random.Random(8)
    out = []
    for k in range(n):
        role = rng.choice(["observation", "test", None])
        said = f' role="{role}"' if role else ""
        src = rng.choice(["Vela X-1", "Cen X-3", "Sco X-1", None])
        held = "" if src is None else f"<src>{src}</src>"
        out.append(f'<ev id="{k}" t="{k / 10:.1f}"{said}>{held}<en>{rng.uniform(0, 3):.2f}</en></ev>')
    return out


def test_windows_per_several_keys_on_spark(tmp_path) -> None:
    items = events(1500)
    with running_network(tmp_path, executor="spark") as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("evs", "evs", "ev", rate=100)
        publisher.publish("evs", items[:100])
        ids, plans = [], []
        for peer, query in QUERIES:
            client = SuperPeerClient(topology.address(peer))
            reply = client.subscribe(query)
            ids.append((client, reply.subscription))
            plans.append(reply.description)
        assert "reuse stream SP1." in plans[1], plans[1]  # (the keys reordered, combined in the driver)
        for k in range(100, len(items), 350):
            publisher.publish("evs", items[k:k + 350])
        publisher.close_stream("evs")
        for (client, sid), (_, query) in zip(ids, QUERIES):
            got = [item for _, item, _ in client.results(sid, idle_timeout=120)]
            expected = reference_results(query, items[100:], root="evs")
            assert len(expected) > 10 and same(got, expected), (query, len(got), len(expected))
