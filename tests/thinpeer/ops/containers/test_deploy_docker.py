"""The network in containers, as a user drives it from the host: images built from nothing,
`deploy up` on the paper example, subscriptions and photons from the host at the printed
addresses (results equal the reference evaluator), a shaped link carrying its bandwidth, and a
killed super-peer that no route needs leaving every subscription served.

Needs a Docker engine and docker-compose. Without them the tests are skipped, except in CI
(``CI=true``), where a missing engine is a failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from network_harness import same
from photons.generator import generate
from sharing.analysis import analyze
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials
from thinpeer.ops.containers.compose import Deployment
from thinpeer.ops.containers.images import DeployError
from thinpeer.ops.containers.project import credentials
from thinpeer.ops.containers.measure import link_rate
from wxquery.evaluator import evaluate
from wxquery.stream_document import StreamDocument

pytestmark = [pytest.mark.slow, pytest.mark.docker]
CLI = [sys.executable, "-m", "thinpeer.cli"]
PROJECT = "sgtest"


def _engine() -> str | None:
    if shutil.which("docker") is None or shutil.which("docker-compose") is None:
        return "docker or docker-compose is not installed"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "the Docker engine does not answer"
    return None


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    missing = _engine()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the Docker engine: {missing}")
        pytest.skip(missing)
    state = tmp_path_factory.mktemp("deploy")
    up = subprocess.run([*CLI, "deploy", "up", "--topology", "paper-example", "--project", PROJECT,
                         "--state-dir", str(state)], capture_output=True, text=True, timeout=1500)
    try:
        assert up.returncode == 0, up.stderr
        addresses = json.loads(up.stdout)
        assert sorted(addresses) == [f"SP{i}" for i in range(8)]
        with pytest.MonkeyPatch.context() as env:  # secure by default: the admin's CA and token
            env.setenv("STREAMGLOBE_CA", str(state / PROJECT / "tls" / "ca.pem"))
            env.setenv("STREAMGLOBE_TOKEN", (state / PROJECT / "admin.token").read_text().strip())
            yield addresses, Deployment.load(state / PROJECT), state
    finally:
        down = subprocess.run([*CLI, "deploy", "down", "--project", PROJECT, "--state-dir", str(state)],
                              capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr


def test_the_default_deployment_is_secure(deployed) -> None:
    """TLS with the deployment's CA and a token, or nothing: plaintext and token-less calls fail."""
    addresses, _, state = deployed
    ca = state / PROJECT / "tls" / "ca.pem"
    with pytest.raises(ThinPeerError) as plain:
        SuperPeerClient(addresses["SP1"], credentials=Credentials()).status()
    assert plain.value.code == "UNAVAILABLE"
    with pytest.raises(ThinPeerError) as anonymous:
        SuperPeerClient(addresses["SP1"], credentials=Credentials(ca.read_bytes())).status()
    assert anonymous.value.code == "UNAUTHENTICATED"
    assert "SP1" == SuperPeerClient(addresses["SP1"]).status()["superpeer"]  # the admin's (fixture)
    exports = subprocess.run([*CLI, "deploy", "credentials", "--project", PROJECT, "--state-dir", str(state)],
                             capture_output=True, text=True, timeout=120).stdout.strip()
    assert exports == (f"export STREAMGLOBE_CA={ca.resolve()} "
                       f"STREAMGLOBE_TOKEN=$(cat {(state / PROJECT / 'admin.token').resolve()})"), exports


def test_the_web_view_reads_the_containers_from_the_host(deployed) -> None:
    """What ``deploy up --ui-port`` serves: the backbone read inside the containers, every
    super-peer reached at its host address with the admin's credentials."""
    from thinpeer.ops.ui.collector import Collector

    addresses, _, _ = deployed
    collector = Collector(addresses["SP1"], Credentials.resolve(), addresses=addresses)
    try:
        snapshot = collector.round()
    finally:
        collector.stop()
    assert not snapshot["error"], snapshot["error"]
    assert sorted(p["id"] for p in snapshot["superpeers"] if p["up"]) == sorted(addresses)
    assert len(snapshot["links"]) == 10 and snapshot["user"] is None  # an admin sees everything


def _reference(query: str, items: list[str]) -> list[str]:
    doc = StreamDocument.from_text("<photons>" + "".join(items) + "</photons>")
    return list(evaluate(analyze(query).checked, doc).serialized_items())


def _routes(addresses: dict[str, str]) -> set[str]:
    """Every super-peer that some stream's route passes."""
    used: set[str] = set()
    for address in addresses.values():
        for entry in SuperPeerClient(address).status()["stream_table"]:
            used.update(entry["route"])
    return used


