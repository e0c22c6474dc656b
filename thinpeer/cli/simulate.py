"""``streamglobe simulate``: the paper's evaluation in process, as tables, JSON and plots.

The simulator (``sharing.simulator``) only returns a report; everything that touches the terminal
or files — the rich tables, ``report.json``, the PNG figures — happens here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from thinpeer.cli.command import EXIT_ERROR, EXIT_OK, AddCommand, CliError

MAX_PEER_ROWS = 40  # per-peer rows printed; a larger network's busiest ones


def choose_scenario(args: argparse.Namespace):
    """The scenario named on the command line (``random`` with ``--peers``/``--queries``)."""
    from sharing.scenarios import SCENARIOS, random_scenario

    if args.scenario == "random" or args.peers is not None:
        if args.peers is None or args.queries is None:
            raise CliError("error: a random scenario needs --peers N --queries M (and --seed S)")
        if args.peers < 2 or args.queries < 1:
            raise CliError("error: --peers must be at least 2 and --queries at least 1")
        return random_scenario(args.peers, args.queries, args.seed)
    if args.scenario in SCENARIOS:
        return SCENARIOS[args.scenario](args.seed)
    raise CliError(f"error: unknown scenario {args.scenario!r}; choose one of "
                   f"{', '.join(list(SCENARIOS) + ['random'])}")


def choose_strategies(args: argparse.Namespace) -> list:
    from sharing.planner import Strategy

    try:
        return [Strategy(s) for s in args.strategies.split(",")]
    except ValueError:
        raise CliError("error: --strategies takes a comma-separated subset of sharing, "
                       "data-shipping, query-shipping") from None


def cmd_simulate(args: argparse.Namespace) -> int:
    from sharing.simulator import simulate

    scenario, strategies = choose_scenario(args), choose_strategies(args)
    subnets = None
    if args.subnets is not None:
        from sharing.backbone import TopologyError
        from sharing.subnets import partition

        try:
            subnets = partition(scenario.backbone, args.subnets, args.seed)
        except TopologyError as exc:
            raise CliError(f"error: --subnets {args.subnets}: {exc}") from None
    report = simulate(scenario, photons=args.photons, strategies=strategies,
                      verify=not args.no_verify,
                      progress=lambda m: print(m, file=sys.stderr, flush=True), subnets=subnets)
    return finish(report, args.out)


def finish(report: dict, out_dir: str | None) -> int:
    """Tables on stdout, ``report.json`` and the plots in ``out_dir``; exit 1 on any mismatch."""
    print_simulation(report)
    if out_dir:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        from thinpeer.cli.plots import write_plots

        paths = write_plots(report, out)
        print(f"wrote {out / 'report.json'} and " + ", ".join(str(p) for p in paths),
              file=sys.stderr)
    mismatches = sum(len(d["verified"]["mismatches"]) for d in report["strategies"].values())
    return EXIT_ERROR if mismatches else EXIT_OK


def add_scenario_options(p: argparse.ArgumentParser, photons: int) -> None:
    p.add_argument("scenario", help="paper-example, paper-grid, paper-grid-constrained or random")
    p.add_argument("--peers", type=int, help="random topology: number of super-peers")
    p.add_argument("--queries", type=int, help="random topology: number of subscriptions")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--photons", type=int, default=photons, help="photons pushed per stream")
    p.add_argument("--strategies", default="sharing,data-shipping,query-shipping")
    p.add_argument("--out", metavar="DIR", help="write report.json and PNG plots here")


def print_simulation(report: dict) -> None:
    """The strategies side by side, then load and traffic per super-peer (measured and model)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 180)
    console.print(f"[bold]{report['scenario']}[/bold]: {report['description']}; "
                  f"{report['photons_per_stream']} photons per stream "
                  f"({report['simulated_seconds']:.0f} simulated s)")
    table = Table("strategy", "registered", "rejected", "traffic measured", "traffic model",
                  "links within ±25 %: estimates / measured rates", "registration ms min/avg/max",
                  "results verified")
    for name, d in report["strategies"].items():
        r = d["registration_ms"]
        v = d["verified"]
        acc = d.get("model_accuracy", {})
        table.add_row(name, str(d["registered"]), str(d["rejected"]),
                      f"{d['total_traffic_bytes'] / 1e6:.2f} MB",
                      f"{d['total_traffic_estimate_bytes'] / 1e6:.2f} MB",
                      " / ".join(_within(acc.get(k, {})) for k in ("estimates", "measured_rates")),
                      f"{r['min']:.2f} / {r['avg']:.2f} / {r['max']:.2f}",
                      f"{v['identical']}/{v['checked']}" if v["checked"] else "off")
    console.print(table)
    gap = report.get("subnets_against_flat")
    if gap:
        split = report["strategies"]["sharing-subnets"]["subnets"]
        console.print(f"planned in {split['subnets']} subnets of {split['smallest']}–{split['largest']} "
                      f"super-peers ({split['gateways']} gateways, {split['relays']} relays): traffic "
                      f"{gap['traffic']:.3g}× the flat plans' (model {gap['traffic_model']:.3g}×); "
                      f"registration median {gap['registration_ms_median']['subnets']:.2f} ms against "
                      f"{gap['registration_ms_median']['flat']:.2f} ms flat")
    peers = Table("super-peer", *[f"{n} load (model)" for n in report["strategies"]],
                  *[f"{n} traffic MB (model)" for n in report["strategies"]])
    first = next(iter(report["strategies"].values()))
    shown = list(first["peers"])
    if len(shown) > MAX_PEER_ROWS:  # (a large network: the busiest, the rest in report.json)
        busiest = {v: max(d["peers"][v]["traffic_bytes"] for d in report["strategies"].values()) for v in shown}
        top = set(sorted(shown, key=lambda v: -busiest[v])[:MAX_PEER_ROWS])
        shown = [v for v in shown if v in top]
        peers.caption = f"the {MAX_PEER_ROWS} busiest of {len(first['peers'])} super-peers; all in report.json"
    for v in shown:
        cells = []
        for d in report["strategies"].values():
            p = d["peers"][v]
            cells.append(f"{100 * p['load_measured']:.2f}% ({100 * p['load_estimate']:.2f}%)")
        for d in report["strategies"].values():
            p = d["peers"][v]
            cells.append(f"{p['traffic_bytes'] / 1e6:.2f} ({p['traffic_estimate_bytes'] / 1e6:.2f})")
        peers.add_row(v, *cells)
    console.print(peers)


def register(add_command: AddCommand) -> None:
    p = add_command("simulate", help="simulate the paper's evaluation in process")
    add_scenario_options(p, photons=20000)
    p.add_argument("--no-verify", action="store_true",
                   help="skip comparing delivered results with the reference evaluator")
    p.add_argument("--subnets", type=int, metavar="K",
                   help="also plan sharing in K subnets of the backbone (each on its own, originals "
                        "relayed through gateways) and report its traffic against the flat plans")
    p.set_defaults(func=cmd_simulate)


def _within(spread: dict) -> str:
    """The share of links whose measured bytes are within ±25 % of the model's, and the range."""
    if not spread.get("links"):
        return "–"
    return f"{spread['within_25_percent']:.0%} ({spread['min']:.2f}–{spread['max']:.2f}×)"
