"""Memory and message size with big items: what a 20 MB item costs each super-peer holding it,
and whether results beyond gRPC's 64 MiB message limit can be read.

Run: python benchmarks/big_items.py [--compare REV] [--mb 20] [--out FILE.json]

Three super-peer processes of the paper's topology (SP4, SP5, SP1) serve a stream registered at
SP4 with two subscriptions returning every item: one at SP4 (parsed values, local delivery) and
one at SP1 by data shipping (the text forwarded through SP5, parsed at SP1). For each kind of
item (``text``: text nodes of 4 MiB; ``elements``: about a million small elements) six items
are published one after the other and each is read by both subscriptions. Per daemon: the peak
resident memory while the first passed (VmHWM after resetting it, minus the RSS before), the RSS
after it (glibc keeps freed pages: partly the allocator's cache, reused later; and a
subscription's evaluation holds its latest input item until the next one), and how much the RSS
grew per item over the fourth to sixth, once the allocator's cache is warm: what the daemon
really keeps per item (the 20 MB result in each result buffer, and before the fix, the parsed
trees too). Then four text
items are published at a subscription of SP4 and read with the CLI's 1,000-item reads.

``--compare REV`` runs the same measurement first on ``git archive REV`` (the script is copied
into it: it only uses the client library and the daemon command line, which both versions
have), then on this checkout, and prints both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("SP4", "SP5", "SP1")
ITEMS = 6  # big items per kind
WHOLE = '<r>{ for $p in stream("%s")/photons/photon return $p }</r>'


def item(kind: str, mb: int, n: int) -> str:
    size = mb << 20
    if kind == "text":  # text nodes of 4 MiB: below libxml2's 10,000,000-byte bound
        parts = "".join(f"<t>{'x' * (4 << 20)}</t>" for _ in range(size // (4 << 20)))
        return f"<photon><en>{n}</en>{parts}</photon>"
    unit = "<v>0123456789abcdef</v>"
    return f"<photon><en>{n}</en><pad>{unit * (size // len(unit))}</pad></photon>"


def proc_status(pid: int) -> dict[str, float]:
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024  # MiB
    return fields


def reset_peak(pid: int) -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def measure(mb: int) -> dict:
    """Runs inside the checkout being measured (its modules on sys.path)."""
    sys.path.insert(0, str(Path.cwd()))
    from thinpeer.client import SuperPeerClient, ThinPeerError
    from thinpeer.ops.ports import with_free_ports
    from thinpeer.ops.topologies import shipped_topology

    report: dict = {}
    with tempfile.TemporaryDirectory(prefix="big-items-") as tmp:
        topology = with_free_ports(shipped_topology("paper-example"), Path(tmp) / "t.toml")
        import tomllib
        addresses = {p["id"]: p["address"] for p in tomllib.loads(topology.read_text())["superpeer"]}
        procs = {peer: subprocess.Popen([sys.executable, "-m", "thinpeer.cli", "superpeer", "serve",
                                         "--topology", str(topology), "--id", peer],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for peer in PEERS}
        try:
            for peer in PEERS:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        SuperPeerClient(addresses[peer], timeout=2).status()
                        break
                    except ThinPeerError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.2)
            clients = {p: SuperPeerClient(addresses[p], timeout=120) for p in PEERS}
            log("daemons up")
            for kind in ("text", "elements"):
                log(kind)
                stream = f"photons_{kind}"
                clients["SP4"].register_stream(stream, "photons", "photon")
                clients["SP4"].publish(stream, ["<photon><en>0</en></photon>"])
                sids = {"SP4": clients["SP4"].subscribe(WHOLE % stream, "data-shipping").subscription,
                        "SP1": clients["SP1"].subscribe(WHOLE % stream, "data-shipping").subscription}
                time.sleep(1.0)
                before = {p: proc_status(procs[p].pid)["VmRSS"] for p in PEERS}
                for p in PEERS:
                    reset_peak(procs[p].pid)
                rss, publish_s, delivered, reasons = [], [], [], []
                for n in range(1, ITEMS + 1):
                    big = item(kind, mb, n)
                    start = time.perf_counter()
                    summary = clients["SP4"].publish(stream, [big])
                    publish_s.append(round(time.perf_counter() - start, 2))
                    reasons.extend(summary.reasons or [])
                    for p, sid in sids.items():
                        reply = clients[p].read(sid, n - 1, max_items=1, wait_ms=120_000)
                        delivered.append(bool(reply.items) and len(reply.items[0]) == len(big))
                    if n == 1:
                        peak = {p: proc_status(procs[p].pid)["VmHWM"] for p in PEERS}
                    time.sleep(1.0)
                    rss.append({p: proc_status(procs[p].pid)["VmRSS"] for p in PEERS})
                report[f"{ITEMS}_{kind}_items"] = {
                    "item_mb": round(len(big) / (1 << 20), 1), "rejections": reasons[:2],
                    "publish_s": publish_s, "all_delivered_to_both": all(delivered),
                    "peak_mib_first_item": {p: round(peak[p] - before[p]) for p in PEERS},
                    "rss_mib_after_first": {p: round(rss[0][p] - before[p]) for p in PEERS},
                    "rss_mib_per_item_from_item_4": {p: round((rss[-1][p] - rss[2][p]) / (ITEMS - 3))
                                                      for p in PEERS}}
            log("four items")
            stream = "photons_many"
            clients["SP4"].register_stream(stream, "photons", "photon")
            clients["SP4"].publish(stream, ["<photon><en>0</en></photon>"])
            sid = clients["SP4"].subscribe(WHOLE % stream, "data-shipping").subscription
            for n in range(4):
                clients["SP4"].publish(stream, [item("text", mb, n)])
            clients["SP4"].close_stream(stream)
            deadline = time.monotonic() + 120  # all four results are waiting before the read
            while clients["SP4"].status()["subscriptions"][sid]["results"] < 4:
                assert time.monotonic() < deadline, "results did not arrive"
                time.sleep(0.2)
            read: dict = {"items": 0}
            try:
                offset = 0
                while True:
                    reply = clients["SP4"].read(sid, offset, max_items=1000, wait_ms=5000)
                    offset = reply.offset + len(reply.items)
                    read["items"] = offset
                    read.setdefault("replies", 0)
                    read["replies"] += 1
                    if reply.closed:
                        break
            except ThinPeerError as exc:
                read["error"] = f"{exc.code}: {exc.message}"[:160]
            report["four_items_read_1000_at_a_time"] = read
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait(timeout=30)
    return report


def run_in(checkout: Path, mb: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, str(checkout / "benchmarks" / "big_items.py"), "--measure",
                          "--mb", str(mb)], cwd=checkout, env=env, capture_output=True, text=True,
                         timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"measurement in {checkout} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", metavar="REV", help="also measure this git revision, first")
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.mb)))
        return 0
    results = {}
    if args.compare:
        with tempfile.TemporaryDirectory(prefix="big-items-base-") as base:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.compare],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", base], input=archive, check=True)
            (Path(base) / "benchmarks").mkdir(exist_ok=True)
            (Path(base) / "benchmarks" / "big_items.py").write_text(Path(__file__).read_text())
            results[f"before ({args.compare})"] = run_in(Path(base), args.mb)
    results["after (this checkout)"] = run_in(ROOT, args.mb)
    for name, report in results.items():
        print(f"== {name}")
        for case, numbers in report.items():
            print(f"  {case}: {json.dumps(numbers)}")
    out = args.out or ROOT / "benchmarks" / "results" / "big_items.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"mb": args.mb, "results": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
