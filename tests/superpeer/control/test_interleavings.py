"""Random interleavings of subscribe / publish / close / unsubscribe at several super-peers, some
of them racing, with an invariant checker:

- every subscription that is not withdrawn ends exactly once (its reads end with ``closed``, and
  nothing comes after the end), however its installation and the stream's close interleave;
- its results are the reference evaluator's over the items published while it was active: the
  items from the point where it started, which lies between the published count when it was
  requested and when it was admitted (the same point for a subscription not racing a publish);
- a withdrawn subscription does not disturb the others' results;
- re-optimisation rounds (every peer's, in the background, with no margin, and rounds the
  schedule runs racing a publish) move subscriptions between plans without a gap or a
  duplicate (DESIGN.md §12);
- near misses widen running streams in place (``serve --widening``) under all of that, and
  every reader of a widened stream keeps exactly its results.

Real daemons (the paper-example topology, inline executor); hypothesis draws the schedules and
shrinks a failing one."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from network_harness import running_network, same
from photons.generator import generate
from sharing.analysis import analyze
from sharing.scenarios import example_query
from superpeer.control.reoptimisation_settings import ReoptimisationSettings
from thinpeer.client import SuperPeerClient, ThinPeerError
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = pytest.mark.slow

WHOLE = '<all>{ for $p in stream("photons")/photons/photon return $p }</all>'
NEAR = """<r>{{ for $p in stream("photons")/photons/photon where $p/coord/cel/ra >= {} and $p/coord/cel/ra <= {}
  return <x>{{ $p/coord/cel/ra }}{{ $p/en }}</x> }}</r>"""
# near misses of each other (and of q1): with --widening each may widen the stream another reads, in place
QUERIES = {"q1": example_query("q1"), "q2": example_query("q2"), "q3": example_query("q3"),
           "q4": example_query("q4"), "whole": WHOLE, "near_a": NEAR.format(120, 125), "near_b": NEAR.format(123, 128)}
PER_ITEM = ("q1", "q2", "whole", "near_a", "near_b")
PEERS = [f"SP{i}" for i in range(8)]
STRADDLING = {"q3": 2, "q4": 2}  # ceil(diff / step) of their windows: 20/10 and 60/40
END_DEADLINE_S = 30.0


@dataclass
class Sub:
    query: str
    peer: str
    sid: str
    lo: int  # items published when it was requested
    hi: int  # … and when it was admitted
    withdrawn: bool = False


@dataclass
class World:
    address: dict[str, str]
    items: list[str]
    published: int = 0
    closed: bool = False
    subs: list[Sub] = field(default_factory=list)
    rounds: dict = field(default_factory=dict)  # peer -> run a re-optimisation round there
    lock: threading.Lock = field(default_factory=threading.Lock)


def _subscribe(world: World, query: str, peer: str) -> None:
    lo = world.published
    try:
        reply = SuperPeerClient(world.address[peer]).subscribe(QUERIES[query])
    except ThinPeerError as exc:
        assert exc.code in ("RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "NOT_FOUND"), exc
        return
    with world.lock:
        world.subs.append(Sub(query, peer, reply.subscription, lo, world.published))


def _publish(world: World, n: int, publisher: SuperPeerClient) -> None:
    if world.closed:
        return
    batch = world.items[world.published:world.published + n]
    summary = publisher.publish("photons", batch)
    assert summary.accepted == len(batch), summary.reasons
    world.published += len(batch)


def _close(world: World, publisher: SuperPeerClient) -> None:
    if not world.closed:
        publisher.close_stream("photons")
        world.closed = True


OPS = st.one_of(
    st.tuples(st.just("subscribe"), st.sampled_from(sorted(QUERIES)), st.sampled_from(PEERS)),
    st.tuples(st.just("publish"), st.integers(1, 400)),
    st.tuples(st.just("race-publish"), st.sampled_from(sorted(QUERIES)), st.sampled_from(PEERS),
              st.integers(1, 40), st.integers(0, 40)),
    st.tuples(st.just("unsubscribe"), st.integers(0, 50)),
    st.tuples(st.just("reoptimise"), st.sampled_from(PEERS), st.integers(0, 200)),
)
# re-optimisation as eager as it gets: any cheaper plan, at once, in the background too
EAGER = ReoptimisationSettings(every_s=0.3, margin=0.0, cooldown_s=0.0)
# the stream closes once, somewhere in the schedule: alone, or racing a subscription
CLOSES = st.one_of(st.tuples(st.just("close")),
                   st.tuples(st.just("race-close"), st.sampled_from(sorted(QUERIES)), st.sampled_from(PEERS),
                             st.just(0), st.integers(0, 40)))


def _run(world: World, publisher: SuperPeerClient, op: tuple) -> None:
    kind = op[0]
    if kind == "subscribe":
        _subscribe(world, op[1], op[2])
    elif kind == "publish":
        _publish(world, op[1], publisher)
    elif kind in ("race-publish", "race-close"):
        # the racing call starts 0-40 ms after the subscription was requested: while it is planned,
        # reserved, committed or activated (the interleavings a deadline-based test cannot pick)
        def race() -> None:
            time.sleep(op[4] / 1000)
            if kind == "race-publish":
                _publish(world, op[3], publisher)
            else:
                _close(world, publisher)

        other = threading.Thread(target=race)
        other.start()
        _subscribe(world, op[1], op[2])
        other.join(timeout=60)
        assert not other.is_alive(), f"{kind} hung"
    elif kind == "reoptimise":  # a round at a peer while items flow
        other = threading.Thread(target=_publish, args=(world, op[2], publisher))
        other.start()
        world.rounds[op[1]]()
        other.join(timeout=60)
        assert not other.is_alive(), "publishing during a re-optimisation round hung"
    elif kind == "unsubscribe":
        live = [s for s in world.subs if not s.withdrawn]
        if live:
            s = live[op[1] % len(live)]
            SuperPeerClient(world.address[s.peer]).unsubscribe(s.sid)
            s.withdrawn = True
    elif kind == "close":
        _close(world, publisher)


def _reference(query: str, items: list[str]) -> list[str]:
    doc = StreamDocument.from_text("<photons>" + "".join(items) + "</photons>")
    return list(evaluate(analyze(QUERIES[query]).checked, doc).serialized_items())


def _check_ended_once_and_correct(world: World) -> None:
    for s in world.subs:
        if s.withdrawn:
            continue
        client = SuperPeerClient(world.address[s.peer])
        got: list[str] = []
        deadline = time.monotonic() + END_DEADLINE_S
        ended = False
        for batch in client.result_batches(s.sid, idle_timeout=END_DEADLINE_S):
            got.extend(batch.items)
            if batch.closed:
                ended = True
                break
            assert time.monotonic() < deadline, f"{s} did not end"
        assert ended, f"{s} never saw its stream end ({len(got)} results)"
        again = client.read(s.sid, offset=len(got), wait_ms=0)  # nothing after the end
        assert again.closed and not again.items, s
        assert _explained(world, s, got), (s, len(got), len(_reference(s.query, world.items[s.lo:world.published])))


def _explained(world: World, s: Sub, got: list[str]) -> bool:
    """Whether some start between the request and the admission gives exactly these results."""
    if s.query in PER_ITEM:  # item by item: a suffix of the results from the request on
        widest = _reference(s.query, world.items[s.lo:world.published])
        narrowest = _reference(s.query, world.items[s.hi:world.published])
        return len(narrowest) <= len(got) <= len(widest) and same(got, widest[len(widest) - len(got):])
    if any(same(got, _reference(s.query, world.items[start:world.published])) for start in range(s.lo, s.hi + 1)):
        return True
    # A subscription that reuses a window aggregate running since before it started gets, in the
    # windows that straddle its start (at most ceil(diff/step) of them), the earlier items too:
    # those may differ; every later window must be the reference's.
    straddling = STRADDLING[s.query]
    reference = _reference(s.query, world.items[s.lo:world.published])
    tail = min(len(got), len(reference)) - straddling
    return abs(len(got) - len(reference)) <= straddling and (tail <= 0 or same(got[-tail:], reference[-tail:]))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(ops=st.lists(OPS, min_size=4, max_size=16), close=CLOSES, at=st.floats(0.3, 1.0),
       after=st.lists(OPS, max_size=3), seed=st.integers(0, 1000))
def test_random_interleavings_end_every_subscription_once_with_the_reference_results(
        tmp_path_factory, ops, close, at, after, seed):
    schedule = ops[:int(at * len(ops))] + [close] + ops[int(at * len(ops)):] + after
    eager = {p: {"reoptimisation": EAGER, "widening": True} for p in PEERS}
    with running_network(tmp_path_factory.mktemp("net"), retention=100_000, peer_options=eager) as (topology, peers):
        address = {p: topology.address(p) for p in topology.backbone.peers}
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=100)
        items = [p.to_xml() for p in generate(8000, seed=seed)]
        world = World(address, items)
        world.rounds = {p: (lambda node=running.node: node.reoptimiser.round("test")) for p, running in peers.items()}
        _publish(world, 200, publisher)  # statistics before the first subscription
        for op in schedule:
            _run(world, publisher, op)
        _close(world, publisher)
        _check_ended_once_and_correct(world)
