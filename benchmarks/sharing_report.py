"""What ``sharing_over_time`` shows: a table per window, the report as JSON, and a plot over
time with the events marked. Apart from the run, so that the figures can be drawn again from a
report (``python benchmarks/sharing_report.py REPORT.json``) without running the network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ORDER = ("reoptimise", "frozen")
COLORS = {"reoptimise": "#4c72b0", "frozen": "#dd8452", "fresh": "#55a868", "data_shipping": "#c44e52"}


def _cell(value) -> str:
    return f"{value:9.0f}" if isinstance(value, (int, float)) else f"{'–':>9s}"


def _reference_phase(report: dict) -> dict | None:
    """The phase whose windows' photons (c) and (d) are shown for: (a)'s if it ran."""
    phases = report["phases"]
    return next((phases[m] for m in ORDER if m in phases), None)


def print_table(report: dict) -> None:
    phases, timeline = report["phases"], report["timeline"]
    ref = _reference_phase(report)
    print(f"\nbackbone bytes per published photon, steady state of each window (its last "
          f"{1 - report['settings']['settle']:.0%}); grid-4x4, photons at SP0, {report['settings']['rate']:.0f}/s, "
          f"window {report['settings']['window_s']:.1f} s")
    for note in report["notes"]:
        print(f"  NOTE: {note}")
    print(f"  {'#':>2s} {'t s':>5s} {'event':34s} {'live':>4s} {'(a) reopt':>9s} {'(b) frozen':>10s} "
          f"{'(c) fresh':>9s} {'(d) ship':>9s} {'frz model':>9s} {'a/c':>5s} {'b/c':>5s}")
    for k, entry in enumerate(timeline):
        row = {m: phases[m]["windows"][k] for m in ORDER if m in phases}
        a, b = row.get("reoptimise", {}), row.get("frozen", {})
        c = ref["windows"][k] if ref else {}
        t = ref["event_times"][k] if ref and k < len(ref["event_times"]) else float("nan")
        ratio = {m: f"{w['bytes_per_item'] / c['fresh']:5.2f}" if w.get("bytes_per_item") and c.get("fresh")
                 else f"{'–':>5s}" for m, w in (("a", a), ("b", b))}
        print(f"  {k:2d} {t:5.1f} {entry['event'][:34]:34s} {len(entry['live']):4d} {_cell(a.get('bytes_per_item'))} "
              f"{_cell(b.get('bytes_per_item')):>10s} {_cell(c.get('fresh'))} {_cell(c.get('data_shipping'))} "
              f"{_cell(b.get('frozen_model'))} {ratio['a']} {ratio['b']}")
    for mode in ORDER:
        if mode not in phases:
            continue
        p = phases[mode]
        extra = f"; {len(p['rejected'])} rejected: {p['rejected']}" if p["rejected"] else ""
        errors = f"; {len(p['errors'])} errors, first: {p['errors'][0]}" if p["errors"] else ""
        print(f"  {mode}: {' '.join(p['flags']) or '(no flags)'}; {p['published']} photons in "
              f"{p['wall_seconds']:.0f} s{extra}{errors}")
        for line in p["unexpected_replans"]:
            print(f"    (not this benchmark's event) {line}")
    goal = phases.get("reoptimise", {}).get("goal")
    if goal is not None:
        print(f"  goal, {goal['target']}: {'MET' if goal['met'] else 'NOT MET'} "
              f"({sum(goal['met_per_window'])}/{len(goal['met_per_window'])} windows)")
    else:
        print("  goal not measured: no re-optimising phase ran")


def write_json(report: dict, path: Path) -> None:
    path.write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"wrote {path}")


def plot(report: dict, path: Path) -> None:
    """Bytes per photon per sampling interval, one line per phase; (c) and (d) as steps over
    each window's steady part; the events as vertical lines (shaded while being applied). The
    y axis stops at 1.3 × the data-shipping reference; a point above is drawn there, with its
    value."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases, timeline = report["phases"], report["timeline"]
    ref = _reference_phase(report)
    fig, ax = plt.subplots(figsize=(12, 5.5))
    shipping = [w["data_shipping"] for w in (ref or {}).get("windows", []) if w.get("data_shipping")]
    top = 1.3 * max(shipping) if shipping else None  # a recovery's replay burst would flatten the rest
    for mode in ORDER:
        if mode not in phases:
            continue
        samples = phases[mode]["samples"]
        xs, ys = [], []
        for s0, s1 in zip(samples, samples[1:]):
            if s1["items"] > s0["items"]:
                xs.append(s1["t"])
                ys.append((s1["bytes"] - s0["bytes"]) / (s1["items"] - s0["items"]))
        label = "(a) re-optimising" if mode == "reoptimise" else "(b) frozen plans"
        ax.plot(xs, [min(y, top) if top else y for y in ys], marker=".", lw=1.2, color=COLORS[mode], label=label)
        for x, y in _peaks(xs, ys, top):
            ax.annotate(f"peak {y:,.0f}", (x, top), textcoords="offset points", xytext=(4, -10), fontsize=7,
                        color=COLORS[mode])
    if ref is not None:
        for key, label in (("fresh", "(c) fresh, widest first"), ("data_shipping", "(d) data shipping")):
            for k, w in enumerate(ref["windows"]):
                if w.get(key) is not None:
                    ax.hlines(w[key], w["from_t"], w["to_t"], colors=COLORS[key], lw=2.5,
                              label=label if k == 0 or not any(x.get(key) for x in ref["windows"][:k]) else None)
        label_at = top or ax.get_ylim()[1]
        for t, took, entry in zip(ref["event_times"], ref["event_seconds"], timeline):
            ax.axvline(t, color="grey", ls=":", lw=1)
            ax.axvspan(t, t + took, color="grey", alpha=0.12, lw=0)  # while the event was applied
            ax.text(t + 0.3, label_at * 0.98, entry["event"][:28], rotation=90, va="top", fontsize=7,
                    color="dimgrey")
    ax.set_xlabel("seconds since the first registration")
    ax.set_ylabel("backbone bytes per published photon")
    ax.set_ylim(0, top)
    ax.set_title("Sharing over time: grid-4x4, photons at SP0, subscriptions churning, SP crash and link cut")
    ax.grid(alpha=0.3)
    fig.legend(fontsize=8, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def _peaks(xs: list[float], ys: list[float], top: float | None) -> list[tuple[float, float]]:
    """The highest point of every run of points above ``top``: one label per burst."""
    peaks: list[tuple[float, float]] = []
    run: list[tuple[float, float]] = []
    for x, y in [*zip(xs, ys), (float("nan"), 0.0)]:
        if top is not None and y > top:
            run.append((x, y))
        elif run:
            peaks.append(max(run, key=lambda p: p[1]))
            run = []
    return peaks


if __name__ == "__main__":
    report = json.loads(Path(sys.argv[1]).read_text())
    print_table(report)
    plot(report, Path(sys.argv[1]).with_suffix(".png"))
