"""Faults in containers while a stream is published: every subscriber still gets exactly the
reference evaluator's results — nothing lost, nothing duplicated, order kept.

* the paper example: SP5, on every route, killed (``deploy kill``: SIGKILL) mid-stream and started
  again later (``deploy start``): the subscriptions are planned around it;
* the 4×4 grid: a seeded random schedule of faults during publishing — super-peers killed and
  started again, links cut and restored — with subscribers at three corners and the photons at
  the fourth.

Needs a Docker engine and docker-compose (skipped without them, except in CI)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time

import pytest

from network_harness import reference_results, same, until
from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient

pytestmark = [pytest.mark.slow, pytest.mark.docker]
CLI = [sys.executable, "-m", "thinpeer.cli"]
FAST = ["--heartbeat-s", "0.5", "--heartbeat-misses", "2"]  # deploy up passes them to every super-peer


def _engine_or_skip() -> None:
    from test_deploy_docker import _engine

    missing = _engine()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the Docker engine: {missing}")
        pytest.skip(missing)


def deploy(*args: str, state, project: str, timeout: float = 300) -> str:
    r = subprocess.run([*CLI, "deploy", *args, "--project", project, "--state-dir", str(state)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    return r.stdout


class Published:
    """Photons published from the host in numbered batches (a restarted super-peer is waited
    for; nothing is sent twice), after ``first`` published before the subscriptions."""

    def __init__(self, address: str, n: int, first: int = 200, rate: float = 400, seed: int = 5) -> None:
        self.photons = [p.to_xml() for p in generate(n, seed=seed)]
        self.first = first
        client = SuperPeerClient(address)
        client.register_stream("photons", "photons", "photon", rate=rate)
        client.publish("photons", self.photons[:first], position=0)
        self.address, self.rate = address, rate
        self.done = threading.Event()
        self.errors: list[BaseException] = []

    def start(self) -> None:
        def run() -> None:
            try:
                client = SuperPeerClient(self.address)
                client.publish("photons", self.photons[self.first:], rate=self.rate, position=self.first,
                               retry_s=120)
                until(lambda: _try(lambda: client.close_stream("photons")), seconds=120)
                self.done.set()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
        threading.Thread(target=run, daemon=True).start()

    def check(self, subscriptions: dict[str, tuple[str, str]]) -> None:
        assert self.done.wait(300), f"publishing did not finish: {self.errors}"
        for name, (address, sid) in subscriptions.items():
            query = example_query(name.split("@")[0])
            got = [item for _, item, _ in SuperPeerClient(address).results(sid, idle_timeout=90)]
            expected = reference_results(query, self.photons[self.first:])
            assert expected and same(got, expected), (name, len(got), len(expected))


def _try(call) -> bool:
    try:
        call()
        return True
    except Exception:  # noqa: BLE001 - not answering yet
        return False


@pytest.fixture
def network(tmp_path, monkeypatch):
    _engine_or_skip()
    deployed: list[tuple[str, str]] = []

    def up(topology: str, project: str, heartbeats: list[str] = FAST) -> dict[str, str]:
        out = deploy("up", "--topology", topology, *heartbeats,
                     state=tmp_path, project=project, timeout=1500)
        deployed.append((project, topology))
        # secure by default: the clients below use the deployment's CA and admin token
        monkeypatch.setenv("STREAMGLOBE_CA", str(tmp_path / project / "tls" / "ca.pem"))
        monkeypatch.setenv("STREAMGLOBE_TOKEN", (tmp_path / project / "admin.token").read_text().strip())
        return json.loads(out)

    yield up, tmp_path
    for project, _ in deployed:
        subprocess.run([*CLI, "deploy", "down", "--project", project, "--state-dir", str(tmp_path)],
                       capture_output=True, timeout=180)


@pytest.mark.timeout(900)
def test_an_intermediate_superpeer_killed_and_started_in_containers(network) -> None:
    up, state = network
    addresses = up("paper-example", "sgcrash")
    stream = Published(addresses["SP4"], 3000)
    time.sleep(2)
    subs = {f"{q}@{p}": (addresses[p], SuperPeerClient(addresses[p]).subscribe(example_query(q)).subscription)
            for q, p in (("q1", "SP1"), ("q2", "SP7"), ("q3", "SP1"))}
    stream.start()
    time.sleep(2)
    deploy("kill", "SP5", state=state, project="sgcrash")
    time.sleep(4)
    deploy("start", "SP5", state=state, project="sgcrash")
    stream.check(subs)


@pytest.mark.timeout(1500)  # 16 containers on a two-core machine
def test_a_seeded_schedule_of_faults_on_the_grid(network) -> None:
    up, state = network
    addresses = up("grid-4x4", "sgchaos", ["--heartbeat-s", "1", "--heartbeat-misses", "2"])
    stream = Published(addresses["SP0"], 4000, rate=300)
    time.sleep(2)
    subs = {f"{q}@{p}": (addresses[p], SuperPeerClient(addresses[p]).subscribe(example_query(q)).subscription)
            for q, p in (("q1", "SP15"), ("q2", "SP3"), ("q3", "SP12"), ("q4", "SP15"))}
    stream.start()
    rng = random.Random(1302)
    inner = ["SP5", "SP6", "SP9", "SP10", "SP1", "SP4", "SP2", "SP8"]
    links = [("SP5", "SP6"), ("SP5", "SP9"), ("SP6", "SP10"), ("SP9", "SP10"), ("SP1", "SP5"), ("SP4", "SP5")]
    schedule = []
    while not stream.done.is_set() and len(schedule) < 6:
        time.sleep(rng.uniform(1.0, 2.5))
        if rng.random() < 0.5:
            peer = rng.choice(inner)
            deploy("kill", peer, state=state, project="sgchaos")
            time.sleep(rng.uniform(2.0, 4.0))
            deploy("start", peer, state=state, project="sgchaos")
            schedule.append(f"kill {peer}")
        else:
            a, b = rng.choice(links)
            deploy("cut", a, b, state=state, project="sgchaos")
            time.sleep(rng.uniform(2.0, 4.0))
            deploy("restore", a, b, state=state, project="sgchaos")
            schedule.append(f"cut {a}-{b}")
    assert schedule, "publishing ended before any fault"
    stream.check(subs)
