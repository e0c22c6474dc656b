"""``streamglobe deploy …``: the network in containers (one per super-peer), links shaped to their
bandwidths, and faults on demand. Progress goes to stderr; ``up`` prints the host addresses as
one JSON object on stdout, so that ``publish``/``subscribe``/``status`` work against them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from streamglobe.units import parse_bitrate, parse_duration, parse_milliseconds
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError
from thinpeer.cli.launchers import access_json, add_verbs, guard, progress, say_up
from thinpeer.cli.offsets import state_dir
from thinpeer.cli.ui import add_ui_port_option


def launcher(args: argparse.Namespace):
    from thinpeer.ops.containers.project import ContainerLauncher

    if not args.state_dir:  # (the user's own, never the working directory: it holds private keys)
        args.state_dir = str(state_dir() / "deploy")
    return ContainerLauncher(Path(args.state_dir), args.project, getattr(args, "subnet", None),
                             getattr(args, "spark_cluster", 0))


def cmd_build(args: argparse.Namespace) -> int:
    from thinpeer.ops.containers.images import build_images

    image = guard(lambda: build_images(progress))
    print(image)
    return EXIT_OK


def use_settings(config: Path | None, directory: Path) -> None:
    """``--config``: checked here as ``superpeer serve`` reads it (an error before any container
    starts), then kept in the deployment's directory, which every super-peer's container mounts;
    without it, an earlier ``up``'s file is removed."""
    from thinpeer.ops.containers.compose import SETTINGS_FILE

    kept = directory / SETTINGS_FILE
    if config is None:
        kept.unlink(missing_ok=True)
        return
    from superpeer.command import add_serve_arguments
    from superpeer.config import ConfigError, configure

    serve = argparse.ArgumentParser(prog="superpeer serve")
    add_serve_arguments(serve)
    try:
        configure(serve, ["--config", str(config), "--topology", "-", "--id", "-"], environ={})
    except ConfigError as exc:
        raise CliError(f"error: {exc}") from None
    directory.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(config.read_bytes())


def cmd_up(args: argparse.Namespace) -> int:
    from thinpeer.ops.launcher import UpOptions
    from thinpeer.ops.topologies import topology_path

    serve: list[str] = []
    if args.lateness is not None:
        serve += ["--lateness", str(args.lateness)]
    if args.trigger_ms is not None:
        serve += ["--trigger-ms", str(args.trigger_ms)]
    if args.heartbeat_s is not None:
        serve += ["--heartbeat-s", str(args.heartbeat_s)]
    if args.heartbeat_misses is not None:
        serve += ["--heartbeat-misses", str(args.heartbeat_misses)]
    from thinpeer.cli.launchers import given_reoptimisation_flags

    serve += given_reoptimisation_flags(args)  # (only those given: an older image need not know them)
    containers = launcher(args)
    use_settings(args.config, containers.directory)
    with topology_path(args.topology) as path:
        if not path.is_file():
            raise CliError(f"error: {args.topology}: no such topology file or shipped topology")
        options = UpOptions(args.executor, serve_args=tuple(serve), secure=not args.insecure, timeout_s=args.timeout)
        access = guard(lambda: containers.up(path, options, progress))
    # (without --json: the addresses alone, as scripts written before --json read them)
    print(json.dumps(access_json(access, str(containers.directory.resolve())) if args.json else access.addresses),
          flush=True)
    say_up(access, str(containers.directory / "tls"))
    if args.ui_port:
        _serve_web_view(args, access)
    return EXIT_OK


def _serve_web_view(args: argparse.Namespace, access) -> None:
    """The containers run on after ``up``; the web view runs here, in the foreground, reaching
    the super-peers at their host addresses, until Ctrl-C (``deploy down`` removes them)."""
    from thinpeer.cli.ui import web_view

    view = web_view(next(iter(access.addresses.values())), access.credentials(), args.ui_port,
                    addresses=access.addresses)
    progress(f"web view: {view.url} (Ctrl-C stops the view; the containers run on)")
    view.run()


