"""Super-peers killed with ``kill -9`` mid-stream and started again on their state directory:
every subscriber's results are still exactly the reference evaluator's over the items published
after it subscribed — nothing lost, nothing duplicated, order kept, window aggregates included.

* an intermediate peer with another path around it: the subscriptions are planned again at once;
* an intermediate peer on the only path: degraded (with the reason) until it is back, then
  complete;
* the subscriber's own super-peer: it takes its subscriptions and results back, and a reader
  resuming from its offset sees no gap;
* the publisher's super-peer: the publisher's numbered batches wait for it and continue where it
  stood, and every subscription is fed again from the stream's log.

Real daemon processes (``network up``), real gRPC, the reference evaluator as the oracle."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from approximate_cases import WINDOWS as APPROX_WINDOWS
from approximate_cases import scaled
from lxml import etree
from network_harness import reference_results, same, until

from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.approximation import merged
from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import LocalNetwork, up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology
from wxquery.operators.sampling import kept

pytestmark = pytest.mark.slow

FAST_HEARTBEATS = ("--heartbeat-s", "0.3", "--heartbeat-misses", "2")
LINE = """
[[superpeer]]
id = "A"
address = "127.0.0.1:1"
[[superpeer]]
id = "B"
address = "127.0.0.1:2"
[[superpeer]]
id = "C"
address = "127.0.0.1:3"
[[link]]
a = "A"
b = "B"
bandwidth = 100e6
[[link]]
a = "B"
b = "C"
bandwidth = 100e6
"""


def start(tmp_path: Path, topology: str) -> LocalNetwork:
    source = tmp_path / "line-source.toml"
    if topology == "line":
        source.write_text(LINE)
    path = with_free_ports(str(source) if topology == "line" else shipped_topology(topology),
                           tmp_path / f"{topology}.toml")
    return up(path, state_dir=tmp_path / "state", serve_args=FAST_HEARTBEATS)


class Run:
    """One stream published from ``publisher`` in numbered batches (so a restarted super-peer
    is waited for and nothing is sent twice), and subscriptions whose results are checked."""

    def __init__(self, network: LocalNetwork, publisher: str, queries: dict[str, str], n: int = 3000,
                 seed: int = 7, texts: dict[str, str] | None = None) -> None:
        """``texts``: a query's text by name (else the shipped example of that name)."""
        self.network = network
        self.texts = {name: (texts or {}).get(name) or example_query(name) for name in queries}
        self.address = network.addresses
        self.publisher = SuperPeerClient(self.address[publisher])
        self.publisher.register_stream("photons", "photons", "photon", rate=500)
        self.photons = [p.to_xml() for p in generate(n, seed=seed)]
        self.publisher.publish("photons", self.photons[:200], position=0)
        time.sleep(1.0)  # a heartbeat round: every peer has the statistics
        self.subs = {name: (peer, SuperPeerClient(self.address[peer]).subscribe(self.texts[name]).subscription)
                     for name, peer in queries.items()}
        self.done = threading.Event()
        self.error: list[BaseException] = []

    def publish_rest(self, rate: float = 1000) -> None:
        def run() -> None:
            try:
                client = SuperPeerClient(self.address[self.publisher_peer()])
                client.publish("photons", self.photons[200:], rate=rate, position=200, retry_s=120)
                until(lambda: _close(client), seconds=120)
                self.done.set()
            except BaseException as exc:  # noqa: BLE001 - reported by check()
                self.error.append(exc)
        threading.Thread(target=run, daemon=True).start()

    def publisher_peer(self) -> str:
        return next(p for p, a in self.address.items() if a == self.publisher.address)

    def health(self, name: str) -> dict:
        peer, sid = self.subs[name]
        try:
            return SuperPeerClient(self.address[peer]).status()["subscriptions"][sid]["health"]
        except Exception:  # noqa: BLE001 - its super-peer is starting again
            return {"state": "unknown", "replans": 0, "reason": "", "last_failure": ""}

    def plan_history(self, name: str) -> list[dict]:
        peer, sid = self.subs[name]
        return SuperPeerClient(self.address[peer]).status()["subscriptions"][sid]["plan_history"]

    def check(self, names: tuple[str, ...] | None = None) -> None:
        assert self.done.wait(180), f"publishing did not finish: {self.error}"
        for name, (peer, sid) in self.subs.items():
            if names is not None and name not in names:
                continue
            got = [item for _, item, _ in SuperPeerClient(self.address[peer]).results(sid, idle_timeout=60)]
            expected = reference_results(self.texts[name], self.photons[200:])
            assert expected and same(got, expected), (name, len(got), len(expected))


