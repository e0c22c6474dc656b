"""PNG plots of a simulation report in the style of the paper's Figures 6 and 7.

Figure 6 style: average CPU load per super-peer and average traffic per network connection;
Figure 7 style: CPU load and accumulated traffic (incoming + outgoing) per super-peer.

Drawn on the CLI side from the report the simulator returns: the simulator in ``sharing`` is pure
(no file output, no matplotlib), and only ``simulate --out`` pays for importing matplotlib.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"data-shipping": "#c44e52", "query-shipping": "#dd8452", "sharing": "#4c72b0",
          "sharing-subnets": "#55a868"}
ORDER = ["data-shipping", "query-shipping", "sharing", "sharing-subnets"]
MAX_BARS = 40  # a larger network's busiest peers and links are drawn (all are in report.json)


def _bars(ax, labels: list[str], series: dict[str, list[float]], ylabel: str, log: bool = False) -> None:
    names = [n for n in ORDER if n in series]
    width = 0.8 / max(len(names), 1)
    for i, name in enumerate(names):
        xs = [x + (i - (len(names) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, series[name], width, label=name.replace("-", " "), color=COLORS[name])
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=90 if len(labels) > 10 else 0, fontsize=8)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("symlog", linthresh=0.01)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def _load_panel(ax, peers: list[str], strategies: dict) -> None:
    _bars(ax, peers, {s: [100 * d["peers"][p]["load_measured"] for p in peers]
                      for s, d in strategies.items()}, "average CPU load [% of one core]")
    ax.set_title("CPU load per super-peer")


def _figure(out: Path, report: dict, figure: str, peers: list[str], strategies: dict,
            labels: list[str], traffic: dict[str, list[float]], ylabel: str, title: str) -> Path:
    """CPU load per super-peer beside a traffic panel, saved as ``<scenario>-<figure>.png``."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    _load_panel(a, peers, strategies)
    _bars(b, labels, traffic, ylabel, log=True)
    b.set_title(title)
    style = "Figure 6 style" if figure == "figure6" else "Figure 7 style"
    fig.suptitle(f"{report['scenario']}: {report['description']} ({style})")
    fig.tight_layout()
    path = out / f"{report['scenario']}-{figure}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _busiest(names: list[str], amount) -> list[str]:
    """All of ``names``, or the ``MAX_BARS`` with the largest ``amount``, in their order."""
    if len(names) <= MAX_BARS:
        return list(names)
    top = set(sorted(names, key=lambda n: -amount(n))[:MAX_BARS])
    return [n for n in names if n in top]


def write_plots(report: dict, out: Path) -> list[Path]:
    """Both figures of ``report`` as PNGs in ``out``; their paths."""
    out.mkdir(parents=True, exist_ok=True)
    strategies = report["strategies"]
    first = next(iter(strategies.values()))
    peers = _busiest(first["peers"], lambda p: max(d["peers"][p]["traffic_bytes"] for d in strategies.values()))
    links = _busiest(first["links"], lambda e: max(d["links"][e]["bytes"] for d in strategies.values()))
    seconds = report["simulated_seconds"]
    return [
        _figure(
        out, report, "figure6", peers, strategies, links,
        {s: [d["links"][e]["bytes"] * 8 / seconds / 1e3 for e in links] for s, d in strategies.items()},
        "average traffic [kbit/s]", "traffic per network connection"),
        _figure(
        out, report, "figure7", peers, strategies, peers,
        {s: [d["peers"][p]["traffic_bytes"] * 8 / 1e6 for p in peers] for s, d in strategies.items()},
        "accumulated traffic in+out [Mbit]", f"traffic per super-peer over {seconds:.0f} simulated s"),
    ]