def cmd_bandwidth(args: argparse.Namespace) -> int:
    from thinpeer.ops.containers import project

    containers = launcher(args)
    guard(lambda: project.bandwidth(containers.deployment(), args.a, args.b, int(args.rate)))
    return EXIT_OK


def cmd_simulate_live(args: argparse.Namespace) -> int:
    from thinpeer.cli.simulate import choose_scenario, choose_strategies, finish
    from thinpeer.ops.containers.live_simulation import simulate_live

    scenario, strategies = choose_scenario(args), choose_strategies(args)
    report = guard(lambda: simulate_live(scenario, args.photons, strategies, args.executor,
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
    from superpeer.options import TOPOLOGY_HELP

    deploy = add_command("deploy", help="run the network in containers (Docker + docker-compose)")
    commands = deploy.add_subparsers(dest="deploy_command", metavar="ACTION", required=True)

    def state_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--project", default="streamglobe", help="compose project name")
        p.add_argument("--state-dir", help="where the compose project, its topology and the backbone's keys are "
                                             "written (default $STREAMGLOBE_STATE_DIR/deploy, else "
                                             "~/.local/state/streamglobe/deploy)")

    def parser(name: str, help: str) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help)
        state_options(p)
        return p

    p = parser("build", "build the images from nothing (reuses what exists)")
    p.set_defaults(func=cmd_build)
    p = parser("up", "start one container per super-peer; print their host addresses as JSON")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--json", action="store_true",
                   help="once up, one JSON object on stdout as network up --json prints it (the state "
                        "directory, the admin's CA and token files) instead of the addresses alone")
    p.add_argument("--config", type=Path, metavar="FILE.toml",
                   help="settings for every super-peer ('superpeer serve --config'), mounted into each "
                        "container; what deploy sets itself (addresses, state, TLS, executor) stays its own")
    p.add_argument("--executor", choices=["inline", "spark"], default="inline")
    _spark_cluster_option(p)
    p.add_argument("--lateness", type=float, metavar="UNITS")
    p.add_argument("--trigger-ms", type=parse_milliseconds, metavar="MS")
    p.add_argument("--heartbeat-s", type=parse_duration, metavar="DURATION",
                   help="the super-peers' heartbeat interval (superpeer serve's default if not given)")
    p.add_argument("--heartbeat-misses", type=int, metavar="N",
                   help="missed heartbeats before a peer or link is declared down")
    from superpeer.options import add_reoptimisation_options

    add_reoptimisation_options(p)
    p.add_argument("--subnet", help="the containers' network (default: a 10.231-238.x.0/24 chosen "
                                    "by the project name)")
    p.add_argument("--timeout", type=parse_duration, default=240.0, metavar="DURATION",
                   help="how long to wait for health (seconds, or e.g. 5m; default %(default)s)")
    p.add_argument("--insecure", action="store_true",
                   help="plaintext and no tokens (default: TLS, mutual between super-peers, tokens)")
    add_ui_port_option(p)
    p.set_defaults(func=cmd_up)
    add_verbs(commands, launcher, state_options, "containers")
    p = parser("bandwidth", "change a link's bandwidth (bits per second: 10Mbit, 10mbit/s, 100e6; "
                            "or bytes per second: 10MB/s)")
    p.add_argument("a", metavar="SP")
    p.add_argument("b", metavar="SP")
    p.add_argument("rate", metavar="RATE", type=parse_bitrate)
    p.set_defaults(func=cmd_bandwidth)
    from thinpeer.cli.simulate import add_scenario_options

    p = parser("simulate", "the paper's evaluation live in containers: measured vs model, per strategy")
    add_scenario_options(p, photons=5000)
    p.add_argument("--executor", choices=["inline", "spark"], default="inline")
    _spark_cluster_option(p)
    p.set_defaults(func=cmd_simulate_live)
