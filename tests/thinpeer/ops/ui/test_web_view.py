"""The web view (issue 16) in a real headless Chromium, driven by Selenium, on a live
paper-example network of real super-peer processes with TLS and tokens: the page shows every
super-peer and link; Query 1 and Query 2 are drawn along SP4→SP5→SP1 and SP5→SP7, Q2's stream
derived from Q1's at SP5; counters rise while photons are published; clicking a stream shows its
properties; a subscription's page shows its query, plan, alternatives and latest results; a
killed super-peer shows as down. Screenshots of each state go to ``$STREAMGLOBE_SCREENSHOTS``
(default ``build/screenshots``).

A second test reads the JSON API with a non-admin token: only that user's subscription shows."""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from pathlib import Path

import pytest

from browser import BrowserMissing, headless_chromium
from conftest import ROOT
from network_harness import until
from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials
from thinpeer.ops.processes import up
from thinpeer.ops.ports import free_ports, with_free_ports
from thinpeer.ops.tokens import issue_token
from thinpeer.ops.topologies import shipped_topology
from thinpeer.ops.ui.collector import Collector
from thinpeer.ops.ui.server import WebView

pytestmark = [pytest.mark.slow, pytest.mark.browser]
SHOTS = Path(os.environ.get("STREAMGLOBE_SCREENSHOTS", ROOT / "build" / "screenshots"))
PHOTONS = [p.to_xml() for p in generate(40_000, seed=16)]


def chromium():
    """The browser, or a skip here and a failure under CI (which installs it)."""
    try:
        return headless_chromium()
    except BrowserMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (.ci/run installs them)")
        pytest.skip(str(exc))


@pytest.fixture
def browser():
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def network(tmp_path):
    path = with_free_ports(shipped_topology("paper-example"), tmp_path / "paper-example.toml")
    net = up(path, "inline", tmp_path / "state", secure=True, serve_args=("--heartbeat-s", "0.5"))
    try:
        yield net
    finally:
        net.stop()


def web_view(entry: str, credentials: Credentials) -> WebView:
    view = WebView(Collector(entry, credentials, interval_s=0.5), port=free_ports(1)[0]).start()
    assert view.wait_started(), "the web view did not start"
    return view


def shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def on_page(driver, script: str, seconds: float = 30.0, what: str = ""):
    """Wait until ``script`` (JavaScript returning a value) gives something true on the page."""
    return until(lambda: driver.execute_script(script), seconds, 0.1,
                 lambda: what or driver.execute_script("return document.body.innerText.slice(0, 2000)"))


def cell(driver, table: str, key: str, value: str, column: int) -> str:
    return driver.execute_script(
        f"const r = document.querySelector('#{table} tr[data-{key}=\"{value}\"]');"
        f"return r ? r.children[{column}].textContent : null;")


