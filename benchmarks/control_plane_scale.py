"""The control plane's cost against the network's size: k×k grids of super-peer processes.

Run: python benchmarks/control_plane_scale.py [--sizes 3 4 5 6] [--seconds 30] [--settle 10]
     [--registrations 10] [--plot FILE.png] [--out FILE.json]

Per size N = k×k: the grid is started as processes on loopback (``network up``, inline
executor, plaintext) with no stream and no subscription, and once every super-peer answers and
``--settle`` seconds have passed (every peer has heard every other):

- **idle CPU**: each daemon's user+system CPU over ``--seconds``, read off ``/proc/PID/stat``,
  as percent of one core: the whole network's, and per super-peer (median and max);
- **registration latency**: a photon stream registered at SP0 (a corner, 1,000 photons for its
  statistics), then ``--registrations`` subscriptions at the opposite corner, each Subscribe
  call timed end to end over a connected client (planning, two-phase reservation and commit).
  Its route is 2k - 2 hops long, so it grows with the grid; the same number of subscriptions
  at SP(k+1), two hops from SP0 whatever k, shows what a registration costs at a fixed search
  radius (``near``);
- **failure detection**: the peer at the grid's centre killed with SIGKILL; the time until its
  neighbour declares the link down and until the opposite corner declares the peer down.

A round of heartbeats asks each super-peer's neighbours and one other peer, and what they know
of each other spreads as gossip (``superpeer.recovery.membership``); before, every super-peer
asked every other each second, with its whole state in every answer. A change to the control
plane is measured against the revision before it in the same run (``--baseline DIR``: a checkout of another revision, ``git worktree
add DIR REV``, started the same way, sizes alternating). Prints a table, writes JSON and, with
``--plot``, a PNG of the three figures against N.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

import grpc
from local_network import code_of, percentile, write_report

from photons.generator import generate
from sharing.scenarios import grid_backbone
from thinpeer.client import SuperPeerClient
from thinpeer.ops.containers.compose import toml_tables
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.processes import up

TICKS = os.sysconf("SC_CLK_TCK")


def grid_topology(k: int, dest: Path) -> Path:
    """A k×k grid (``sharing.scenarios.grid_backbone``) as a topology file on free ports."""
    backbone = grid_backbone(k)
    peers = [{"id": p.id, "address": f"127.0.0.1:{50000 + i}", "position": [i % k, i // k],
              "load_capacity": p.load_capacity} for i, p in enumerate(backbone.peers.values())]
    links = [{"a": link.a, "b": link.b, "bandwidth": link.bandwidth} for link in backbone.links.values()]
    source = dest.with_suffix(".in.toml")
    source.write_text(toml_tables({"superpeer": peers, "link": links}))
    return with_free_ports(str(source), dest)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def idle_cpu(pids: dict[str, int], seconds: float) -> dict:
    before = {p: cpu_seconds(pid) for p, pid in pids.items()}
    start = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - start
    per_peer = {p: 100 * (cpu_seconds(pid) - before[p]) / elapsed for p, pid in pids.items()}
    values = list(per_peer.values())
    return {"network_percent": round(sum(values), 1), "per_peer_median_percent": round(statistics.median(values), 2),
            "per_peer_max_percent": round(max(values), 2)}


def registration(address: dict[str, str], k: int, count: int) -> dict:
    source = SuperPeerClient(address["SP0"])
    source.register_stream("photons", "photons", "photon", rate=100)
    source.publish("photons", [p.to_xml() for p in generate(1000, 1)])
    time.sleep(2.5)  # (two heartbeats: every peer has heard of the stream and its statistics)
    far = subscribing(address[f"SP{k * k - 1}"], count)
    near = subscribing(address[f"SP{k + 1}"], count, first=2.0)
    source.close()
    return {"median_ms": far["median_ms"], "p90_ms": far["p90_ms"], "times_ms": far["times_ms"],
            "unsubscribe_median_ms": far["unsubscribe_median_ms"], "unsubscribe_ms": far["unsubscribe_ms"],
            "near": near}


def subscribing(address: str, count: int, first: float = 1.0) -> dict:
    """``count`` subscriptions at the super-peer at ``address``, each timed, then unsubscribed."""
    client = SuperPeerClient(address)
    grpc.channel_ready_future(client.channel).result(timeout=30)
    times, ids = [], []
    for i in range(count):
        query = (f'<r>{{ for $p in stream("photons")/photons/photon where $p/en >= {first + i / 100:.2f} '
                 f'return $p/en }}</r>')
        start = time.perf_counter()
        ids.append(client.subscribe(query).id)
        times.append((time.perf_counter() - start) * 1000)
    ends = []
    for sid in reversed(ids):  # (the last first: nothing else reads its streams)
        start = time.perf_counter()
        client.unsubscribe(sid)
        ends.append((time.perf_counter() - start) * 1000)
    client.close()
    return {"median_ms": round(statistics.median(times), 2), "p90_ms": round(percentile(times, 0.9), 2),
            "times_ms": [round(t, 2) for t in times],
            "unsubscribe_median_ms": round(statistics.median(ends), 2), "unsubscribe_ms": [round(t, 2) for t in ends]}


def failure_detection(network, k: int) -> dict:
    centre = (k // 2) * k + k // 2
    victim, neighbour, corner = f"SP{centre}", f"SP{centre - 1}", f"SP{k * k - 1 if centre != k * k - 1 else 0}"
    near, far = SuperPeerClient(network.addresses[neighbour]), SuperPeerClient(network.addresses[corner])
    link = next(name for name in near.status()["failure_detector"]["links"]
                if set(name.split("–")) == {neighbour, victim})
    killed = time.monotonic()
    network.processes[victim].send_signal(signal.SIGKILL)
    link_s = peer_s = None
    while link_s is None or peer_s is None:
        now = time.monotonic()
        if now - killed > 120:
            break
        if link_s is None and near.status()["failure_detector"]["links"].get(link, {}).get("state") == "down":
            link_s = now - killed
        if peer_s is None and far.status()["failure_detector"]["peers"].get(victim, {}).get("state") == "down":
            peer_s = now - killed
        time.sleep(0.05)
    near.close()
    far.close()
    return {"killed": victim, "link_down_s": link_s and round(link_s, 2),
            "peer_down_at_far_corner_s": peer_s and round(peer_s, 2)}


def one_size(k: int, seconds: float, settle: float, registrations: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="streamglobe-bench-") as tmp:
        network = up(grid_topology(k, Path(tmp) / f"grid-{k}x{k}.toml"), state_dir=Path(tmp) / "state",
                     wait_s=120)
        try:
            time.sleep(settle)
            pids = {p: proc.pid for p, proc in network.processes.items()}
            cpu = idle_cpu(pids, seconds)
            reg = registration(network.addresses, k, registrations)
            detection = failure_detection(network, k)
        finally:
            network.stop()
    return {"k": k, "superpeers": k * k, "idle_cpu": cpu, "registration": reg, "failure_detection": detection}


def plot(results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for tree, rows in results.items():
        n = [r["superpeers"] for r in rows]
        axes[0].plot(n, [r["idle_cpu"]["per_peer_median_percent"] for r in rows], "o-", label=tree)
        axes[1].plot(n, [r["registration"]["median_ms"] for r in rows], "o-", label=f"{tree}: far corner")
        if all("near" in r["registration"] for r in rows):
            axes[1].plot(n, [r["registration"]["near"]["median_ms"] for r in rows], "s--", label=f"{tree}: 2 hops")
        axes[2].plot(n, [r["failure_detection"]["peer_down_at_far_corner_s"] or float("nan") for r in rows],
                     "o-", label=tree)
    axes[1].set_yscale("log")  # (a baseline that collapses would flatten the others)
    for ax, title in zip(axes, ["idle CPU per super-peer (% of a core)", "registration, median (ms)",
                                "crash detected at the far corner (s)"]):
        ax.set_title(title)
        ax.set_xlabel("super-peers (k×k grid)")
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 4, 5, 6], help="grid sides k (N = k×k)")
    parser.add_argument("--seconds", type=float, default=30.0, help="idle CPU measured over (default 30)")
    parser.add_argument("--settle", type=float, default=10.0, help="wait after start-up (default 10)")
    parser.add_argument("--registrations", type=int, default=10)
    parser.add_argument("--baseline", type=Path, help="a checkout of the revision to compare with")
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    trees = {"this": None, **({"baseline": args.baseline} if args.baseline else {})}
    results: dict[str, list[dict]] = {tree: [] for tree in trees}
    print(f"{'tree':9} {'N':>4} {'idle CPU, network':>18} {'per peer (median/max)':>22} "
          f"{'registration median':>20} {'at 2 hops':>10} {'unsubscribe':>12} {'link down':>10} {'peer down':>10}")
    for i, k in enumerate(args.sizes):
        for tree in (list(trees) if i % 2 == 0 else list(reversed(trees))):
            with code_of(trees[tree]):
                row = one_size(k, args.seconds, args.settle, args.registrations)
            results[tree].append(row)
            cpu, reg, fd = row["idle_cpu"], row["registration"], row["failure_detection"]
            print(f"{tree:9} {k * k:>4} {cpu['network_percent']:>17}% "
                  f"{cpu['per_peer_median_percent']:>14}% / {cpu['per_peer_max_percent']}% "
                  f"{reg['median_ms']:>17} ms {reg.get('near', {}).get('median_ms', '-')!s:>7} ms "
                  f"{reg.get('unsubscribe_median_ms', '-')!s:>9} ms "
                  f"{fd['link_down_s']!s:>9}s {fd['peer_down_at_far_corner_s']!s:>9}s",
                  flush=True)
    report = {"benchmark": "control plane against the network's size", "seconds": args.seconds,
              "settle": args.settle, "results": results}
    write_report("control_plane_scale", report, args.out)
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
