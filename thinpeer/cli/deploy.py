"""``streamglobe deploy …``: the network in containers (one per super-peer), links shaped to their
bandwidths, and faults on demand. Progress goes to stderr; ``up`` prints the host addresses as
one JSON object on stdout, so that ``publish``/``subscribe``/``status`` work against them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streamglobe.units import parse_bitrate, parse_duration, parse_milliseconds
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError
from thinpeer.cli.ui import add_ui_port_option


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _deployment(args: argparse.Namespace):
    from thinpeer.deploy.compose import Deployment
    from thinpeer.deploy.project import state_directory

    directory = state_directory(Path(args.state_dir), args.project)
    if not (directory / "deployment.json").is_file():
        raise CliError(f"error: no deployment {args.project!r} under {args.state_dir} "
                       "(start one with 'streamglobe deploy up')")
    return Deployment.load(directory)


def _guard(action):
    """Run a deploy action; its failures become one clear error line, not a traceback."""
    from thinpeer.deploy.images import DeployError

    try:
        return action()
    except DeployError as exc:
        raise CliError(f"error: {exc}") from None


def cmd_build(args: argparse.Namespace) -> int:
    from thinpeer.deploy.images import build_images

    image = _guard(lambda: build_images(_progress))
    print(image)
    return EXIT_OK


def cmd_up(args: argparse.Namespace) -> int:
    from thinpeer.deploy.compose import default_subnet
    from thinpeer.deploy.project import up
    from thinpeer.topologies import topology_path

    serve: list[str] = []
    if args.lateness is not None:
        serve += ["--lateness", str(args.lateness)]
    if args.trigger_ms is not None:
        serve += ["--trigger-ms", str(args.trigger_ms)]
    if args.heartbeat_s is not None:
        serve += ["--heartbeat-s", str(args.heartbeat_s)]
    if args.heartbeat_misses is not None:
        serve += ["--heartbeat-misses", str(args.heartbeat_misses)]
    with topology_path(args.topology) as path:
        if not path.is_file():
            raise CliError(f"error: {args.topology}: no such topology file or shipped topology")
        subnet = args.subnet or default_subnet(args.project)
        addresses = _guard(lambda: up(path, Path(args.state_dir), args.project, args.executor, serve,
                                      subnet, _progress, args.timeout, args.spark_cluster,
                                      secure=not args.insecure))
    print(json.dumps(addresses), flush=True)
    state = (Path(args.state_dir) / args.project).resolve()
    if args.insecure:
        _progress("INSECURE: plaintext, no tokens; anyone who reaches the ports may do anything")
    else:
        _progress(f"secure: TLS and tokens. As its admin: export STREAMGLOBE_CA={state}/tls/ca.pem "
                  f"STREAMGLOBE_TOKEN=$(cat {state}/admin.token); other users: streamglobe token issue "
                  f"--keys {state}/tls --user NAME …")
    if args.ui_port:
        _serve_web_view(args, addresses, state)
    return EXIT_OK


def _serve_web_view(args: argparse.Namespace, addresses: dict[str, str], state: Path) -> None:
    """The containers run on after ``up``; the web view runs here, in the foreground, reaching
    the super-peers at their host addresses, until Ctrl-C (``deploy down`` removes them)."""
    from thinpeer.cli.ui import web_view
    from thinpeer.credentials import Credentials

    credentials = (Credentials() if args.insecure else
                   Credentials.resolve(state / "tls" / "ca.pem", (state / "admin.token").read_text().strip()))
    view = web_view(next(iter(addresses.values())), credentials, args.ui_port, addresses=addresses)
    _progress(f"web view: {view.url} (Ctrl-C stops the view; the containers run on)")
    view.run()


def cmd_down(args: argparse.Namespace) -> int:
    from thinpeer.deploy.project import down

    _guard(lambda: down(_deployment(args)))
    _progress(f"removed project {args.project}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from thinpeer.deploy.project import status

    print(json.dumps(_guard(lambda: status(_deployment(args))), indent=2))
    return EXIT_OK


def cmd_fault(args: argparse.Namespace) -> int:
    from thinpeer.deploy import project

    deployment = _deployment(args)
    action = {
        "kill": lambda: project.kill(deployment, args.peer),
        "start": lambda: project.start(deployment, args.peer, _progress),
        "cut": lambda: project.cut(deployment, args.a, args.b),
        "restore": lambda: project.restore(deployment, args.a, args.b),
        "bandwidth": lambda: project.bandwidth(deployment, args.a, args.b, int(args.rate)),
    }[args.deploy_command]
    _guard(action)
    return EXIT_OK


def cmd_simulate_live(args: argparse.Namespace) -> int:
    from thinpeer.cli.simulate import choose_scenario, choose_strategies, finish
    from thinpeer.deploy.live_simulation import simulate_live

    scenario, strategies = choose_scenario(args), choose_strategies(args)
    report = _guard(lambda: simulate_live(scenario, args.photons, strategies, args.executor,
                                          args.project, _live_progress(), args.spark_cluster))
    return finish(report, args.out)


def _live_progress():
    """One status line that rewrites itself (rich), for a run that takes minutes."""
    from rich.console import Console

    console = Console(stderr=True)
    status = console.status("starting")
    status.start()

    def show(message: str) -> None:
        if message.startswith(("sharing: starting", "data-shipping: starting", "query-shipping: starting")):
            console.print(message)
        status.update(message)

    return show


def _spark_cluster_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spark-cluster", type=int, default=0, metavar="WORKERS",
                   help="with --executor spark: a Spark standalone master and WORKERS worker "
                        "containers, on which every super-peer runs its queries (default: none, "
                        "each super-peer runs Spark local[2] in its container)")


def register(add_command: AddCommand) -> None:
    from thinpeer.cli.daemons import TOPOLOGY_HELP

    deploy = add_command("deploy", help="run the network in containers (Docker + docker-compose)")
    commands = deploy.add_subparsers(dest="deploy_command", metavar="ACTION", required=True)

    def parser(name: str, help: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help)
        p.add_argument("--project", default="streamglobe", help="compose project name")
        p.add_argument("--state-dir", default=".streamglobe-deploy",
                       help="where the compose project and its topology are written")
        return p

    p = parser("build", "build the images from nothing (reuses what exists)")
    p.set_defaults(func=cmd_build)
    p = parser("up", "start one container per super-peer; print their host addresses as JSON")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--executor", choices=["inline", "spark"], default="inline")
    _spark_cluster_option(p)
    p.add_argument("--lateness", type=float, metavar="UNITS")
    p.add_argument("--trigger-ms", type=parse_milliseconds, metavar="MS")
    p.add_argument("--heartbeat-s", type=parse_duration, metavar="DURATION",
                   help="the super-peers' heartbeat interval (superpeer serve's default if not given)")
    p.add_argument("--heartbeat-misses", type=int, metavar="N",
                   help="missed heartbeats before a peer or link is declared down")
    p.add_argument("--subnet", help="the containers' network (default: a 10.231-238.x.0/24 chosen "
                                    "by the project name)")
    p.add_argument("--timeout", type=parse_duration, default=240.0, metavar="DURATION",
                   help="how long to wait for health (seconds, or e.g. 5m; default %(default)s)")
    p.add_argument("--insecure", action="store_true",
                   help="plaintext and no tokens (default: TLS, mutual between super-peers, tokens)")
    add_ui_port_option(p)
    p.set_defaults(func=cmd_up)
    p = parser("down", "remove every container and network of the project")
    p.set_defaults(func=cmd_down)
    p = parser("status", "containers, health and the enforced link bandwidths (JSON)")
    p.set_defaults(func=cmd_status)
    for name, help in (("kill", "kill a super-peer's container"), ("start", "start it again")):
        p = parser(name, help)
        p.add_argument("peer", metavar="SP")
        p.set_defaults(func=cmd_fault)
    for name, help in (("cut", "the link drops all traffic"), ("restore", "undo a cut"),
                       ("bandwidth", "change a link's bandwidth (bits per second: 10Mbit, 10mbit/s, "
                                     "100e6; or bytes per second: 10MB/s)")):
        p = parser(name, help)
        p.add_argument("a", metavar="SP")
        p.add_argument("b", metavar="SP")
        if name == "bandwidth":
            p.add_argument("rate", metavar="RATE", type=parse_bitrate)
        p.set_defaults(func=cmd_fault)
    from thinpeer.cli.simulate import add_scenario_options

    p = parser("simulate", "the paper's evaluation live in containers: measured vs model, per strategy")
    add_scenario_options(p, photons=5000)
    p.add_argument("--executor", choices=["inline", "spark"], default="inline")
    _spark_cluster_option(p)
    p.set_defaults(func=cmd_simulate_live)
