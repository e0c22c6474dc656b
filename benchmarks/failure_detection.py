"""How long a super-peer killed with ``kill -9`` goes unnoticed: the time until its neighbour
declares the link down, and until a peer two hops away declares the peer itself down.

Run: python benchmarks/failure_detection.py [--trials 5] [--heartbeat-s 1.0] [--misses 3] [--out FILE]

Each trial starts the paper example as processes on loopback (``network up``, inline executor),
kills SP5 (on the routes SP4→SP5→SP1 and SP5→SP7) with SIGKILL, and polls the ``status`` of SP4
(its neighbour) and SP0 (two hops away) every 20 ms. The expected detection time is between
(misses - 1) and misses heartbeat intervals, plus a heartbeat's own timeout.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from pathlib import Path

from local_network import percentile, write_report

from thinpeer.client import SuperPeerClient
from thinpeer.ops.processes import up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology


def trial(heartbeat_s: float, misses: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        path = with_free_ports(shipped_topology("paper-example"), Path(tmp) / "paper-example.toml")
        network = up(path, state_dir=Path(tmp) / "state",
                     serve_args=("--heartbeat-s", str(heartbeat_s), "--heartbeat-misses", str(misses)))
        try:
            sp4, sp0 = SuperPeerClient(network.addresses["SP4"]), SuperPeerClient(network.addresses["SP0"])
            deadline = time.monotonic() + 30
            while sp4.status()["failure_detector"]["links"]["SP4–SP5"]["state"] != "up":
                assert time.monotonic() < deadline, "SP4 never heard SP5"
                time.sleep(0.05)
            killed = time.monotonic()
            network.processes["SP5"].send_signal(signal.SIGKILL)
            link = peer = None
            while link is None or peer is None:
                now = time.monotonic()
                assert now - killed < 60, "not detected in 60 s"
                if link is None and sp4.status()["failure_detector"]["links"]["SP4–SP5"]["state"] == "down":
                    link = now - killed
                if peer is None and sp0.status()["failure_detector"]["peers"].get("SP5", {}).get("state") == "down":
                    peer = now - killed
                time.sleep(0.02)
            return {"link_down_s": link, "peer_down_s": peer}
        finally:
            network.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--heartbeat-s", type=float, default=1.0)
    parser.add_argument("--misses", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs = [trial(args.heartbeat_s, args.misses) for _ in range(args.trials)]
    report: dict = {"benchmark": "failure detection after kill -9 (paper example, SP5)",
                    "heartbeat_s": args.heartbeat_s, "misses": args.misses, "trials": runs}
    for key in ("link_down_s", "peer_down_s"):
        values = [r[key] for r in runs]
        report[key] = {"p50": round(statistics.median(values), 3), "max": round(max(values), 3),
                       "p90": round(percentile(values, 0.9), 3)}
        print(f"{key:12s} p50 {report[key]['p50']:.2f} s  p90 {report[key]['p90']:.2f} s  "
              f"max {report[key]['max']:.2f} s  (heartbeat {args.heartbeat_s} s, {args.misses} misses)")
    write_report("failure_detection", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