def test_the_page_draws_the_paper_example_live(network, browser) -> None:
    view = web_view(network.addresses["SP1"], network.credentials)
    try:
        browser.get(view.url)
        on_page(browser, "return document.querySelectorAll('#graph g.superpeer').length === 8 && "
                         "document.querySelectorAll('#graph line.link').length === 10")
        peers = browser.execute_script(
            "return [...document.querySelectorAll('#graph g.superpeer')].map(g => g.dataset.superpeer)")
        assert sorted(peers) == [f"SP{i}" for i in range(8)]
        links = browser.execute_script(
            "return [...document.querySelectorAll('#links tbody tr')].map(r => r.dataset.link)")
        assert {"SP4–SP5", "SP1–SP5", "SP5–SP7", "SP2–SP6"} <= set(links) and len(links) == 10
        shot(browser, "1-backbone")

        publisher = network.client("SP4")
        publisher.register_stream("photons", "photons", "photon", rate=2000)
        publisher.publish("photons", PHOTONS[:500])
        q1 = network.client("SP1").subscribe(example_query("q1"), wait_for_streams=True).subscription
        q2 = network.client("SP7").subscribe(example_query("q2"), wait_for_streams=True).subscription
        on_page(browser, "return document.querySelector('#graph path.stream[data-route=\"SP4 SP5 SP1\"]') && "
                         "document.querySelector('#graph path.stream[data-route=\"SP5 SP7\"]')")
        streams = {s["route"]: s for s in browser.execute_script(
            "return [...document.querySelectorAll('#streams tbody tr')].map(r => ({id: r.dataset.stream, "
            "route: r.dataset.route, text: r.innerText}))")}
        q1_stream, q2_stream = streams["SP4 SP5 SP1"], streams["SP5 SP7"]
        # Q2's stream is derived from Q1's at SP5: drawn as a duplication there, and said in the table
        assert f"{q1_stream['id']} at SP5" in q2_stream["text"], q2_stream
        assert browser.execute_script(
            f"return !!document.querySelector('#graph polygon.duplication[data-stream=\"{q2_stream['id']}\"]"
            "[data-superpeer=\"SP5\"]')")
        assert q1 in q1_stream["text"] and q2 in q2_stream["text"]
        shot(browser, "2-query-1-and-2")

        def publish() -> None:
            try:
                publisher.publish("photons", PHOTONS[500:], rate=2000)
            except ThinPeerError:  # the test ended (and stopped the network) first
                pass

        threading.Thread(target=publish, daemon=True).start()
        before = int(cell(browser, "subscriptions", "subscription", q1, 4))
        on_page(browser, f"const r = document.querySelector('#subscriptions tr[data-subscription=\"{q1}\"]');"
                         f"return r && Number(r.children[4].textContent) > {before} + 20")
        on_page(browser, "const r = document.querySelector('#links tr[data-link=\"SP4–SP5\"]');"
                         "return r && /[1-9]/.test(r.children[4].textContent.split(' ')[0])",
                what="the measured traffic of SP4–SP5 stays zero")
        browser.execute_script("document.querySelector('.plots').scrollIntoView()")  # drawn while on screen
        on_page(browser, "return document.querySelectorAll('#traffic-plot .scatterlayer .trace').length > 0")
        shot(browser, "3-publishing")

        browser.find_element("css selector", f"#graph circle.stream-handle[data-stream=\"{q1_stream['id']}\"]").click()
        details = on_page(browser, "const d = document.getElementById('details');"
                                   "return d.dataset.kind === 'stream' && d.innerText")
        assert "SP4 → SP5 → SP1" in details and "coord/cel/ra >= 120" in details and q1 in details, details
        shot(browser, "4-stream-properties")

        browser.get(view.url.rstrip("/") + f"/subscription/{q2}")
        text = on_page(browser, "const l = document.querySelectorAll('#latest li:not(.none)').length;"
                                "return l > 0 && document.body.innerText")
        assert "stream(\"photons\")" in text and "SP5 → SP7" in text
        plan = browser.execute_script("return document.querySelector('#plan tbody tr').innerText")
        assert q1_stream["id"] in plan and "SP5" in plan, plan
        assert browser.execute_script("return document.querySelectorAll('#alternatives tbody tr:not(.none)').length") > 0
        shot(browser, "5-subscription-q2")

        browser.get(view.url)
        on_page(browser, "return document.querySelectorAll('#graph g.superpeer[data-up=\"true\"]').length === 8")
        network.kill("SP3")
        on_page(browser, "return document.querySelector('#graph g.superpeer[data-superpeer=\"SP3\"][data-up=\"false\"]') && "
                         "document.querySelector('#faults li[data-superpeer=\"SP3\"]')", seconds=10)
        assert browser.execute_script(
            "return document.querySelector('#graph line.link[data-link=\"SP3–SP4\"]').dataset.state") == "down"
        shot(browser, "6-sp3-killed")
    finally:
        view.stop()


def test_a_users_token_sees_only_its_own(network) -> None:
    publisher = network.client("SP4")
    publisher.register_stream("photons", "photons", "photon", rate=2000)
    publisher.publish("photons", PHOTONS[:300])
    admins = network.client("SP1").subscribe(example_query("q1"), wait_for_streams=True).subscription
    token = issue_token(network.keys, "ada", subscribe=True)
    ada = Credentials(network.credentials.ca, token)
    hers = SuperPeerClient(network.addresses["SP7"], credentials=ada).subscribe(example_query("q2")).subscription
    view = web_view(network.addresses["SP1"], ada)
    try:
        def seen():
            with urllib.request.urlopen(view.url + "api/network", timeout=10) as reply:
                snapshot = json.load(reply)
            return snapshot if snapshot.get("subscriptions") else None

        snapshot = until(seen, 20)
        assert snapshot["user"] == "ada" and len(snapshot["superpeers"]) == 8 and len(snapshot["links"]) == 10
        assert [s["id"] for s in snapshot["subscriptions"]] == [hers]
        assert admins not in json.dumps(snapshot)
        with urllib.request.urlopen(view.url + f"api/subscriptions/{hers}", timeout=10) as reply:
            assert json.load(reply)["plan"]["admitted"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(view.url + f"api/subscriptions/{admins}", timeout=10)
        assert refused.value.code == 404
    finally:
        view.stop()


def test_network_up_serves_the_view_with_ui_port(tmp_path) -> None:
    import signal
    import subprocess
    import sys

    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    port = free_ports(1)[0]
    launcher = subprocess.Popen([sys.executable, "-m", "thinpeer.cli", "network", "up", "--topology", str(topology),
                                 "--state-dir", str(tmp_path / "state"), "--ui-port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        def all_up():
            assert launcher.poll() is None, launcher.stderr.read()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/network", timeout=5) as reply:
                    snapshot = json.load(reply)
            except OSError:
                return None
            return [p["id"] for p in snapshot.get("superpeers", []) if p["up"]]

        assert len(until(lambda: len(all_up() or []) == 8 and all_up(), 90)) == 8
    finally:
        launcher.send_signal(signal.SIGINT)
        _, err = launcher.communicate(timeout=60)
    assert f"web view: http://127.0.0.1:{port}/" in err and "network stopped" in err, err
