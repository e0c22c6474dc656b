"""Window joins placed in the network, through failures (issue 36, deliverable 4): photons at
SP4, rare alerts at SP3, the join subscribed at SP1 and placed at SP4 (its joined stream routed
SP4→SP5→SP1), and at SP7, reusing it at SP5. A peer on the route killed, or the reusing
subscriber's super-peer restarted: each is planned again and joined at its own super-peer from
the streams' logs (a joined stream is not placed again yet; the plan says so), and its results
are still exactly those it would have had — nothing lost, nothing twice. Real daemon
processes, real gRPC."""

from __future__ import annotations

from pathlib import Path

import pytest
from join_streams import photons_and_alerts
from network_harness import same, until
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import LocalNetwork, up
from thinpeer.ops.topologies import shipped_topology

from sharing.analysis import analyze
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = pytest.mark.slow

JOIN = ('<r>{ for $p in stream("photons")/photons/photon for $a in stream("alerts")/alerts/alert '
        'where $a/t >= $p/t - 0.3 and $a/t <= $p/t + 0.1 and $p/en > 0.5 '
        'return <m>{ $p/en }{ $a/ivorn }</m> }</r>')
WARM = 1000


class Joins:
    """SP1's join placed at SP4; SP7's, subscribed later while items flow — just after an alert
    whose band the next photon's reaches — reusing the joined stream at SP5, with groups of it."""

    def __init__(self, network: LocalNetwork) -> None:
        self.photons, self.alerts = photons_and_alerts(5000)
        self.clients = {p: network.client(p) for p in ("SP1", "SP3", "SP4", "SP7")}
        self.clients["SP4"].register_stream("photons", "photons", "photon", rate=100)
        self.clients["SP3"].register_stream("alerts", "alerts", "alert", rate=3)
        self.sent = {"photons": 0, "alerts": 0}
        self.publish(WARM)
        until(lambda: "join placed at SP4" in self.clients["SP1"].subscribe(JOIN).description
              or _forget(self.clients["SP1"]), seconds=20)
        (self.first,) = self.clients["SP1"].status()["subscriptions"]
        self.cut = next(k for k in range(WARM + 500, len(self.photons)) if k % 37 == 1 and _en(self.photons[k]) > 0.5)
        self.publish(self.cut)
        next(iter(self.clients["SP1"].results(self.first, idle_timeout=20)))  # (the joined stream flows)
        second = self.clients["SP7"].subscribe(JOIN)
        assert "reuse joined stream" in second.description, second.description
        self.second = second.id
        self.publish(self.cut + 300)
        next(iter(self.clients["SP7"].results(self.second, idle_timeout=20)))  # (it has groups)

    def publish(self, upto: int) -> None:
        """The photons before ``upto`` and the alerts of their time, numbered (sent once)."""
        self.clients["SP4"].publish("photons", self.photons[self.sent["photons"]:upto], position=self.sent["photons"],
                                    retry_s=60)
        due = [x for t, x in self.alerts if t < upto * 0.1]
        self.clients["SP3"].publish("alerts", due[self.sent["alerts"]:], position=self.sent["alerts"], retry_s=60)
        self.sent.update(photons=upto, alerts=len(due))

    def replanned(self, peer: str, sid: str) -> dict:
        until(lambda: (lambda h: h["replans"] >= 1 and h["state"] == "ok")(_health(self.clients[peer], sid)),
              seconds=60)
        return self.clients[peer].status()["subscriptions"][sid]["plan"]

    def check(self, peers: tuple[str, ...]) -> None:
        """Every result of SP1's the reference evaluator's; SP7's a suffix of them, longer than
        a fresh join from its start would give (its first photons met earlier alerts)."""
        self.publish(len(self.photons))
        self.clients["SP4"].close_stream("photons")
        self.clients["SP3"].close_stream("alerts")
        expected = _reference(self.photons[WARM:], [x for t, x in self.alerts if t >= WARM * 0.1])
        if "SP1" in peers:
            got = [item for _, item, _ in self.clients["SP1"].results(self.first, idle_timeout=60)]
            assert len(expected) > 50 and same(got, expected), (len(got), len(expected))
        got = [item for _, item, _ in self.clients["SP7"].results(self.second, idle_timeout=60)]
        fresh = _reference(self.photons[self.cut:], [x for t, x in self.alerts if t >= self.cut * 0.1])
        assert len(got) > len(fresh) and same(got, expected[-len(got):]), (len(got), len(fresh))


def test_joins_placed_upstream_are_joined_at_their_subscribers_after_a_failure(tmp_path: Path) -> None:
    """SP5 is killed: both are planned again and joined at their own super-peers from the
    logs, SP7's from where its joined stream began for it (its first group's items)."""
    network = _start(tmp_path)
    try:
        run = Joins(network)
        network.kill("SP5")  # on the joined stream's route SP4→SP5→SP1 and on SP5→SP7
        for peer, sid in (("SP1", run.first), ("SP7", run.second)):
            plan = run.replanned(peer, sid)
            assert plan["join"].startswith(f"join at {peer} (the subscriber's super-peer)"), plan
        run.check(("SP1", "SP7"))
    finally:
        network.stop()


def test_a_reused_join_is_joined_at_its_restarted_subscriber_from_where_it_began(tmp_path: Path) -> None:
    """SP7 is killed and started again on its state: its subscription is planned again at SP7
    from where the joined stream began for it, kept with its plan when its first group came."""
    network = _start(tmp_path)
    try:
        run = Joins(network)
        network.kill("SP7")
        network.start("SP7")
        run.clients["SP7"] = network.client("SP7")
        until(lambda: _health(run.clients["SP7"], run.second)["state"] == "ok", seconds=60)
        run.check(("SP7",))
    finally:
        network.stop()


def _health(client, sid: str) -> dict:
    try:
        return client.status()["subscriptions"][sid]["health"]
    except Exception:  # noqa: BLE001 - its super-peer is starting again
        return {"state": "unknown", "replans": 0}


def _start(tmp_path: Path) -> LocalNetwork:
    """The paper's network with the default heartbeats: on a busy machine the fast ones of
    ``test_crash_recovery`` took a slow peer for dead now and then, and SP1's join was planned
    again at SP1 before SP7 could reuse it."""
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    return up(path, state_dir=tmp_path / "state")


def _en(photon: str) -> float:
    return float(photon.split("<en>")[1].split("<")[0])


def _reference(photons: list[str], alerts: list[str]) -> list[str]:
    documents = {"photons": StreamDocument.from_text("<photons>" + "".join(photons) + "</photons>"),
                 "alerts": StreamDocument.from_text("<alerts>" + "".join(alerts) + "</alerts>")}
    return list(evaluate(analyze(JOIN).checked, documents).serialized_items())


def _forget(client) -> bool:
    """A plan made before the warm-up's statistics arrived: subscribe again (False: not yet)."""
    for sid in list(client.status()["subscriptions"]):
        client.unsubscribe(sid)
    return False
