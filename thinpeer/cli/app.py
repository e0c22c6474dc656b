"""The ``streamglobe`` parser, assembled from the command modules, and ``main``.

``main`` is the one place where a ``CliError`` becomes a message and an exit code, and where a
closed pipe or Ctrl-C ends a command without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from thinpeer.cli import archive, connect, deploy, keys, network, photon_commands, publish, pubsub, query, simulate, ui
from thinpeer.cli.command import EXIT_CODES, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, AddCommand, CliError
from thinpeer.cli.extras import missing_extra


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamglobe",
        description="StreamGlobe: share continuous WXQuery subscriptions over XML data streams.",
        epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # The order here is the order of `streamglobe --help`.
    query.register(commands.add_parser)
    simulate.register(commands.add_parser)
    register_superpeer(commands.add_parser)
    publish.register(commands.add_parser)
    pubsub.register(commands.add_parser)
    connect.register(commands.add_parser)
    network.register_network_and_demo(commands.add_parser)
    photon_commands.register(commands.add_parser)
    deploy.register(commands.add_parser)
    keys.register(commands.add_parser)
    archive.register(commands.add_parser)
    ui.register(commands.add_parser)
    return parser


def version() -> str:
    """The installed package's version (what ``pip`` installed), or the checkout's."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("streamglobe")
    except PackageNotFoundError:
        return "(not installed)"


def register_superpeer(add_command: AddCommand) -> None:
    """``superpeer …`` is the super-peer's own command (``superpeer.command``), imported only
    when it runs: here it is listed, and its arguments handed on whole."""
    p = add_command("superpeer", add_help=False, help="run a super-peer daemon (superpeer serve --help)")
    p.add_argument("arguments", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: run_superpeer(args.arguments))


def run_superpeer(arguments: Sequence[str]) -> int:
    from superpeer.command import main as superpeer_main
    from thinpeer.ops.topologies import topology_path

    return superpeer_main(list(arguments), "streamglobe superpeer", topology_path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["superpeer"]:  # (its options would not pass the parser of the other commands)
            return run_superpeer(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_ERROR
    except ModuleNotFoundError as exc:  # (an extra of the install that is not there: which one)
        said = missing_extra(exc)
        if said is None:
            raise
        print(said, file=sys.stderr)
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
        return EXIT_INTERRUPTED
