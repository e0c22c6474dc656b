"""The Spark executor (one micro-batch loop for all operators) against N independent ones.

For N = 1, 10, 30 installed operators (a mix of Q1-like selections with projection, Q3-like
time-window aggregates and count-window aggregates, each with its own constants), in one run:

* **shared** — one ``SparkExecutor`` with all N chains: one Spark job per micro-batch;
* **baseline** — N ``SparkExecutor``s with one chain each: N independent micro-batch loops in the
  same Spark session, one per subscription, each fed the whole stream.

Throughput: photons pushed as fast as possible until every operator has processed them
(photons/s of input). Latency: photons offered at a fixed rate in small chunks; a chunk's latency
is from its push until the micro-batch that contains it has been delivered. Memory: peak resident
set of this process, the Spark JVM and its Python workers.

    python benchmarks/spark_executor.py [--photons 200000] [--repeats 3] [--rate 10000] [--seconds 10] [--warmup 50000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from fractions import Fraction as F
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from photons.generator import generate  # noqa: E402
from superpeer.executors.spark.executor import SparkExecutor
from wxquery.operators import definitions as alg  # noqa: E402

RA, DEC, EN, T = "coord/cel/ra", "coord/cel/dec", "en", "det_time"


def atom(left: str, op: str, c: str) -> alg.Atom:
    return alg.Atom(left, op, None, F(c))


def operators(i: int) -> tuple[alg.Operator, ...]:
    """Subscription i's operator chain; kinds rotate, constants differ per subscription."""
    kind = i % 3
    if kind == 0:
        lo = F(129) + F(i, 10)
        return (alg.Select((atom(RA, ">=", str(lo)), atom(RA, "<=", str(lo + 2)), atom(EN, ">=", "1.3"))),
                alg.Project(frozenset({"coord/cel", EN, T})))
    if kind == 1:
        return (alg.Select((atom(EN, ">=", str(F(1) + F(i, 100))),)),
                alg.WindowAggregate(alg.WindowSpec("diff", F(20), F(10), T),
                                    (("sum", EN), ("count", EN), ("max", EN))))
    return (alg.Select((atom(DEC, "<", str(F(-46) + F(i, 50))),)),
            alg.WindowAggregate(alg.WindowSpec("count", F(100), F(50)), (("sum", EN), ("count", EN))))


def tree_rss_mb() -> float:
    """Resident memory of this process and all its descendants (the JVM, Python workers)."""
    return tree_rss_mb_of(os.getpid())