def _status(address: str) -> dict | None:
    try:
        return SuperPeerClient(address).status()
    except Exception:  # noqa: BLE001 - not answering yet
        return None


def _close(client: SuperPeerClient) -> bool:
    try:
        client.close_stream("photons")
        return True
    except Exception:  # noqa: BLE001 - the super-peer is starting again
        return False


def test_an_intermediate_peer_killed_with_another_path_around_it(tmp_path: Path) -> None:
    network = start(tmp_path, "paper-example")
    try:
        run = Run(network, "SP4", {"q1": "SP1", "q2": "SP7", "q3": "SP1"})
        run.publish_rest()
        time.sleep(0.8)
        network.kill("SP5")  # on every route: SP4→SP5→SP1 and SP5→SP7
        for name in run.subs:  # planned again around SP5 (SP4→SP3→SP2→…)
            until(lambda: run.health(name)["replans"] >= 1 and run.health(name)["state"] == "ok",
                  seconds=30)
            assert "SP5" in run.health(name)["last_failure"]
        # per-item subscriptions go on from the item after the last one they had, not from their
        # first; a time window computed in the network is recomputed
        for name in ("q1", "q2"):
            failure = next(e for e in run.plan_history(name) if e["why"].startswith("failure"))
            assert failure["resumed_at_item"]["p"] > 200, failure
        failure = next(e for e in run.plan_history("q3") if e["why"].startswith("failure"))
        assert "resumed_at_item" not in failure and "not per-item" in failure["not_resumed"], failure
        network.start("SP5")  # it comes back empty; nothing is planned twice
        run.check()
    finally:
        network.stop()


def test_an_intermediate_peer_killed_on_the_only_path(tmp_path: Path) -> None:
    network = start(tmp_path, "line")
    try:
        run = Run(network, "A", {"q1": "C", "q3": "C"})
        run.publish_rest()
        time.sleep(0.8)
        network.kill("B")
        for name in run.subs:
            until(lambda: run.health(name)["state"] == "degraded"
                  and "no other path" in run.health(name)["reason"], seconds=30)
            # (A stops hearing B a round before C declares B down: either is the reason given; on a
            # loaded machine B's last heartbeat answer may already have said it missed A's, or C's
            # report that B is gone may come first: the link B–C is then the one named)
            assert any(why in run.health(name)["reason"] for why in ("B on its route is down", "A does not hear B",
                                                                      "B does not hear A", "link B–C on its route is down")
                       ), run.health(name)
            peer, sid = run.subs[name]  # the subscriber sees it with its results
            assert "no other path" in SuperPeerClient(run.address[peer]).read(sid, 0, max_items=1, wait_ms=0).degraded
        time.sleep(1.0)  # publishing goes on into A's log meanwhile
        network.start("B")
        for name in run.subs:
            until(lambda: run.health(name)["state"] == "ok" and run.health(name)["replans"] >= 1,
                  seconds=30)
        run.check()
    finally:
        network.stop()


def test_the_subscribers_own_superpeer_restarted(tmp_path: Path) -> None:
    network = start(tmp_path, "paper-example")
    try:
        run = Run(network, "SP4", {"q1": "SP1", "q3": "SP1"})
        peer, sid = run.subs["q1"]
        reader = SuperPeerClient(run.address[peer])
        got = []
        run.publish_rest(rate=800)
        for offset, item, _ in reader.results(sid, idle_timeout=30):
            got.append(item)
            if len(got) >= 5:
                break
        network.kill("SP1")
        time.sleep(0.5)
        network.start("SP1")
        reader = SuperPeerClient(run.address[peer])
        got += [item for _, item, _ in reader.results(sid, offset=len(got), idle_timeout=60)]
        expected = reference_results(example_query("q1"), run.photons[200:])
        assert same(got, expected), (len(got), len(expected))
        run.check(("q3",))  # (q1's results were all read: released)
    finally:
        network.stop()