def test_paper_example_in_containers_served_from_the_host(deployed) -> None:
    addresses, deployment, state = deployed
    publisher = SuperPeerClient(addresses["SP4"])
    publisher.register_stream("photons", "photons", "photon", rate=500)
    photons = [p.to_xml() for p in generate(1500, seed=23)]
    publisher.publish("photons", photons[:300])  # statistics before the subscriptions
    subscriptions = {}
    for name, peer in (("q1", "SP1"), ("q2", "SP7"), ("q4", "SP6")):
        client = SuperPeerClient(addresses[peer])
        subscriptions[name] = (client, client.subscribe(example_query(name)))
    spare = sorted(set(addresses) - _routes(addresses) - {"SP4"})
    assert spare, "every super-peer carries a route"
    killed = subprocess.run([*CLI, "deploy", "kill", spare[0], "--project", PROJECT, "--state-dir", str(state)],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == 0, killed.stderr
    summary = publisher.publish("photons", photons[300:])
    assert summary.accepted == 1200
    publisher.close_stream("photons")
    for name, (client, reply) in subscriptions.items():
        got = [item for _, item, _ in client.results(reply.subscription, idle_timeout=60)]
        expected = _reference(example_query(name), photons[300:])
        assert expected and same(got, expected), (name, len(got), len(expected))
    status = json.loads(subprocess.run([*CLI, "deploy", "status", "--project", PROJECT, "--state-dir", str(state)],
                                       capture_output=True, text=True, timeout=120).stdout)
    assert status["superpeers"][spare[0]]["status"] == "exited"
    assert status["superpeers"]["SP4"]["health"] == "healthy"
    started = subprocess.run([*CLI, "deploy", "start", spare[0], "--project", PROJECT, "--state-dir", str(state)],
                             capture_output=True, text=True, timeout=300)
    assert started.returncode == 0, started.stderr


def test_a_shaped_link_carries_its_bandwidth(deployed) -> None:
    addresses, deployment, state = deployed
    r = subprocess.run([*CLI, "deploy", "bandwidth", "SP4", "SP5", "20mbit", "--project", PROJECT,
                        "--state-dir", str(state)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    deployment = Deployment.load(state / PROJECT)
    shaped = link_rate(deployment, "SP4", "SP5", seconds=4)
    assert shaped["configured_bit_s"] == 20_000_000
    assert abs(shaped["measured_bit_s"] - 20e6) <= 0.25 * 20e6, shaped
    status = json.loads(subprocess.run([*CLI, "deploy", "status", "--project", PROJECT, "--state-dir", str(state)],
                                       capture_output=True, text=True, timeout=120).stdout)
    enforced = {(l["from"], l["to"]): l["enforced"] for l in status["links"]}
    assert enforced[("SP4", "SP5")] == enforced[("SP5", "SP4")] == "20Mbit", enforced


def test_a_link_far_slower_than_the_publisher_holds_it_back_and_loses_nothing(deployed) -> None:
    """~30 MB published at full speed into a link shaped to 16 Mbit/s: every item arrives once,
    in order; the sender in front of the slow link holds a few megabytes at most (its link
    buffer and a batch), and the publisher is told it was held back, and by what."""
    addresses, deployment, state = deployed
    args = ["--project", PROJECT, "--state-dir", str(state)]
    r = subprocess.run([*CLI, "deploy", "bandwidth", "SP4", "SP5", "16mbit", *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    stream = "flood"
    publisher, reader = SuperPeerClient(addresses["SP4"]), SuperPeerClient(addresses["SP1"])
    publisher.register_stream(stream, "photons", "photon")
    photons = [p.to_xml() for p in generate(170_000, seed=31)]
    assert sum(map(len, photons)) > 28e6
    publisher.publish(stream, photons[:100])
    sid = reader.subscribe(f'<all>{{ for $p in stream("{stream}")/photons/photon return $p }}</all>').id
    plan = reader.status()["subscriptions"][sid]["plan"]["parts"][0]["route"]
    assert plan[:2] == ["SP4", "SP5"], plan  # (the shaped link is on its way)
    started = time.monotonic()
    summary = publisher.publish(stream, photons[100:])
    publisher.close_stream(stream)
    took = time.monotonic() - started
    got = [item for _, item, _ in reader.results(sid, idle_timeout=120)]
    assert got == photons[100:], (len(got), len(photons) - 100)
    link = publisher.status()["links"]["SP4->SP5"]
    assert link["dropped"] == 0 and link["peak_held_bytes"] <= 6 << 20, link
    assert summary.held_back_s > 0 and "SP5" in summary.held_back, summary
    assert took > 8, took  # (held to the link's rate: ~30 MB at 2 MB/s)


def test_a_cut_link_drops_everything_until_restored(deployed) -> None:
    addresses, deployment, state = deployed
    args = ["--project", PROJECT, "--state-dir", str(state)]
    assert subprocess.run([*CLI, "deploy", "cut", "SP6", "SP7", *args], capture_output=True, timeout=120).returncode == 0
    cut = {(l["from"], l["to"]): l["cut"] for l in json.loads(subprocess.run(
        [*CLI, "deploy", "status", *args], capture_output=True, text=True, timeout=120).stdout)["links"]}
    assert cut[("SP6", "SP7")] and cut[("SP7", "SP6")] and not cut[("SP5", "SP6")]
    with pytest.raises(DeployError, match="no transfer"):
        link_rate(deployment, "SP6", "SP7", seconds=1)
    # SP6 declares the link down, and tells a cut from a dead peer: SP5 still hears SP7
    sp6 = SuperPeerClient(addresses["SP6"])
    deadline = time.monotonic() + 30
    while (link := sp6.status()["failure_detector"]["links"]["SP6–SP7"]).get("reason", "").find("cut") < 0:
        assert time.monotonic() < deadline, link
        time.sleep(0.2)
    assert link["state"] == "down"
    assert sp6.status()["failure_detector"]["peers"]["SP7"]["state"] == "unreachable"
    assert subprocess.run([*CLI, "deploy", "restore", "SP6", "SP7", *args], capture_output=True, timeout=120).returncode == 0
    assert link_rate(deployment, "SP6", "SP7", seconds=1)["bytes"] > 0
    deadline = time.monotonic() + 30
    while sp6.status()["failure_detector"]["links"]["SP6–SP7"]["state"] != "up":
        assert time.monotonic() < deadline, "SP6 does not hear SP7 again after the restore"
        time.sleep(0.2)


def test_deploy_simulate_measures_and_verifies_a_live_scenario(deployed, tmp_path) -> None:
    """The live simulation on its own project, next to the running one: every admitted
    subscription verified against the reference evaluator, traffic measured on the links."""
    out = tmp_path / "out"
    r = subprocess.run([*CLI, "deploy", "simulate", "paper-example", "--photons", "600", "--strategies",
                        "sharing", "--project", "sgtestsim", "--state-dir", str(tmp_path), "--out", str(out)],
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    sharing = report["strategies"]["sharing"]
    assert report["live"] and sharing["registered"] == 25
    assert sharing["verified"] == {"checked": 25, "identical": 25, "mismatches": []}
    assert sharing["total_traffic_bytes"] > 0 and sharing["links"]
    # the model of the rates measured over the warm-up, next to the estimates' (as ``simulate``)
    assert sharing["model_accuracy"]["measured_rates"]["links"] > 0, sharing["model_accuracy"]
    assert (out / "paper-example-figure6.png").is_file()


_PAIR = """\
[[superpeer]]
id = "A"
address = "127.0.0.1:50150"
load_capacity = 1.0
pindex = 1.0

[[superpeer]]
id = "B"
address = "127.0.0.1:50151"
load_capacity = 1.0
pindex = 1.0

[[link]]
a = "A"
b = "B"
bandwidth = 100e6
"""


@pytest.mark.timeout(900)  # Spark's first batch in a container takes minutes on a loaded machine
@pytest.mark.parametrize("workers", [0, 2])
def test_spark_in_containers_gives_the_reference_results(tmp_path, workers: int) -> None:
    """Two super-peers on ``--executor spark``, each with Spark ``local[2]`` in its container
    (0 workers) or on a cluster (``--spark-cluster 2``: the operators run on the workers, which
    fetch the items from the super-peers' feeds over the network); every result equals the
    reference evaluator's."""
    missing = _engine()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the Docker engine: {missing}")
        pytest.skip(missing)
    topology = tmp_path / "pair.toml"
    topology.write_text(_PAIR)
    args = ["--project", f"sgtestspark{workers}", "--state-dir", str(tmp_path)]
    up = subprocess.run([*CLI, "deploy", "up", "--topology", str(topology), "--executor", "spark",
                         "--spark-cluster", str(workers), *args], capture_output=True, text=True, timeout=1500)
    try:
        assert up.returncode == 0, up.stderr
        addresses = json.loads(up.stdout)
        assert sorted(addresses) == ["A", "B"]
        status = json.loads(subprocess.run([*CLI, "deploy", "status", *args], capture_output=True, text=True,
                                           timeout=120).stdout)
        if workers:
            assert {n: s["health"] for n, s in status["spark_cluster"].items()} == \
                {"spark-master": "healthy", "spark-worker-1": "healthy", "spark-worker-2": "healthy"}
        else:
            assert "spark_cluster" not in status
        admin = credentials(tmp_path / f"sgtestspark{workers}")  # its own CA and admin token
        assert admin.secure
        publisher = SuperPeerClient(addresses["A"], credentials=admin)
        publisher.register_stream("photons", "photons", "photon", rate=500)
        photons = [p.to_xml() for p in generate(1200, seed=29)]
        publisher.publish("photons", photons[:200])
        subscriber = SuperPeerClient(addresses["B"], credentials=admin)
        replies = {name: subscriber.subscribe(example_query(name)) for name in ("q1", "q3")}
        publisher.publish("photons", photons[200:])
        publisher.close_stream("photons")
        for name, reply in replies.items():
            got = [item for _, item, _ in subscriber.results(reply.subscription, idle_timeout=300)]
            expected = _reference(example_query(name), photons[200:])
            assert expected and same(got, expected), (name, len(got), len(expected))
        executor = publisher.status()["executor_status"]
        if workers:
            assert executor["master"].startswith("spark://") and executor["cluster_executors"] >= 1, executor
            assert not executor["feed"].startswith("127."), executor
        else:
            assert executor["master"] == "local[2]" and executor["feed"].startswith("127."), executor
    finally:
        down = subprocess.run([*CLI, "deploy", "down", *args], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
