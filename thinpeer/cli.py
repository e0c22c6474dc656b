"""The ``streamglobe`` command line: one console script, one subcommand per user task.

Each subcommand is a thin shell over the library: it reads files, calls one function, and turns
typed errors into ``FILE:LINE:COL: error: …`` lines and non-zero exit codes. No traceback
reaches a user for bad input.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Sequence

EXIT_OK = 0
EXIT_ERROR = 1


def _read_query(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _CliError(f"{path}: error: no such query file") from None
    except UnicodeDecodeError as exc:
        raise _CliError(f"{path}: error: query file is not UTF-8 text ({exc.reason} at byte "
                        f"{exc.start})") from None
    except OSError as exc:
        raise _CliError(f"{path}: error: cannot read query file: {exc.strerror}") from None


class _CliError(Exception):
    """A message for stderr; the command exits non-zero."""


def _analyze(path: str):
    from sharing.analysis import analyze
    from wxquery.errors import WXQueryError

    text = _read_query(path)
    try:
        return analyze(text)
    except WXQueryError as exc:
        raise _CliError(exc.format(path)) from None


# ----------------------------------------------------------------------------- query


def cmd_query_check(args: argparse.Namespace) -> int:
    _analyze(args.file)
    print("ok")
    return EXIT_OK


def cmd_query_explain(args: argparse.Namespace) -> int:
    analysis = _analyze(args.file)
    json.dump(analysis.properties.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return EXIT_OK


def _input_documents(specs: list[str]):
    from wxquery.stream_document import StreamDocument

    if not specs:
        raise _CliError("error: give the stream document with --input DOC.xml "
                        "(or --input NAME=DOC.xml per stream, '-' for standard input)")
    named: dict[str, StreamDocument] = {}
    default = None
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if path == "-":
            doc = StreamDocument.from_bytes(sys.stdin.buffer.read(), "<stdin>")
        else:
            if not Path(path).is_file():
                raise _CliError(f"{path}: error: no such input file")
            doc = StreamDocument.from_file(path)
        if name:
            named[name] = doc
        else:
            default = doc
    if default is not None and not named:
        return default
    if default is not None:
        raise _CliError("error: mix of named (NAME=DOC) and unnamed --input; name every input")
    return named


def cmd_query_run(args: argparse.Namespace) -> int:
    from wxquery.errors import InputDocumentError
    from wxquery.evaluator import evaluate

    analysis = _analyze(args.file)
    inputs = _input_documents(args.input)
    evaluation = evaluate(analysis.checked, inputs, lateness=args.lateness)
    # Results are spooled so that a malformed input never leaves half a document on stdout.
    with tempfile.SpooledTemporaryFile(max_size=64 << 20, mode="w+", encoding="utf-8") as out:
        root = evaluation.root_name
        empty = True
        try:
            for text in evaluation.serialized_items():
                if empty:
                    out.write(f"<{root}>")
                    empty = False
                out.write(text)
        except InputDocumentError as exc:
            raise _CliError(str(exc)) from None
        out.write(f"<{root}/>\n" if empty else f"</{root}>\n")
        out.seek(0)
        shutil.copyfileobj(out, sys.stdout)
    for warning in evaluation.stats.warnings():
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _match_texts(old_text: str, new_text: str) -> dict:
    from sharing.analysis import analyze
    from sharing.matching import match_subscriptions
    from wxquery.errors import WXQueryError

    analyses = []
    for label, text in (("old", old_text), ("new", new_text)):
        try:
            # Unsatisfiable predicates are legitimate here: an unsatisfiable P' implies any P.
            analyses.append(analyze(text, require_satisfiable=False))
        except WXQueryError as exc:
            return {"shareable": False, "reason": f"{label} query: {exc}", "error": True}
    match = match_subscriptions(analyses[0].properties, analyses[1].properties)
    return {"shareable": match.shareable, "reason": match.reason}


def cmd_query_match(args: argparse.Namespace) -> int:
    if args.batch:
        try:
            lines = (sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")).read().splitlines()
        except OSError as exc:
            raise _CliError(f"{args.batch}: error: cannot read: {exc.strerror}") from None
        failures = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                pair = json.loads(line)
                result = _match_texts(pair["old"], pair["new"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                result = {"shareable": False, "reason": f"line {number}: not a JSON object with "
                          f"\"old\" and \"new\" query texts ({exc})", "error": True}
            failures += bool(result.pop("error", False))
            print(json.dumps(result), flush=True)
        if failures:
            print(f"warning: {failures} line(s) could not be matched (see their reasons)",
                  file=sys.stderr)
        return EXIT_OK
    if not args.old or not args.new:
        raise _CliError("error: give OLD and NEW query files, or --batch FILE.jsonl")
    result = _match_texts(_read_query(args.old), _read_query(args.new))
    failed = result.pop("error", False)
    print(json.dumps(result))
    return EXIT_ERROR if failed else EXIT_OK


# ----------------------------------------------------------------------------- simulate


def cmd_simulate(args: argparse.Namespace) -> int:
    from sharing.planner import Strategy
    from sharing.scenarios import SCENARIOS, random_scenario
    from sharing.simulator import simulate

    if args.scenario == "random" or args.peers is not None:
        if args.peers is None or args.queries is None:
            raise _CliError("error: a random scenario needs --peers N --queries M (and --seed S)")
        if args.peers < 2 or args.queries < 1:
            raise _CliError("error: --peers must be at least 2 and --queries at least 1")
        scenario = random_scenario(args.peers, args.queries, args.seed)
    elif args.scenario in SCENARIOS:
        scenario = SCENARIOS[args.scenario](args.seed)
    else:
        raise _CliError(f"error: unknown scenario {args.scenario!r}; choose one of "
                        f"{', '.join(list(SCENARIOS) + ['random'])}")
    try:
        strategies = [Strategy(s) for s in args.strategies.split(",")]
    except ValueError:
        raise _CliError("error: --strategies takes a comma-separated subset of sharing, "
                        "data-shipping, query-shipping") from None
    report = simulate(scenario, photons=args.photons, strategies=strategies,
                      verify=not args.no_verify,
                      progress=lambda m: print(m, file=sys.stderr, flush=True))
    _print_simulation(report)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
        from sharing.report_plots import write_plots

        paths = write_plots(report, out)
        print(f"wrote {out / 'report.json'} and " + ", ".join(str(p) for p in paths),
              file=sys.stderr)
    mismatches = sum(len(d["verified"]["mismatches"]) for d in report["strategies"].values())
    return EXIT_ERROR if mismatches else EXIT_OK


def _print_simulation(report: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 180)
    console.print(f"[bold]{report['scenario']}[/bold]: {report['description']}; "
                  f"{report['photons_per_stream']} photons per stream "
                  f"({report['simulated_seconds']:.0f} simulated s)")
    table = Table("strategy", "registered", "rejected", "traffic measured", "traffic model",
                  "registration ms min/avg/max", "results verified")
    for name, d in report["strategies"].items():
        r = d["registration_ms"]
        v = d["verified"]
        table.add_row(name, str(d["registered"]), str(d["rejected"]),
                      f"{d['total_traffic_bytes'] / 1e6:.2f} MB",
                      f"{d['total_traffic_estimate_bytes'] / 1e6:.2f} MB",
                      f"{r['min']:.2f} / {r['avg']:.2f} / {r['max']:.2f}",
                      f"{v['identical']}/{v['checked']}" if v["checked"] else "off")
    console.print(table)
    peers = Table("super-peer", *[f"{n} load (model)" for n in report["strategies"]],
                  *[f"{n} traffic MB (model)" for n in report["strategies"]])
    first = next(iter(report["strategies"].values()))
    for v in first["peers"]:
        cells = []
        for d in report["strategies"].values():
            p = d["peers"][v]
            cells.append(f"{100 * p['load_measured']:.2f}% ({100 * p['load_estimate']:.2f}%)")
        for d in report["strategies"].values():
            p = d["peers"][v]
            cells.append(f"{p['traffic_bytes'] / 1e6:.2f} ({p['traffic_estimate_bytes'] / 1e6:.2f})")
        peers.add_row(v, *cells)
    console.print(peers)


# ----------------------------------------------------------------------------- photons


def cmd_photons_generate(args: argparse.Namespace) -> int:
    from photons.generator import generate, write_document

    if args.count < 0:
        raise _CliError("error: --count must not be negative")
    if args.rate <= 0:
        raise _CliError("error: --rate must be positive")
    write_document(sys.stdout, generate(args.count, args.seed, args.rate, args.start_time))
    return EXIT_OK


def cmd_photons_from_fits(args: argparse.Namespace) -> int:
    from photons.fits_events import EventListError, write_fits_document

    def progress(n: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{n} photons converted", end="", file=sys.stderr, flush=True)

    try:
        report = write_fits_document(args.file, sys.stdout, limit=args.limit, progress=progress)
    except EventListError as exc:
        raise _CliError(f"{args.file}: error: {exc}") from None
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"{args.file}: {report.photons_out} photons from {report.events_in} events "
          f"(sky from {report.sky_columns}, energy in {report.energy_unit or 'n/a'})",
          file=sys.stderr)
    for reason, n in report.skipped.items():
        print(f"warning: {n} event(s) skipped: {reason}", file=sys.stderr)
    return EXIT_OK


# ----------------------------------------------------------------------------- network


def _client(address: str):
    from thinpeer.client import SuperPeerClient

    return SuperPeerClient(address)


def _thin_error(exc) -> _CliError:
    return _CliError(f"error: {exc.code}: {exc.message}")


def cmd_superpeer_serve(args: argparse.Namespace) -> int:
    import logging

    from sharing.backbone import TopologyError
    from superpeer.node import NodeError
    from superpeer.server import serve_forever, start_superpeer
    from superpeer.topology import load_topology
    from thinpeer.topologies import topology_path

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {args.id} %(levelname)s %(message)s")
    try:
        with topology_path(args.topology) as path:
            topology = load_topology(path)
        running = start_superpeer(topology, args.id, args.port, args.retention, args.executor,
                                  _spark_options(args))
    except (TopologyError, NodeError, OSError) as exc:
        raise _CliError(f"error: {getattr(exc, 'message', exc)}") from None
    print(f"{args.id} serving on {running.address}", file=sys.stderr, flush=True)
    serve_forever(running)
    return EXIT_OK


def _document_items(path: str):
    """(root, item, iterator of item XML strings) of a stream document."""
    from lxml import etree

    from wxquery.errors import InputDocumentError
    from wxquery.stream_document import StreamDocument

    doc = StreamDocument.from_bytes(sys.stdin.buffer.read(), "<stdin>") if path == "-" \
        else StreamDocument.from_file(path)
    try:
        with doc._open() as f:
            root = item = None
            for event, el in etree.iterparse(f, events=("start",)):
                if root is None:
                    root = el.tag
                elif item is None:
                    item = el.tag
                    break
    except etree.XMLSyntaxError as exc:
        raise _CliError(f"{path}:{exc.position[0]}:{exc.position[1]}: error: malformed XML: {exc.msg}") from None
    if root is None or item is None:
        raise _CliError(f"{path}: error: no items: expected <root><item>…</item>…</root>")

    def items():
        try:
            for el in doc.items(root, item):
                yield etree.tostring(el, encoding="unicode", with_tail=False)
        except InputDocumentError as exc:
            raise _CliError(str(exc)) from None

    return root, item, items()


def cmd_publish(args: argparse.Namespace) -> int:
    import itertools

    from thinpeer.client import ThinPeerError
    from photons.generator import generate

    if args.input is None and not args.synthetic:
        raise _CliError("error: give --input DOC.xml or --synthetic")
    if args.input is not None:
        root, item, items = _document_items(args.input)
    else:
        root, item = "photons", "photon"
        items = (p.to_xml() for p in generate(args.count, args.seed, rate=10.0))
    if args.count is not None:
        items = itertools.islice(items, args.count)
    started = __import__("time").monotonic()

    def progress(summary) -> None:
        elapsed = __import__("time").monotonic() - started
        print(f"\r{args.stream}: {summary.accepted} items published, {summary.rejected} rejected "
              f"({summary.accepted / max(elapsed, 1e-9):,.0f} items/s)", end="", file=sys.stderr, flush=True)

    try:
        with _client(args.superpeer) as client:
            client.register_stream(args.stream, root, item, args.rate or 0.0)
            try:
                summary = client.publish(args.stream, items, rate=args.rate, progress=progress)
            finally:
                client.close_stream(args.stream)
    except ThinPeerError as exc:
        print(file=sys.stderr)
        raise _thin_error(exc) from None
    print(file=sys.stderr)
    for reason in summary.reasons or []:
        print(f"rejected: {reason}", file=sys.stderr)
    print(f"{args.stream}: {summary.accepted} items published and the stream closed; "
          f"{summary.rejected} rejected", file=sys.stderr)
    return EXIT_OK if not summary.rejected else EXIT_ERROR


def _offset_file(subscription: str) -> Path:
    return Path(".streamglobe") / f"{subscription}.offset"


def cmd_subscribe(args: argparse.Namespace) -> int:
    import time

    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            if args.resume:
                sid = args.resume
                offset = args.offset if args.offset is not None else (
                    int(_offset_file(sid).read_text()) if _offset_file(sid).exists() else 0)
                print(f"resuming subscription {sid} at offset {offset}", file=sys.stderr)
            else:
                if not args.query:
                    raise _CliError("error: give --query FILE (or --resume ID)")
                reply = client.subscribe(_read_query(args.query), args.strategy,
                                         wait_for_streams=not args.no_wait)
                sid, offset = reply.subscription, 0
                print(f"subscription {sid}", file=sys.stderr)
                print(reply.description, file=sys.stderr, flush=True)
            written = 0
            root = None
            last = time.monotonic()
            closed = False
            while args.count is None or written < args.count:
                reply = client.read(sid, offset, max_items=1000, wait_ms=500)
                if reply.dropped:
                    print(f"warning: {reply.dropped} result item(s) were dropped by the retention "
                          "bound before they were read", file=sys.stderr)
                if root is None:
                    root = reply.root or "results"
                    sys.stdout.write(f"<{root}>")
                items = list(reply.items)
                if args.count is not None:
                    items = items[: args.count - written]
                for item in items:
                    sys.stdout.write(item)
                sys.stdout.flush()
                written += len(items)
                offset = reply.offset + len(items)
                if items:
                    last = time.monotonic()
                    _offset_file(sid).parent.mkdir(exist_ok=True)
                    _offset_file(sid).write_text(str(offset))
                if reply.closed and len(items) == len(reply.items):
                    closed = True
                    break
                if args.timeout is not None and time.monotonic() - last >= args.timeout:
                    break
            sys.stdout.write(f"</{root or 'results'}>\n")
            why = "the stream closed" if closed else (
                "count reached" if args.count is not None and written >= args.count else "timeout")
            print(f"{written} result item(s); stopped: {why}; resume with --resume {sid}",
                  file=sys.stderr)
    except ThinPeerError as exc:
        raise _thin_error(exc) from None
    return EXIT_OK


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            removed = client.unsubscribe(args.subscription)
    except ThinPeerError as exc:
        raise _thin_error(exc) from None
    print(json.dumps({"unsubscribed": args.subscription, "removed_streams": removed}))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            print(json.dumps(client.status(), indent=2))
    except ThinPeerError as exc:
        raise _thin_error(exc) from None
    return EXIT_OK


def cmd_network_up(args: argparse.Namespace) -> int:
    from thinpeer.topologies import topology_path

    # The daemons read the topology file while they run, so the file stays valid until they stop.
    with topology_path(args.topology) as path:
        return _run_network(args, path)


def _run_network(args: argparse.Namespace, topology: Path) -> int:
    import signal
    import threading

    from sharing.backbone import TopologyError
    from thinpeer.network import NetworkError, up

    try:
        network = up(topology, args.executor, args.state_dir, spark=_spark_options(args),
                     progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (NetworkError, TopologyError) as exc:
        raise _CliError(f"error: {exc}") from None
    for peer, address in network.addresses.items():
        print(f"{peer} {address}", flush=True)
    print("network up; Ctrl-C or 'streamglobe network down' stops it", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        dead = [p for p, proc in network.processes.items() if proc.poll() is not None]
        if dead:
            print(f"warning: super-peer(s) {', '.join(dead)} exited; see {args.state_dir}/<id>.log",
                  file=sys.stderr, flush=True)
            for p in dead:
                network.processes.pop(p)
    network.stop()
    print("network stopped", file=sys.stderr)
    return EXIT_OK


def cmd_network_down(args: argparse.Namespace) -> int:
    from thinpeer.network import NetworkError, down

    try:
        stopped = down(args.state_dir)
    except NetworkError as exc:
        raise _CliError(f"error: {exc}") from None
    print(f"stopped {', '.join(stopped) or 'nothing (already gone)'}", file=sys.stderr)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from thinpeer.demo import run_demo

    return run_demo(photons=args.photons, executor=args.executor, spark=_spark_options(args))


# ----------------------------------------------------------------------------- parser


def _add_executor_options(p: argparse.ArgumentParser, checkpoint: bool = False) -> None:
    p.add_argument("--executor", choices=["inline", "spark"], default="inline",
                   help="where operators run: in the daemon (inline) or on Spark Structured Streaming")
    p.add_argument("--spark-master", metavar="URL",
                   help="Spark master for --executor spark (default local[2]; a cluster URL scales out)")
    p.add_argument("--trigger-ms", type=int, metavar="MS",
                   help="micro-batch trigger interval of the Spark executor (default 100)")
    p.add_argument("--lateness", type=float, metavar="UNITS",
                   help="how far (in reference units) items may arrive out of order in time windows "
                        "before they are dropped and counted (default 0)")
    if checkpoint:
        p.add_argument("--checkpoint-dir", metavar="DIR",
                       help="Spark executor checkpoint; restarting with the same directory resumes "
                            "exactly once (default: a temporary directory, removed at exit)")


def _spark_options(args: argparse.Namespace) -> dict:
    return {"master": args.spark_master, "trigger_ms": args.trigger_ms, "lateness": args.lateness,
            "checkpoint_dir": getattr(args, "checkpoint_dir", None)}



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamglobe",
        description="StreamGlobe: share continuous WXQuery subscriptions over XML data streams.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    query = commands.add_parser("query", help="check, explain and run WXQuery subscriptions")
    query_commands = query.add_subparsers(dest="query_command", metavar="ACTION", required=True)
    p = query_commands.add_parser("check", help="check a query; prints ok or FILE:LINE:COL: error")
    p.add_argument("file", help="the WXQuery file ('-' for standard input)")
    p.set_defaults(func=cmd_query_check)
    p = query_commands.add_parser("explain", help="print the query's properties as JSON")
    p.add_argument("file")
    p.set_defaults(func=cmd_query_explain)
    p = query_commands.add_parser("run", help="evaluate a query over a finite stream document")
    p.add_argument("file")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]DOC.xml",
                   help="the stream document ('-' for stdin); NAME=DOC per stream when the query "
                        "reads several streams")
    p.add_argument("--lateness", type=float, default=0.0, metavar="UNITS",
                   help="how far (in reference units) items may arrive out of order in time "
                        "windows before they are dropped and counted (default 0)")
    p.set_defaults(func=cmd_query_run)

    p = query_commands.add_parser("match", help="can a stream produced for OLD serve NEW? (JSON)")
    p.add_argument("old", nargs="?", help="the query whose stream exists")
    p.add_argument("new", nargs="?", help="the new query")
    p.add_argument("--batch", metavar="FILE.jsonl",
                   help='lines {"old": "<query text>", "new": "<query text>"}; one JSON answer '
                        "per line, in order ('-' for stdin)")
    p.set_defaults(func=cmd_query_match)

    p = commands.add_parser("simulate", help="simulate the paper's evaluation in process")
    p.add_argument("scenario", help="paper-example, paper-grid, paper-grid-constrained or random")
    p.add_argument("--peers", type=int, help="random topology: number of super-peers")
    p.add_argument("--queries", type=int, help="random topology: number of subscriptions")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--photons", type=int, default=20000, help="photons pushed per stream")
    p.add_argument("--strategies", default="sharing,data-shipping,query-shipping")
    p.add_argument("--no-verify", action="store_true",
                   help="skip comparing delivered results with the reference evaluator")
    p.add_argument("--out", metavar="DIR", help="write report.json and PNG plots here")
    p.set_defaults(func=cmd_simulate)

    sp = commands.add_parser("superpeer", help="run a super-peer daemon")
    sp_commands = sp.add_subparsers(dest="superpeer_command", metavar="ACTION", required=True)
    p = sp_commands.add_parser("serve", help="serve one super-peer of a topology")
    p.add_argument("--topology", required=True,
                   help="a topology TOML file, or a shipped one by name (paper-example, grid-4x4)")
    p.add_argument("--id", required=True, help="this super-peer's id in the topology")
    p.add_argument("--port", type=int, help="listen port (default: the topology's)")
    _add_executor_options(p, checkpoint=True)
    p.add_argument("--retention", type=int, default=500_000,
                   help="result items kept per subscription for disconnected readers")
    p.set_defaults(func=cmd_superpeer_serve)

    p = commands.add_parser("publish", help="register a stream at a super-peer and publish it")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--stream", required=True)
    p.add_argument("--input", metavar="DOC.xml", help="stream document ('-' for stdin)")
    p.add_argument("--synthetic", action="store_true", help="generated photons")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=float, help="items per second (default: as fast as possible)")
    p.add_argument("--count", type=int, help="publish at most N items")
    p.set_defaults(func=cmd_publish)

    p = commands.add_parser("subscribe", help="register a subscription and print its results")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--query", metavar="FILE")
    p.add_argument("--count", type=int, help="stop after N result items")
    p.add_argument("--timeout", type=float, help="stop after S seconds without results")
    p.add_argument("--resume", metavar="ID", help="resume reading a subscription")
    p.add_argument("--offset", type=int, help="with --resume: the offset to read from")
    p.add_argument("--strategy", default="sharing", choices=["sharing", "data-shipping", "query-shipping"])
    p.add_argument("--no-wait", action="store_true",
                   help="fail if a stream the query reads is not registered yet (default: wait for it)")
    p.set_defaults(func=cmd_subscribe)

    p = commands.add_parser("unsubscribe", help="remove a subscription")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("subscription")
    p.set_defaults(func=cmd_unsubscribe)

    p = commands.add_parser("status", help="a super-peer's streams, operators, routes, traffic (JSON)")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.set_defaults(func=cmd_status)

    net = commands.add_parser("network", help="run a local network of super-peer processes")
    net_commands = net.add_subparsers(dest="network_command", metavar="ACTION", required=True)
    p = net_commands.add_parser("up", help="start every super-peer of a topology, wait until healthy")
    p.add_argument("--topology", required=True,
                   help="a topology TOML file, or a shipped one by name (paper-example, grid-4x4)")
    _add_executor_options(p)
    p.add_argument("--state-dir", default=".streamglobe")
    p.set_defaults(func=cmd_network_up)
    p = net_commands.add_parser("down", help="stop the network started by 'network up'")
    p.add_argument("--state-dir", default=".streamglobe")
    p.set_defaults(func=cmd_network_down)

    p = commands.add_parser("demo", help="the paper's example network, live: plans, results, traffic")
    p.add_argument("--photons", type=int, default=6000)
    _add_executor_options(p)
    p.set_defaults(func=cmd_demo)

    photons = commands.add_parser("photons", help="produce photon stream documents")
    photon_commands = photons.add_subparsers(dest="photons_command", metavar="ACTION",
                                             required=True)
    p = photon_commands.add_parser("generate", help="seeded synthetic photons on stdout")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=float, default=10.0, help="mean photons per second (default 10)")
    p.add_argument("--start-time", type=float, default=0.0, help="det_time origin in seconds")
    p.set_defaults(func=cmd_photons_generate)
    p = photon_commands.add_parser("from-fits", help="convert a FITS X-ray event list")
    p.add_argument("file")
    p.add_argument("--limit", type=int, default=None, help="convert at most N events (by time)")
    p.set_defaults(func=cmd_photons_from_fits)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except _CliError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); that is not an error of ours.
        try:
            sys.stdout = open("/dev/null", "w")
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