def test_a_subscription_passing_its_items_through_resumes_after_its_superpeer_restarted(tmp_path: Path) -> None:
    """Its kept results are exactly those of the photons before some item (stored with them):
    the re-plan after the restart starts the new copy there, instead of the stream's first item,
    and the results go on from the kept ones — none missing, none twice."""
    network = start(tmp_path, "paper-example")
    try:
        selected = ('<r>{ for $p in stream("photons")/photons/photon where $p/coord/cel/ra >= 125 '
                    "return $p }</r>")
        run = Run(network, "SP4", {"s": "SP1"}, n=6000, texts={"s": selected})
        run.publish_rest(rate=1000)
        peer, sid = run.subs["s"]
        until(lambda: SuperPeerClient(run.address[peer]).status()["subscriptions"][sid]["results"] > 900,
              seconds=30)
        network.kill("SP1")
        time.sleep(0.5)
        network.start("SP1")
        until(lambda: any("resumed_at_item" in e or "recomputed_from_item" in e for e in run.plan_history("s")),
              seconds=60)
        failure = next(e for e in run.plan_history("s") if e["why"].startswith("failure"))
        assert failure["resumed_at_item"]["p"] > 200, failure
        run.check()
    finally:
        network.stop()


def test_an_approximate_subscriptions_superpeer_restarted(tmp_path: Path) -> None:
    """Admitted on a sample under overload: planned again after its super-peer restarts, it
    samples the replay at the stream's super-peer (shipping the log whole would overload the
    link again), and its results and its windows' intervals go on where they were — each
    window's interval once over the reads before and after the restart."""
    network = start(tmp_path, "paper-example")
    try:
        address = network.addresses
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=120_000)  # whole: SP4 overloads
        photons = [p.to_xml() for p in generate(8000, seed=21)]
        reply = SuperPeerClient(address["SP1"]).subscribe(APPROX_WINDOWS, approximate=True)
        rate = reply.sample
        assert rate > 1, reply.description
        publisher.publish("photons", photons[:5000], position=0)
        got, elements = [], []
        for batch in SuperPeerClient(address["SP1"]).result_batches(reply.subscription, idle_timeout=30,
                                                                     max_items=5):
            got.extend(batch.items)
            elements.append(batch.approximation)
            if len(got) >= 6:  # (the first part's windows are not all read: some come after)
                break
        network.kill("SP1")
        network.start("SP1")

        def health() -> dict:
            return (_status(address["SP1"]) or {}).get("subscriptions", {}).get(reply.subscription, {}).get("health", {})

        # planned again (the whole log to SP1 would not fit: sampled at SP4), not left degraded
        until(lambda: health().get("state") == "ok" and health().get("replans", 0) >= 1, seconds=60,
              what=lambda: str(health()))
        publisher.publish("photons", photons[5000:], position=5000)
        until(lambda: _close(publisher), seconds=60)
        reader = SuperPeerClient(address["SP1"])
        for batch in reader.result_batches(reply.subscription, offset=len(got), idle_timeout=60, max_items=5):
            got.extend(batch.items)
            elements.append(batch.approximation)
        sampled = [p for p, keep in zip(photons, kept(photons, rate)) if keep]
        expected = scaled(reference_results(APPROX_WINDOWS, sampled), rate)
        assert expected and same(got, expected), (len(got), len(expected))
        ks = [int(w.get("k")) for w in etree.fromstring(merged(elements)).iterfind(
            "{urn:streamglobe:approximation}window")]
        assert ks == sorted(set(ks)) and len(ks) == len(got), ks  # every window once, in order
        status = reader.status()["subscriptions"][reply.subscription]
        assert status["health"]["replans"] >= 1 and status["sample"] == rate, status
        [part] = status["plan"]["parts"]  # the sample and the windows run where the stream is
        assert part["operator_peer"] == "SP4" and part["route"] == ["SP4", "SP5", "SP1"], part
    finally:
        network.stop()


