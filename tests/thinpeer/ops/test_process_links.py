"""`network cut` between daemon processes: the cut link carries nothing either way, the failure
detectors see it down, a subscription whose items crossed it is planned around it, and its
results stay exactly the reference results; `restore` brings the link back. Real daemons."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from network_harness import reference_results, same, until
from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import NetworkError, ProcessLauncher, up
from thinpeer.ops.topologies import shipped_topology

pytestmark = pytest.mark.slow


def test_a_cut_link_between_processes_is_routed_around_and_restored(tmp_path: Path) -> None:
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    state = tmp_path / "state"
    network = up(path, state_dir=state, serve_args=("--heartbeat-s", "0.3", "--heartbeat-misses", "2"),
                 secure=False)
    launcher = ProcessLauncher(state)
    try:
        address = network.addresses
        publisher = SuperPeerClient(address["SP4"])
        publisher.register_stream("photons", "photons", "photon", rate=500)
        photons = [p.to_xml() for p in generate(2000, seed=5)]
        publisher.publish("photons", photons[:200])
        subscriber = SuperPeerClient(address["SP1"])
        sid = subscriber.subscribe(example_query("q1")).subscription  # SP4→SP5→SP1
        done = threading.Event()

        def publish() -> None:
            publisher.publish("photons", photons[200:], rate=1000)
            publisher.close_stream("photons")
            done.set()

        threading.Thread(target=publish, daemon=True).start()
        said = launcher.cut("SP4", "SP5")
        assert said == "cut the link SP4–SP5 (both ways)", said
        sp4, sp5 = (SuperPeerClient(address[p]) for p in ("SP4", "SP5"))
        for here, there in ((sp4, "SP4–SP5"), (sp5, "SP5–SP4")):
            until(lambda: here.status()["failure_detector"]["links"][there]["state"] == "down")
        assert sp4.status()["cut_links"] == ["SP5"] and launcher.status()["cut_links"] == [["SP4", "SP5"]]

        def health() -> dict:
            return subscriber.status()["subscriptions"][sid]["health"]

        until(lambda: health()["replans"] >= 1 and health()["state"] == "ok", seconds=60, what=lambda: str(health()))
        [part] = subscriber.status()["subscriptions"][sid]["plan"]["parts"]
        assert part["route"][:2] != ["SP4", "SP5"], part  # (planned around the cut)
        assert launcher.restore("SP5", "SP4") == "restored the link SP5–SP4"
        until(lambda: sp4.status()["failure_detector"]["links"]["SP4–SP5"]["state"] == "up")
        assert done.wait(60), "publishing did not finish"
        got = [item for _, item, _ in subscriber.results(sid, idle_timeout=30)]
        expected = reference_results(example_query("q1"), photons[200:])
        assert expected and same(got, expected), (len(got), len(expected))
        with pytest.raises(NetworkError, match="SP4–SP1 is not a link of the backbone"):
            launcher.cut("SP4", "SP1")
    finally:
        network.stop()
