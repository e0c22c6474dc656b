"""How the web view holds up on the 4×4 grid with 100 subscriptions (issue 16).

Starts the grid as 16 super-peer processes, registers the paper's two photon streams (SP5,
SP10) and its 100 template subscriptions, publishes photons at both sources meanwhile, and opens
the page in headless Chromium. Measures: time to first render (navigation start → the first
snapshot drawn), each render's duration in the page, updates per second against the collector's
rounds, a click's latency (a stream → its properties), the snapshot's size, and one collector
round (16 statuses read and combined).

Run: python benchmarks/web_view.py [--seconds 30] [--rate 300]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_network import ROOT, local_network, percentile, write_report  # noqa: E402

sys.path.append(str(ROOT / "tests"))
from browser import headless_chromium  # noqa: E402  (the tests' browser set-up)
from photons.generator import generate  # noqa: E402
from sharing.scenarios import paper_grid  # noqa: E402
from thinpeer.client import ThinPeerError  # noqa: E402
from thinpeer.ops.ports import free_ports  # noqa: E402
from thinpeer.ops.ui.collector import Collector  # noqa: E402
from thinpeer.ops.ui.server import WebView  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to watch updates")
    parser.add_argument("--rate", type=float, default=300.0, help="photons/s published at each source")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scenario = paper_grid(seed=1)
    with local_network("grid-4x4") as network:
        stop = threading.Event()
        for source in scenario.sources:
            network.client(source.peer).register_stream(source.name, "photons", "photon", rate=args.rate)
        admitted = rejected = 0
        started = time.perf_counter()
        for q in scenario.queries:
            try:
                network.client(q.peer).subscribe(q.text, wait_for_streams=True)
                admitted += 1
            except ThinPeerError:
                rejected += 1
        registration_s = time.perf_counter() - started
        print(f"{admitted} subscriptions admitted, {rejected} rejected ({registration_s:.1f} s)")

        def publish(peer: str, name: str, seed: int) -> None:
            client = network.client(peer)
            items = [p.to_xml() for p in generate(int(args.rate * (args.seconds + 120)), seed=seed)]
            try:
                client.publish(name, items, rate=args.rate)
            except ThinPeerError:
                pass  # the network stops when the benchmark ends
            stop.wait()

        for source in scenario.sources:
            threading.Thread(target=publish, args=(source.peer, source.name, random.randrange(1 << 30)),
                             daemon=True).start()
        collector = Collector(network.addresses["SP0"], network.credentials, interval_s=1.0)
        rounds = []
        for _ in range(5):  # one round measured alone, before the view starts its own
            t = time.perf_counter()
            collector.round()
            rounds.append(time.perf_counter() - t)
        view = WebView(collector, port=free_ports(1)[0]).start()
        assert view.wait_started()
        with urllib.request.urlopen(view.url + "api/network") as reply:
            snapshot_bytes = len(reply.read())
        browser = headless_chromium()
        try:
            browser.get(view.url)
            deadline = time.monotonic() + 60
            while browser.execute_script("return window.sgStats && window.sgStats.firstRender") is None:
                assert time.monotonic() < deadline, "the page never rendered"
                time.sleep(0.05)
            first = browser.execute_script("return window.sgStats.firstRender")  # ms since navigation
            startup = browser.execute_script(
                "const s = window.sgStats, n = performance.getEntriesByType('navigation')[0];"
                "return {script_start: s.scriptStart, first_event: s.firstEvent, "
                "dom_content_loaded: n.domContentLoadedEventEnd, first_phases: {...s.phases}}")
            drawn = browser.execute_script("return [document.querySelectorAll('#graph g.superpeer').length, "
                                           "document.querySelectorAll('#graph path.stream').length]")
            begin = browser.execute_script("return performance.now()")
            time.sleep(args.seconds)
            end = browser.execute_script("return performance.now()")
            renders = browser.execute_script("return window.sgStats.renders")
            phases = browser.execute_script("return {...window.sgStats.phases}")
            window = [d for t, d in renders if begin <= t <= end]
            # the same with the plots on screen (they are drawn only then)
            browser.execute_script("document.querySelector('.plots').scrollIntoView()")
            time.sleep(3)  # Plotly's first draw
            begin_plots = browser.execute_script("return performance.now()")
            time.sleep(args.seconds)
            end_plots = browser.execute_script("return performance.now()")
            with_plots = [d for t, d in browser.execute_script("return window.sgStats.renders")
                          if begin_plots <= t <= end_plots]
            browser.execute_script("window.scrollTo(0, 0)")
            handle = browser.execute_script(
                "const h = document.querySelector('#graph circle.stream-handle'); return h && h.dataset.stream")
            t = time.perf_counter()
            browser.execute_script("return 1")
            roundtrip_ms = 1000 * (time.perf_counter() - t)  # what WebDriver itself takes, for comparison
            t = time.perf_counter()
            browser.find_element("css selector", f"#graph circle.stream-handle[data-stream=\"{handle}\"]").click()
            while browser.execute_script("return document.getElementById('details').dataset.id") != handle:
                time.sleep(0.005)
            click_ms = 1000 * (time.perf_counter() - t)
            handler_ms = browser.execute_script(
                "const h = document.querySelector('#graph circle.stream-handle:not(.selected)');"
                "const t = performance.now(); h.dispatchEvent(new MouseEvent('click', {bubbles: true}));"
                "return performance.now() - t")
        finally:
            browser.quit()
            stop.set()
            view.stop()
    report = {
        "command": "python benchmarks/web_view.py " + " ".join(sys.argv[1:]),
        "superpeers": 16, "subscriptions_admitted": admitted, "subscriptions_rejected": rejected,
        "streams_drawn": drawn[1], "superpeers_drawn": drawn[0],
        "snapshot_bytes": snapshot_bytes,
        "collector_round_ms_median": 1000 * statistics.median(rounds),
        "first_render_ms": first,
        "first_render_breakdown_ms": startup,
        "render_phases_total_ms": phases,
        "updates_per_s": len(window) / ((end - begin) / 1000),
        "collector_rounds_per_s": 1.0,
        "render_ms_median": statistics.median(window) if window else None,
        "render_ms_p95": percentile(window, 0.95) if window else None,
        "render_ms_max": max(window) if window else None,
        "plots_on_screen": {"updates_per_s": len(with_plots) / ((end_plots - begin_plots) / 1000),
                            "render_ms_median": statistics.median(with_plots) if with_plots else None,
                            "render_ms_p95": percentile(with_plots, 0.95) if with_plots else None},
        "click_to_details_ms": click_ms,
        "click_handler_ms": handler_ms,
        "webdriver_roundtrip_ms": roundtrip_ms,
    }
    for k, v in report.items():
        print(f"{k}: {round(v, 1) if isinstance(v, float) else v}")
    write_report("web_view", report, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
