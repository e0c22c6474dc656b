"""Items per second one super-peer forwards and duplicates, on loopback.

Run: python benchmarks/network_forwarding.py [--photons 200000] [--out FILE.json]

Photons are published at SP4; two subscriptions that take the whole stream sit at SP1 and SP7,
so SP5 receives every photon once and sends it twice (SP5→SP1 and SP5→SP7), without parsing it.
The rate is photons per second through SP5, from the first to the last photon on both output links
(SP5's own link counters).
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

from local_network import local_network, write_report

from photons.generator import generate
from thinpeer.client import SuperPeerClient

WHOLE = '<all>{ for $p in stream("photons")/photons/photon return $p }</all>'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photons", type=int, default=200_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    items = [p.to_xml() for p in generate(args.photons, 3)]
    with local_network() as network:
        a = network.addresses
        source = SuperPeerClient(a["SP4"])
        # declared rate: admission sees a modest stream; the publisher then sends as fast as it can
        source.register_stream("photons", "photons", "photon", rate=1000)
        source.publish("photons", items[:200])
        time.sleep(1.2)
        for peer in ("SP1", "SP7"):
            SuperPeerClient(a[peer]).subscribe(WHOLE)
        sp5 = SuperPeerClient(a["SP5"])
        cpu_before = sp5.status()["process_cpu_seconds"]
        publisher = threading.Thread(target=lambda: source.publish("photons", items[200:]), daemon=True)
        start = time.perf_counter()
        publisher.start()
        first = None
        target = len(items) - 200
        while True:
            links = sp5.status()["links"]
            done = [links.get(f"SP5->{p}", {}).get("items", 0) for p in ("SP1", "SP7")]
            now = time.perf_counter()
            if first is None and min(done) > 0:
                first = now
            if min(done) >= target:
                break
            if now - start > 600:
                raise SystemExit("forwarding did not finish in 10 minutes")
            time.sleep(0.05)
        elapsed = now - start
        cpu = sp5.status()["process_cpu_seconds"] - cpu_before
        publisher.join()
        published = time.perf_counter() - start
    rate = target / elapsed
    capacity = target / cpu if cpu > 0 else float("inf")
    report = {"benchmark": "forwarding and duplication at one super-peer", "photons": target,
              "seconds": round(elapsed, 2), "photons_per_s_through_sp5": round(rate),
              "items_sent_per_s_by_sp5": round(2 * rate), "publish_seconds": round(published, 2),
              "sp5_cpu_seconds": round(cpu, 3),
              "sp5_photons_per_cpu_second": round(capacity)}
    print(f"SP5 forwarded and duplicated {target} photons in {elapsed:.2f} s: {rate:,.0f} photons/s "
          f"in, {2 * rate:,.0f} items/s out (whole pipeline: publisher, SP4, SP5 and two "
          f"subscribers share this machine's cores)")
    print(f"SP5's own cost: {cpu:.2f} CPU-seconds, i.e. {capacity:,.0f} photons/s forwarded and "
          f"duplicated per core")
    write_report("network_forwarding", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
