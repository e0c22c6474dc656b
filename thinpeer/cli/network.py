"""``streamglobe network …`` and ``demo``: networks of super-peer processes on this host.

``network`` has the verbs of every launcher (``thinpeer.cli.launchers``: ``down``, ``status``,
``kill``, ``start``, ``cut``, ``restore``, ``credentials``, as ``deploy`` has them) and its own
``up``, which stays in the foreground: Ctrl-C (or ``network down`` from another terminal) stops
the network. The daemons take ``superpeer serve``'s executor options (``superpeer.options``),
and its re-optimisation flags when given other than their defaults (``given_reoptimisation_flags``).
``--topology`` takes a file or a shipped topology name (``thinpeer.ops.topologies``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from thinpeer.cli.command import EXIT_OK, AddCommand, CliError
from thinpeer.cli.launchers import access_json, add_verbs, given_reoptimisation_flags, guard, progress, say_up
from thinpeer.cli.offsets import state_dir
from thinpeer.cli.ui import add_ui_port_option

# one local network per user by default, in the user's state directory
DEFAULT = "$STREAMGLOBE_STATE_DIR/network, else ~/.local/state/streamglobe/network"


def launcher(args: argparse.Namespace):
    from thinpeer.ops.processes import ProcessLauncher

    return ProcessLauncher(network_dir(args))


def network_dir(args: argparse.Namespace) -> Path:
    """``--state-dir``, else the user's own (never the working directory: it holds the backbone's
    private keys). Kept in ``args``: what the command says."""
    if not args.state_dir:
        args.state_dir = str(state_dir() / "network")
    return Path(args.state_dir)


def cmd_network_up(args: argparse.Namespace) -> int:
    from thinpeer.ops.topologies import topology_path

    # The daemons read the topology file while they run, so the file stays valid until they stop.
    with topology_path(args.topology) as path:
        return _run_network(args, path)


def _run_network(args: argparse.Namespace, topology: Path) -> int:
    import signal
    import threading

    network_dir(args)

    from sharing.backbone import TopologyError
    from superpeer.history.bounds import parse_history
    from superpeer.options import spark_options
    from thinpeer.ops.launcher import UpOptions

    try:
        parse_history(args.history or "")  # (said here, not in every daemon's log)
    except ValueError as exc:
        raise CliError(f"error: --history: {exc}") from None
    past = ((("--history", args.history) if args.history else ())
            + (("--archive", str(Path(args.archive).resolve())) if args.archive else ())
            + (("--replay-rate", str(args.replay_rate)) if args.replay_rate else ())
            + tuple(given_reoptimisation_flags(args))
            + (("--config", str(Path(args.config).resolve())) if args.config else ()))
    processes = launcher(args)
    options = UpOptions(args.executor, spark_options(args), past, not args.insecure, args.tls_dir)
    try:
        access = guard(lambda: processes.up(topology, options, progress))
    except TopologyError as exc:
        raise CliError(f"error: {exc}") from None
    network = processes.running
    # from here on, Ctrl-C (or SIGTERM) stops the network: never a KeyboardInterrupt that leaves it running
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    view = None
    try:
        if args.json:  # (one object a script reads: where each super-peer answers, the admin's files)
            print(json.dumps(access_json(access, str(Path(args.state_dir).resolve()))), flush=True)
        else:
            for peer, address in access.addresses.items():
                print(f"{peer} {address}", flush=True)
        say_up(access, str(Path(args.tls_dir or Path(args.state_dir) / "tls").resolve()))
        if args.ui_port:
            from thinpeer.cli.ui import start_in_background

            view = start_in_background(next(iter(network.addresses.values())), network.credentials, args.ui_port)
        progress("network up; Ctrl-C or 'streamglobe network down' stops it")
        while not stop.wait(1.0):
            dead = [p for p, proc in network.processes.items() if proc.poll() is not None]
            if dead:
                progress(f"warning: super-peer(s) {', '.join(dead)} exited; see {args.state_dir}/<id>.log")
                for p in dead:
                    network.processes.pop(p)
    finally:
        if view is not None:
            view.stop()
        network.stop()
    print("network stopped", file=sys.stderr)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    import signal

    from superpeer.options import spark_options
    from thinpeer.ops.demo import run_demo

    def terminated(signum, frame):  # the demo's network is stopped on the way out (finally)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    return run_demo(photons=args.photons, executor=args.executor, spark=spark_options(args),
                    secure=not args.insecure, ui_port=args.ui_port,
                    serve_args=tuple(given_reoptimisation_flags(args)))


def _state_dir(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help=f"the network's state directory, as given to 'network up' (default {DEFAULT})")


def register_network_and_demo(add_command: AddCommand) -> None:
    from superpeer.options import (TOPOLOGY_HELP, add_executor_options, add_replay_rate,
                                   add_reoptimisation_options)

    net = add_command("network", help="run a local network of super-peer processes")
    net_commands = net.add_subparsers(dest="network_command", metavar="ACTION", required=True)
    p = net_commands.add_parser("up", help="start every super-peer of a topology, wait until healthy")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--json", action="store_true",
                   help="once up, one JSON object on stdout: each super-peer's address, the state directory, "
                        "and the admin's CA and token files (instead of a line per super-peer)")
    p.add_argument("--config", type=Path, metavar="FILE.toml",
                   help="settings for every super-peer ('superpeer serve --config'): what the launcher sets "
                        "itself (topology, id, ports, state directory, TLS) stays the launcher's")
    add_executor_options(p)
    p.add_argument("--state-dir",
                   help="daemons' logs and state; the backbone's keys (tls/) and an admin token (admin.token) "
                        f"(default {DEFAULT})")
    p.add_argument("--insecure", action="store_true",
                   help="plaintext and no tokens (default: TLS between everyone, mutual between "
                        "super-peers, and tokens for thin peers)")
    p.add_argument("--tls-dir", type=Path, metavar="DIR",
                   help="the backbone's keys from 'streamglobe certs init' (default: made in "
                        "<state-dir>/tls)")
    p.add_argument("--history", metavar="BOUND", help="every super-peer's serve --history (default: everything)")
    add_replay_rate(p)
    add_reoptimisation_options(p)
    p.add_argument("--archive", metavar="DIR",
                   help="every super-peer archives the streams registered there under DIR (serve --archive)")
    add_ui_port_option(p)
    p.set_defaults(func=cmd_network_up)
    add_verbs(net_commands, launcher, _state_dir, "processes")

    p = add_command("demo", help="the paper's example network, live: plans, results, traffic")
    p.add_argument("--photons", type=int, default=6000)
    p.add_argument("--insecure", action="store_true", help="plaintext and no tokens (default: secure)")
    add_executor_options(p)
    add_reoptimisation_options(p)
    add_ui_port_option(p)
    p.set_defaults(func=cmd_demo)
