"""Soak: eight Spark super-peers on this machine, photons at a steady rate, many subscriptions.

Run: python benchmarks/spark_soak.py [--minutes 10] [--rate 5000] [--subscriptions 30] [--out FILE.json]

Starts the paper-example network with ``--executor spark`` (eight super-peers, each with its own
Spark session and Python workers), waits until every executor is ready, registers the photon
stream at SP4 and the subscriptions (template queries at random super-peers, drained by their
subscribers as they come), then publishes ``--rate`` photons/s for ``--minutes``. Every 10 s it
reads each super-peer's executor status. Reported: micro-batch jobs that failed and were run
again, Spark start failures, lines in the daemons' logs that tell of a Python process that did
not connect back (``CANNOT_OPEN_SOCKET``, ``connect back``) or a broken pipe, the largest backlog
and batch time seen, the photons published against the rate asked for, and peak memory of
each super-peer's process tree (its JVM and Python workers).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import re
import threading
import time
from pathlib import Path

from local_network import local_network, write_report
from spark_executor import tree_rss_mb_of

from photons.generator import generate
from sharing.scenarios import template_queries
from thinpeer.client import SuperPeerClient

TROUBLE = re.compile(r"CANNOT_OPEN_SOCKET|connect back|BrokenPipeError|Broken pipe")
# a JVM's own complaints (its start failures were seen but not their cause)
JVM_TROUBLE = re.compile(r"Exception|Error:|error:|OutOfMemory|Could not|Killed|JAVA_GATEWAY|not start|bad array|spark-class")


def statuses(address: dict[str, str]) -> dict[str, dict]:
    out = {}
    for peer, addr in address.items():
        client = SuperPeerClient(addr)
        try:
            out[peer] = client.status()
        finally:
            client.close()
    return out


def publish(address: str, photons: list[str], rate: int, stop, published) -> None:
    """Publishes ``rate`` photons/s in tenth-of-a-second batches until told to stop."""
    source = SuperPeerClient(address)
    chunk = max(rate // 10, 1)
    start, k = time.monotonic(), 0
    while not stop.is_set():
        if published.value < int((time.monotonic() - start) * rate):
            source.publish("photons", [photons[(k + i) % len(photons)] for i in range(chunk)])
            published.value += chunk
            k += chunk
        else:
            time.sleep(0.01)
    source.close()


def drain_all(subscriptions: list[tuple[str, str]], stop, delivered) -> None:
    """Every subscriber reads its results as they come (a thread each) until told to stop."""

    def drain(address: str, sid: str) -> None:
        client = SuperPeerClient(address)
        offset = 0
        try:
            while not stop.is_set():
                for off, _, _ in client.results(sid, offset, idle_timeout=2.0):
                    offset = off + 1
                    with delivered.get_lock():
                        delivered.value += 1
                    if stop.is_set():
                        break
        except Exception:  # noqa: BLE001 — the network going down at the end
            if not stop.is_set():
                raise
        finally:
            client.close()

    threads = [threading.Thread(target=drain, args=sub, daemon=True) for sub in subscriptions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=5000, help="photons/s published at SP4")
    parser.add_argument("--subscriptions", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    began = time.monotonic()
    with local_network(serve_args=("--executor", "spark")) as network:
        address = network.addresses
        while time.monotonic() - began < 600:
            if all(s["executor_status"]["state"] == "ready" for s in statuses(address).values()):
                break
            time.sleep(0.5)
        ready_s = time.monotonic() - began
        print(f"all eight executors ready after {ready_s:.1f} s", flush=True)
        chunk = max(args.rate // 10, 1)
        photons = [p.to_xml() for p in generate(chunk * 50, seed=5, rate=float(args.rate))]
        source = SuperPeerClient(address["SP4"])
        source.register_stream("photons", "photons", "photon", rate=args.rate)
        source.publish("photons", photons[:chunk])
        time.sleep(1.2)  # one heartbeat: every peer has the stream's statistics
        rng = random.Random(7)
        queries = template_queries(rng, ["photons"], sorted(address), args.subscriptions)
        subscribed, rejected = [], []
        for q in queries:
            client = SuperPeerClient(address[q.peer])
            try:
                subscribed.append((address[q.peer], client.subscribe(q.text).subscription))
            except Exception as exc:  # noqa: BLE001 — admission may refuse one; reported
                rejected.append(f"{q.id}: {exc}")
            finally:
                client.close()
        chains = sum(s["executor_status"].get("chains", 0) for s in statuses(address).values())
        print(f"{len(subscribed)} subscriptions ({len(rejected)} rejected), {chains} operator chains "
              f"installed; publishing {args.rate} photons/s for {args.minutes} min", flush=True)
        # publisher and subscribers in processes of their own: in this one they competed for its
        # interpreter with each other and with the sampling, and fell short of the rate
        context = multiprocessing.get_context("spawn")
        stop = context.Event()
        published, delivered = context.Value("q", 0), context.Value("q", 0)
        workers = [context.Process(target=publish, args=(address["SP4"], photons, args.rate, stop, published)),
                   context.Process(target=drain_all, args=(subscribed, stop, delivered))]
        for w in workers:
            w.start()
        pids = {peer: p.pid for peer, p in network.processes.items()}
        peak = {peer: 0.0 for peer in pids}
        worst = {"backlog_items": 0, "last_batch_ms": 0.0}
        samples = []
        start = time.monotonic()
        while time.monotonic() - start < 60 * args.minutes:
            time.sleep(10 - (time.monotonic() - start) % 10)
            backlog, batch_ms = 0, 0.0
            for peer, s in statuses(address).items():
                ex = s["executor_status"]
                backlog = max(backlog, ex.get("backlog_items", 0))
                batch_ms = max(batch_ms, ex.get("last_batch_ms", 0.0))
                peak[peer] = max(peak[peer], tree_rss_mb_of(pids[peer]))
            worst["backlog_items"] = max(worst["backlog_items"], backlog)
            worst["last_batch_ms"] = max(worst["last_batch_ms"], batch_ms)
            elapsed = time.monotonic() - start
            samples.append({"s": round(elapsed), "backlog_items": backlog, "last_batch_ms": round(batch_ms)})
            print(f"  {elapsed:6.0f} s: {published.value / elapsed:7.0f} photons/s published, "
                  f"{delivered.value} results delivered, backlog {backlog} items, batch {batch_ms:.0f} ms",
                  flush=True)
        elapsed = time.monotonic() - start
        stop.set()
        for w in workers:
            w.join(timeout=30)
        final = statuses(address)
        executors = {peer: s["executor_status"] for peer, s in final.items()}
        logs = {peer: Path(network.state_dir) / f"{peer}.log" for peer in address}
        trouble = {peer: len(TROUBLE.findall(path.read_text(errors="replace"))) if path.exists() else None
                   for peer, path in logs.items()}
        # where Spark failed to start, what its JVM wrote (spark-submit writes to the daemon's log)
        jvm_lines = {peer: [line for line in logs[peer].read_text(errors="replace").splitlines()
                            if JVM_TROUBLE.search(line) and not TROUBLE.search(line)][-20:]
                     for peer, e in executors.items() if e.get("start_failures") and logs[peer].exists()}
    report = {
        "benchmark": "Spark soak, paper-example network, eight Spark super-peers",
        "args": vars(args) | {"out": str(args.out) if args.out else None},
        "all_executors_ready_s": round(ready_s, 1),
        "subscriptions": len(subscribed), "rejected": rejected, "operator_chains": chains,
        "seconds": round(elapsed, 1), "photons_published": published.value,
        "published_per_s": round(published.value / elapsed), "results_delivered": delivered.value,
        "failed_batches": {p: e.get("failed_batches") for p, e in executors.items()},
        "start_failures": {p: e.get("start_failures") for p, e in executors.items()},
        "start_failure_reasons": {p: e["last_start_failure"] for p, e in executors.items()
                                  if e.get("last_start_failure")},
        "start_failure_jvm_lines": jvm_lines,
        "spark_restarts": {p: e.get("spark_restarts") for p, e in executors.items()},
        "log_lines_connect_or_pipe_failures": trouble,
        "errors": {p: e.get("error") for p, e in executors.items() if e.get("error")},
        "worst_backlog_items": worst["backlog_items"], "worst_batch_ms": worst["last_batch_ms"],
        "micro_batches": {p: e.get("micro_batches") for p, e in executors.items()},
        "peak_memory_mb": {p: round(v) for p, v in peak.items()},
        "samples": samples,
    }
    print(f"\nfailed batches {sum(v or 0 for v in report['failed_batches'].values())}, start failures "
          f"{sum(v or 0 for v in report['start_failures'].values())}, connect/pipe failures in logs "
          f"{sum(v or 0 for v in trouble.values())}; worst backlog {worst['backlog_items']} items, worst batch "
          f"{worst['last_batch_ms']:.0f} ms; peak memory per super-peer {max(peak.values()):.0f} MB")
    for peer, reason in report["start_failure_reasons"].items():
        print(f"{peer}: {reason}")
        for line in jvm_lines.get(peer, []):
            print(f"  {line}")
    write_report("spark_soak", report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