def tree_rss_mb_of(root: int) -> float:
    """Resident memory of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            pid, ppid = int(entry), int(fields[1])
            children.setdefault(ppid, []).append(pid)
            rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total / 2**20


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process (the driver), its Spark JVM and its Python workers,
    and ``machine_busy``: the whole machine's busy jiffies over all (a ratio of differences
    makes the share of the machine in use between two calls)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry))
            used[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    out = {"driver": used.get(os.getpid(), 0.0), "jvm": 0.0, "python_workers": 0.0}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        program = argv.split(b"\0", 1)[0].rsplit(b"/", 1)[-1]
        kind = "jvm" if program == b"java" else "python_workers" if b"pyspark." in argv else None
        if kind:
            out[kind] += used.get(pid, 0.0)
    with open("/proc/stat") as f:
        jiffies = [int(x) for x in f.readline().split()[1:]]
    out["machine_busy"] = float(sum(jiffies) - jiffies[3] - jiffies[4])
    out["machine_all"] = float(sum(jiffies))
    return out


class MemoryPeak:
    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.peak = max(self.peak, tree_rss_mb())

    def __enter__(self) -> "MemoryPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_mb())


class Setup:
    """The executors of one configuration, all fed the same photons."""

    def __init__(self, mode: str, n: int, trigger_ms: int, first: list[str]) -> None:
        """Starts the executors and feeds each ``first`` (its query is then up and running)."""
        self.delivered = 0
        self.executors = []
        # baseline queries start one after the other, each once the previous one has run a
        # batch: Spark gives a new query's Python source process 10 s to connect back, which
        # 30 processes starting at once on 2 cores do not make
        for i in range(1 if mode == "shared" else n):
            ex = SparkExecutor(f"shared{n}" if mode == "shared" else f"q{n}-{i}", trigger_ms=trigger_ms,
                               deliver=self._deliver)
            self.executors.append(ex)
            ex.start()
            for k in range(n) if mode == "shared" else [i]:
                ex.install(f"s{k}", operators(k), parent="photons")
            ex.push("photons", [], first, False)
            if not ex.wait_idle(600):
                self.stop()
                raise RuntimeError(f"{mode} N={n}: query {i + 1} did not start: {ex.status()['error']}")

    def _deliver(self, stream, seq, texts, end) -> None:
        self.delivered += len(texts)

    def push(self, texts: list[str]) -> None:
        for ex in self.executors:
            ex.push("photons", [], texts, False)

    def processed(self) -> int:
        return min(ex.processed for ex in self.executors)

    def wait(self, timeout: float) -> bool:
        return all(ex.wait_idle(timeout) for ex in self.executors)

    def stop(self) -> None:
        for ex in self.executors:
            ex.stop()


def measure(mode: str, n: int, photons: list[str], args) -> dict:
    setup = Setup(mode, n, args.trigger_ms, photons[:2000])
    try:
        # then one full-size batch so that every Python worker is running and warm (steady
        # state is measured, not the first batches of a new JVM)
        for k in range(2000, args.warmup, 1000):
            setup.push(photons[k:min(k + 1000, args.warmup)])
        if not setup.wait(3600):
            raise RuntimeError(f"{mode} N={n} did not warm up: {[e.status() for e in setup.executors]}")
        with MemoryPeak() as memory:
            # throughput: everything at once, in the node's 1,000-item batches; --repeats times
            # (one run lasts about a second: the median of a few is steadier on a shared machine)
            rates, finished = [], True
            cpu_before = cpu_seconds()
            for r in range(args.repeats):
                body = photons[args.warmup + r * args.photons:args.warmup + (r + 1) * args.photons]
                started = time.perf_counter()
                for k in range(0, len(body), 1000):
                    setup.push(body[k:k + 1000])
                finished = setup.wait(3600) and finished
                rates.append(len(body) / (time.perf_counter() - started))
            cpu_after = cpu_seconds()
            cpu = {kind: round(cpu_after[kind] - cpu_before[kind], 2) for kind in ("driver", "jvm", "python_workers")}
            cpu["machine_busy"] = round((cpu_after["machine_busy"] - cpu_before["machine_busy"])
                                        / max(cpu_after["machine_all"] - cpu_before["machine_all"], 1.0), 2)
            # latency: a fixed offered rate in chunks; each chunk's push-to-delivery time
            chunk = max(1, args.rate // 100)
            pending: list[tuple[int, float]] = []
            latencies: list[float] = []
            base = setup.executors[0].feed.end
            done = threading.Event()

            def watch() -> None:
                while not done.is_set() or pending:
                    now = time.perf_counter()
                    upto = setup.processed()
                    while pending and pending[0][0] <= upto:
                        latencies.append(now - pending.pop(0)[1])
                    if done.is_set() and time.perf_counter() > deadline:
                        break
                    time.sleep(0.002)

            source = photons[args.warmup + args.repeats * args.photons:]
            watcher = threading.Thread(target=watch, daemon=True)
            deadline = float("inf")
            watcher.start()
            t0 = time.perf_counter()
            sent = 0
            while time.perf_counter() - t0 < args.seconds:
                target = int((time.perf_counter() - t0) * args.rate)
                while sent < target and sent + chunk <= len(source):
                    setup.push(source[sent:sent + chunk])
                    sent += chunk
                    pending.append((base + sent, time.perf_counter()))
                time.sleep(0.005)
            deadline = time.perf_counter() + 120
            done.set()
            watcher.join()
        result = {
            "mode": mode, "operators": n, "photons": len(body), "completed": finished,
            "throughput_photons_per_s": round(statistics.median(rates)),
            "throughput_runs": [round(x) for x in rates],
            "latency_rate_photons_per_s": args.rate,
            "latency_p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "latency_p99_ms": (round(1000 * statistics.quantiles(latencies, n=100)[98], 1)
                               if len(latencies) >= 2 else None),
            "latency_chunks_unfinished": len(pending),
            "peak_memory_mb": round(memory.peak),
            # CPU seconds of the throughput runs: where the work goes, and how busy the machine was
            "throughput_cpu_s": {k: v for k, v in cpu.items() if k != "machine_busy"},
            "throughput_machine_busy": cpu.get("machine_busy"),
            "micro_batches": sum(e.batches for e in setup.executors),
            "failed_batches": sum(e.failed_batches for e in setup.executors),
        }
        print(json.dumps(result), flush=True)
        return result
    finally:
        setup.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photons", type=int, default=200_000, help="photons for the throughput phase")
    parser.add_argument("--rate", type=int, default=10_000, help="offered photons/s in the latency phase")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency phase")
    parser.add_argument("--operators", default="1,10,30")
    parser.add_argument("--modes", default="shared,baseline", help="shared, baseline or both")
    parser.add_argument("--warmup", type=int, default=50_000, help="photons pushed before measuring")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs (the median is reported)")
    parser.add_argument("--trigger-ms", type=int, default=100)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "spark_executor.json"))
    args = parser.parse_args()
    args.warmup = max(args.warmup, 2000)
    total = args.warmup + args.repeats * args.photons + int(args.rate * args.seconds) + args.rate
    print(f"generating {total} photons…", file=sys.stderr, flush=True)
    photons = [p.to_xml() for p in generate(total, seed=1, rate=200.0)]
    results = []
    for n in (int(x) for x in args.operators.split(",")):
        for mode in args.modes.split(","):
            print(f"{mode}, N={n}…", file=sys.stderr, flush=True)
            try:
                results.append(measure(mode, n, photons, args))
            except RuntimeError as exc:  # reported, not hidden: the alternative may not run at all
                print(f"{mode} N={n} failed: {exc}", file=sys.stderr, flush=True)
                results.append({"mode": mode, "operators": n, "failed": str(exc)[:500],
                                "throughput_photons_per_s": 0, "latency_p50_ms": None,
                                "latency_p99_ms": None, "peak_memory_mb": 0})
    print(f"\n{'N':>3} {'mode':9} {'photons/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'memory MB':>10}"
          "  CPU s: driver / JVM / workers, machine busy")
    for r in results:
        cpu = r.get("throughput_cpu_s") or {}
        print(f"{r['operators']:>3} {r['mode']:9} {r['throughput_photons_per_s']:>10,} "
              f"{r['latency_p50_ms'] or '-':>8} {r['latency_p99_ms'] or '-':>8} {r['peak_memory_mb']:>10,}  "
              f"{cpu.get('driver', '-')} / {cpu.get('jvm', '-')} / {cpu.get('python_workers', '-')}, "
              f"{round(100 * r['throughput_machine_busy']) if r.get('throughput_machine_busy') is not None else '-'} %")
    by = {(r["mode"], r["operators"]): r for r in results}
    for n in sorted({r["operators"] for r in results}):
        if ("shared", n) not in by or ("baseline", n) not in by:
            continue
        s, b = by[("shared", n)], by[("baseline", n)]
        print(f"N={n}: shared/baseline throughput = "
              f"{s['throughput_photons_per_s'] / max(b['throughput_photons_per_s'], 1):.1f}×")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