def test_the_publishers_superpeer_restarted(tmp_path: Path) -> None:
    network = start(tmp_path, "paper-example")
    try:
        run = Run(network, "SP4", {"q1": "SP1", "q2": "SP7", "q3": "SP0"})
        run.publish_rest()
        time.sleep(0.8)
        network.kill("SP4")
        time.sleep(0.5)
        network.start("SP4")
        status = until(lambda: _status(run.address["SP4"]))  # (the client reconnects with back-off)
        assert status["streams_registered_here"]["photons"]["next_position"] >= 200
        # (learnt again from the log: what it had observed before the kill is not forgotten)
        assert status["streams_registered_here"]["photons"]["statistics"]["items_observed"] >= 200
        run.check()
        for name in run.subs:
            assert run.health(name)["replans"] >= 1
    finally:
        network.stop()


def test_subscriptions_registered_while_items_flow_are_recomputed_exactly(tmp_path: Path) -> None:
    """The raw stream already flows to SP1 (a data-shipping subscription) when q1 subscribes
    there, while items keep coming: its selection branches off the raw stream at a peer items
    are still travelling to. q2 and q3 subscribe after it and read q1's stream (shared, begun
    earlier). After SP5 is killed, each is recomputed from the log through the same chain,
    from where each stream of it began: its results are the reference over the items from its
    first one on — the first photon of q1's stream it read."""
    network = start(tmp_path, "paper-example")
    try:
        run = Run(network, "SP4", {}, n=9000)
        sp1 = SuperPeerClient(run.address["SP1"])
        raw = sp1.subscribe(RAW, strategy="data-shipping").subscription
        killed = threading.Event()

        def publish() -> None:  # the first part while they subscribe, the rest after the kill
            try:
                client = SuperPeerClient(run.address["SP4"])
                client.publish("photons", run.photons[200:6000], rate=1500, position=200)
                killed.wait(120)
                client.publish("photons", run.photons[6000:], rate=3000, position=6000, retry_s=120)
                until(lambda: _close(client), seconds=120)
                run.done.set()
            except BaseException as exc:  # noqa: BLE001 - reported below
                run.error.append(exc)
        threading.Thread(target=publish, daemon=True).start()
        results = lambda sid: sp1.status()["subscriptions"][sid]["results"]  # noqa: E731
        until(lambda: results(raw) > 300, seconds=30)
        run.subs = {"q1": ("SP1", sp1.subscribe(example_query("q1")).subscription)}
        until(lambda: results(run.subs["q1"][1]) > 20, seconds=30)
        run.subs |= {name: ("SP1", sp1.subscribe(example_query(name)).subscription) for name in ("q2", "q3")}
        chains = {name: sp1.status()["subscriptions"][sid]["replay_from"]["p" if name != "q3" else "w"]
                  for name, (_, sid) in run.subs.items()}
        q1_start = chains["q1"]["log_item"]
        assert chains["q1"]["levels"] == [q1_start] and 200 < q1_start < 6000, chains
        # every one has results from its first plan: the recomputation must meet them exactly
        until(lambda: all(results(sid) > 0 for _, sid in run.subs.values()), seconds=60)
        network.kill("SP5")
        for name in run.subs:
            until(lambda: run.health(name)["replans"] >= 1 and run.health(name)["state"] == "ok", seconds=30,
                  what=lambda: f"{name}: {run.health(name)}")
        killed.set()
        assert run.done.wait(180), run.error
        # q1's stream: the photons its selection keeps, numbered from q1's first one
        kept = {_key(x) for x in reference_results(example_query("q1"), run.photons[q1_start:])}
        q1_stream = [i for i, p in enumerate(run.photons) if i >= q1_start and _key(p) in kept]
        for name, (_, sid) in run.subs.items():
            chain = chains[name]
            if name == "q1":
                first = q1_start
            else:  # q1's selection, then its own operators from the q1 item it began with
                assert chain["levels"][0] == q1_start and len(chain["levels"]) == 2, chain
                first = q1_stream[chain["levels"][1]]
            got = [item for _, item, _ in sp1.results(sid, idle_timeout=60)]
            expected = reference_results(example_query(name), run.photons[first:])
            assert expected and same(got, expected), (name, chain, len(got), len(expected))
    finally:
        network.stop()


def _key(photon: str) -> tuple:
    """What identifies a photon in q1's results (which keep these elements)."""
    el = etree.fromstring(photon)
    return tuple(el.findtext(f".//{name}") for name in ("ra", "dec", "phc", "en", "det_time"))


RAW = """<photons>
  { for $p in stream("photons")/photons/photon return $p }
</photons>"""
