"""A publisher ramped from 30 % to 300 % of a shaped link's rate and back, in containers: with
back-pressure (the default link buffer) against the old behaviour (a link buffer so large that
nothing waits), in one run.

Run: python benchmarks/overload.py [--link 8mbit] [--step-s 4] [--tail-s 30] [--out FILE] [--plot FILE.png]

The paper example in containers (``deploy up --insecure``), SP4–SP5 shaped to ``--link``; a
stream published at SP4 with rates stepping 0.3, 0.6, 1, 1.5, 2, 3, 2, 1.5, 1, 0.6, 0.3 × the
link's rate (in photons per second), ``--step-s`` each, then 0.3 × for ``--tail-s`` (the samples
come back up); an exact subscription to the whole
stream at SP1 (its route crosses SP4→SP5) and the paper's Query 1 at SP7. A second stream,
``survey``, is published at SP4 beside it at a steady ``SURVEY`` × the link's rate; two
approximate subscriptions at SP1 (``--min-rate 1/8``) read it: its bright photons item by item
(a stream of their own over the link), and their counts per 20 s window with intervals, computed
at SP1 from that stream. Lowering either alone would relieve nothing (the stream flows for the
other): the first goes onto a sample of its own before the link, the second joins it. Sampled every half second: the rate the publisher offered and
the rate it got, the bytes SP4 holds for SP5, SP4's resident memory, whether it holds the
publisher back, the approximate subscriptions' sample rates and the width of the last window's
count interval. At the end the exact subscriptions' results are compared with the reference
evaluator (nothing lost or repeated), and the report says when the samples were back at the
whole stream after the peak. Prints a table, writes JSON (and a PNG with matplotlib, ``plots``
extra).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from local_network import write_report

from photons.generator import generate
from sharing.scenarios import example_query
from streamglobe.units import parse_bitrate
from thinpeer.client import SuperPeerClient

CLI = [sys.executable, "-m", "thinpeer.cli"]
PROJECT = "sgoverload"
RAMP = (0.3, 0.6, 1.0, 1.5, 2.0, 3.0, 2.0, 1.5, 1.0, 0.6, 0.3)
WHOLE = '<all>{ for $p in stream("%s")/photons/photon return $p }</all>'
BRIGHT = '<b>{ for $p in stream("%s")/photons/photon where $p/en >= 0.3 return $p }</b>'
SURVEY = 0.4  # the survey stream's rate, a share of the link's
COUNTS = """<c>{ for $w in stream("%s")/photons/photon[en >= 0.3] |det_time diff 20 step 20|
    return <n>{ count($w/en) }</n> }</c>"""
UNBOUNDED = "1GiB"  # the link buffer of the baseline: nothing ever waits (the old behaviour)
UNBOUNDED_ITEMS = 1 << 30

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from network_harness import reference_results  # noqa: E402


@contextmanager
def containers(state: Path, link_buffer: str | None, link: str):
    config = state / "settings.toml"
    # (plans stay as registered: re-optimisation would route the stream around the saturated
    # link, which is what it is for, but not what is measured here)
    # (the baseline's buffer unbounded in items too: half of the default 200,000 items held counts
    # as held back, a pressure signal the old behaviour did not have)
    config.write_text("no_reoptimise = true\n" + (f'link_buffer = "{link_buffer}"\nlink_buffer_items = {UNBOUNDED_ITEMS}\n'
                                                 if link_buffer else ""))
    up = subprocess.run([*CLI, "deploy", "up", "--topology", "paper-example", "--project", PROJECT, "--insecure",
                         "--state-dir", str(state), "--config", str(config)], capture_output=True, text=True)
    try:
        if up.returncode != 0:
            raise SystemExit(f"deploy up failed:\n{up.stderr}")
        shaped = subprocess.run([*CLI, "deploy", "bandwidth", "SP4", "SP5", link, "--project", PROJECT,
                                 "--state-dir", str(state)], capture_output=True, text=True)
        if shaped.returncode != 0:
            raise SystemExit(f"deploy bandwidth failed:\n{shaped.stderr}")
        yield json.loads(up.stdout)
    finally:
        subprocess.run([*CLI, "deploy", "down", "--project", PROJECT, "--state-dir", str(state)],
                       capture_output=True, text=True)


def run(addresses: dict[str, str], link_bits: float, step_s: float, tail_s: float, label: str) -> dict:
    stream = "ramp"
    sp4, sp1, sp7 = (SuperPeerClient(addresses[p], timeout=60) for p in ("SP4", "SP1", "SP7"))
    per_item = len(next(iter(generate(1, seed=1))).to_xml())
    capacity = link_bits / 8 / per_item  # photons per second the link carries
    total = int((sum(RAMP) * step_s + RAMP[-1] * tail_s) * capacity) + 200
    photons = [p.to_xml() for p in generate(total, seed=17)]
    sp4.register_stream(stream, "photons", "photon", rate=capacity)
    sp4.publish(stream, photons[:200])
    sp4.register_stream("survey", "photons", "photon", rate=SURVEY * capacity)
    seconds = sum(RAMP) * step_s + RAMP[-1] * tail_s + 120  # (and its drain: one stream, in event-time order)
    survey = [p.to_xml() for p in generate(int(SURVEY * capacity * seconds), seed=18)]
    sp4.publish("survey", survey[:200])
    exact = sp1.subscribe(WHOLE % stream).id
    vela = sp7.subscribe(example_query("q1").replace('"photons"', f'"{stream}"')).id
    approximate = {name: sp1.subscribe(query % "survey", approximate=True, min_rate=8).id
                   for name, query in (("bright", BRIGHT), ("counts", COUNTS))}
    samples: list[dict] = []
    offered = {"rate": 0.0}
    stop = threading.Event()

    def steady() -> None:  # (the survey, beside the ramp: held back with it when the link is full)
        step = max(int(SURVEY * capacity), 1)
        for k in range(200, len(survey), step):
            if stop.is_set():
                return
            sp4.publish("survey", survey[k:k + step], rate=SURVEY * capacity)

    def sample() -> None:
        start = time.monotonic()
        while not stop.is_set():
            s = sp4.status()
            link = s["links"].get("SP4->SP5", {})
            held = s.get("backpressure", {}).get("streams", {}).get(stream, {})
            subs = sp1.status()["subscriptions"]
            last = (subs[approximate["counts"]].get("intervals") or {}).get("last_window") or []
            width = next((e["high"] - e["low"] for e in last if e["function"] == "count" and e["high"] is not None),
                         0.0)
            samples.append({"t": round(time.monotonic() - start, 2), "offered_items_per_s": offered["rate"],
                            "accepted": s["streams_registered_here"][stream]["accepted"],
                            "link_bytes": link.get("bytes", 0), "held_bytes": link.get("held_bytes", 0),
                            "rss_bytes": s.get("process_rss_bytes"), "held_back": bool(held.get("waiting")),
                            "samples": {n: subs[sid]["sample"] for n, sid in approximate.items()},
                            "count_interval_width": width})
            time.sleep(0.5)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    surveyor = threading.Thread(target=steady, daemon=True)
    surveyor.start()
    at, held_back_s, peak_over = 200, 0.0, 0.0
    for k, factor in enumerate(RAMP):
        if k and RAMP[k - 1] == max(RAMP):
            peak_over = samples[-1]["t"] if samples else 0.0  # (the ramp comes down from its peak)
        offered["rate"] = factor * capacity
        n = int(factor * capacity * (step_s + (tail_s if k == len(RAMP) - 1 else 0.0)))
        summary = sp4.publish(stream, photons[at:at + n], rate=offered["rate"])
        held_back_s += summary.held_back_s
        at += n
    sp4.close_stream(stream)
    offered["rate"] = 0.0
    got = [item for _, item, _ in sp1.results(exact, idle_timeout=300)]
    got_vela = [item for _, item, _ in sp7.results(vela, idle_timeout=300)]
    stop.set()
    watcher.join()
    surveyor.join(120)
    expected_vela = reference_results(example_query("q1"), photons[200:at])
    lowest = {n: max(s["samples"][n] for s in samples) for n in approximate}
    back = {n: next((s["t"] - peak_over for s in samples if s["t"] >= peak_over and s["samples"][n] == 1), None)
            for n in approximate}
    link = sp4.status()["links"]["SP4->SP5"]
    subs_now = sp1.status()["subscriptions"]
    health = sp1.status()["subscriptions"][exact]["health"]
    return {"mode": label, "replans": health.get("replans", 0), "last_failure": health.get("last_failure"), "link_bits_per_s": link_bits, "photons": at - 200, "capacity_items_per_s": capacity,
            "exact_lost_or_extra": abs(len(got) - (at - 200)) + sum(a != b for a, b in zip(got, photons[200:at])),
            "vela_equal": got_vela == expected_vela, "peak_held_bytes": link["peak_held_bytes"],
            "dropped": link["dropped"], "held_back_s": round(held_back_s, 2),
            "peak_rss_bytes": max((s["rss_bytes"] or 0) for s in samples) if samples else None,
            "coarsest_sample": lowest, "whole_again_after_peak_s": back,
            "kept_whole_why": {n: (subs_now[sid].get("approximate") or {}).get("sampling", "")
                               for n, sid in approximate.items()},
            "samples": samples}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(5, 1, figsize=(9, 13), sharex=True)
    for r in results:
        t = [s["t"] for s in r["samples"]]
        rate = [0.0] + [(b["accepted"] - a["accepted"]) / max(b["t"] - a["t"], 1e-9)
                        for a, b in zip(r["samples"], r["samples"][1:])]
        axes[0].plot(t, rate, label=f"{r['mode']}: accepted")
        axes[1].plot(t, [s["held_bytes"] / 2**20 for s in r["samples"]], label=r["mode"])
        axes[2].plot(t, [(s["rss_bytes"] or 0) / 2**20 for s in r["samples"]], label=r["mode"])
        if r is results[0]:
            for name in r["samples"][0]["samples"] if r["samples"] else ():
                axes[3].step(t, [1 / s["samples"][name] for s in r["samples"]], where="post",
                             label=f"{r['mode']}: {name} (sample kept)")
            axes[4].step(t, [s["count_interval_width"] for s in r["samples"]], where="post",
                         label=f"{r['mode']}: counts, the last window estimated on a sample (0: exact)")
    first = results[0]
    axes[0].plot([s["t"] for s in first["samples"]], [s["offered_items_per_s"] for s in first["samples"]],
                 "k:", label="offered")
    axes[0].axhline(first["capacity_items_per_s"], color="grey", lw=0.8, label="link capacity")
    axes[0].set_ylabel("photons/s at SP4")
    axes[1].set_ylabel("MiB held for SP4→SP5")
    axes[2].set_ylabel("SP4 resident MiB")
    axes[3].set_ylabel("approximate: share sampled")
    axes[4].set_ylabel("95 % interval width\n(photons per window)")
    axes[4].set_xlabel("seconds")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.suptitle("a publisher ramped to 3× a shaped link: back-pressure vs none; approximate samples")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--link", default="8mbit", help="the rate SP4–SP5 is shaped to")
    parser.add_argument("--step-s", type=float, default=4.0, help="seconds per step of the ramp")
    parser.add_argument("--tail-s", type=float, default=30.0, help="seconds at the last step, after the ramp")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    link_bits = parse_bitrate(args.link)
    results = []
    with tempfile.TemporaryDirectory(prefix="sg-overload-") as tmp:
        for label, buffer in (("back-pressure", None), ("no back-pressure", UNBOUNDED)):
            state = Path(tmp) / label.replace(" ", "-")
            state.mkdir()
            with containers(state, buffer, args.link) as addresses:
                results.append(run(addresses, link_bits, args.step_s, args.tail_s, label))
    print(f"{'mode':<18} {'photons':>8} {'lost/extra':>10} {'Q1 equal':>8} {'peak held MiB':>13} "
          f"{'peak RSS MiB':>12} {'held back s':>11}  approximate: coarsest, whole again after the peak")
    for r in results:
        approx = ", ".join(f"{n} 1/{r['coarsest_sample'][n]} "
                           + (f"{r['whole_again_after_peak_s'][n]:.1f} s" if r["whole_again_after_peak_s"][n]
                              is not None else "not again")
                           for n in r["coarsest_sample"])
        print(f"{r['mode']:<18} {r['photons']:>8} {r['exact_lost_or_extra']:>10} {str(r['vela_equal']):>8} "
              f"{r['peak_held_bytes'] / 2**20:>13.1f} {(r['peak_rss_bytes'] or 0) / 2**20:>12.1f} "
              f"{r['held_back_s']:>11.1f}  {approx}")
    write_report("overload", {"benchmark": "publisher ramped to 3x a shaped link", "link": args.link,
                              "step_s": args.step_s, "tail_s": args.tail_s, "results": results}, args.out)
    if args.plot:
        plot(results, args.plot)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
