"""The verbs ``streamglobe network`` (processes) and ``streamglobe deploy`` (containers) share,
with the same arguments for both: ``down``, ``status``, ``kill SP``, ``start SP``, ``cut SP SP``,
``restore SP SP`` and ``credentials``, each on a ``thinpeer.ops.launcher.Launcher`` that the group
makes from its state options (``--state-dir``; ``deploy`` also ``--project``). ``up`` differs in
its options (a foreground process launcher; containers with images, subnets and Spark
clusters), so each group registers its own, and prints what ``say_up`` says; the
re-optimisation flags a launcher hands on to its daemons are ``given_reoptimisation_flags``.

Messages go to stderr, JSON (``status``) and the exports (``credentials``) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from thinpeer.cli.command import EXIT_OK, CliError

if TYPE_CHECKING:
    from thinpeer.ops.launcher import Access, Launcher

    MakeLauncher = Callable[[argparse.Namespace], Launcher]
StateOptions = Callable[[argparse.ArgumentParser], None]
VERBS = {
    "down": "stop and remove every super-peer of the network",
    "status": "each super-peer's state and health (and each link's, where links are enforced) as JSON",
    "kill": "kill one super-peer (SIGKILL: a crash)",
    "start": "start a killed super-peer again on its state and wait until it answers",
    "cut": "the link between two super-peers drops all traffic, both ways",
    "restore": "undo a cut",
    "credentials": "print the export line that makes this shell the network's admin",
}


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def guard(action: Callable):
    """Run a launcher's action; its failure becomes one clear error line, not a traceback."""
    from thinpeer.ops.launcher import LaunchError

    try:
        return action()
    except LaunchError as exc:
        raise CliError(f"error: {exc}") from None


def add_verbs(commands, make: MakeLauncher, state_options: StateOptions, what: str) -> None:
    """Register the shared verbs under a group's ``add_subparsers``; ``what``: the group's
    network, for the help (``processes``, ``containers``)."""
    for verb, help in VERBS.items():
        p = commands.add_parser(verb, help=f"{help} ({what})")
        if verb in ("kill", "start"):
            p.add_argument("peer", metavar="SP")
        if verb in ("cut", "restore"):
            p.add_argument("a", metavar="SP")
            p.add_argument("b", metavar="SP")
        state_options(p)
        p.add_argument("--json", action="store_true",
                       help="what was done as one JSON object on stdout (status is JSON either way)")
        p.set_defaults(func=run_verb, make_launcher=make, verb=verb)


def run_verb(args: argparse.Namespace) -> int:
    launcher = args.make_launcher(args)
    verbs: dict[str, Callable[[], object]] = {
        "down": launcher.down, "status": launcher.status,
        "kill": lambda: launcher.kill(args.peer), "start": lambda: launcher.start(args.peer, progress),
        "cut": lambda: launcher.cut(args.a, args.b), "restore": lambda: launcher.restore(args.a, args.b),
        "credentials": lambda: launcher.access().exports(),
    }
    done = guard(verbs[args.verb])
    if args.verb == "status":
        print(json.dumps(done, indent=2))
    elif args.json:
        said: dict[str, object] = {"verb": args.verb}
        said.update({"peer": args.peer} if args.verb in ("kill", "start") else
                    {"link": [args.a, args.b]} if args.verb in ("cut", "restore") else {})
        if args.verb == "credentials":
            said.update(access_json(launcher.access()), exports=done)
        else:
            said["said"] = str(done)
        print(json.dumps(said), flush=True)
    elif args.verb == "credentials":
        print(done)
    else:
        progress(str(done))
    return EXIT_OK


def access_json(access: Access, state_dir: str | None = None) -> dict:
    """What ``up --json`` and ``credentials --json`` tell a script: where each super-peer
    answers and the admin's files (None: an insecure network)."""
    return {"superpeers": access.addresses, **({"state_dir": state_dir} if state_dir else {}),
            "secure": access.ca is not None,
            "ca": None if access.ca is None else str(access.ca.resolve()),
            "token_file": None if access.token is None else str(access.token.resolve())}


def given_reoptimisation_flags(args: argparse.Namespace) -> list[str]:
    """``superpeer serve``'s re-optimisation flags (``add_reoptimisation_options``) for every
    daemon a launcher starts, but only when the user gave one a value other than its default:
    re-optimisation lands in parts (issue 31), and a daemon that does not know the flags yet must
    still start for everyone who never used them. The defaults are the parser's own, so a
    changed default needs no change here."""
    from superpeer.options import add_reoptimisation_options, reoptimisation_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_reoptimisation_options(parser)
    defaults = vars(parser.parse_args([]))
    if all(getattr(args, option, default) == default for option, default in defaults.items()):
        return []
    return reoptimisation_flags(args)


def say_up(access: Access, keys: str) -> None:
    """On stderr, after ``up``: how to talk to the network as its admin (or that it is insecure);
    ``keys``: the backbone directory other users' tokens are issued from."""
    if access.ca is not None:
        progress(f"secure: TLS and tokens. As its admin:\n  {access.exports()}\n"
                 f"other users: streamglobe token issue --keys {keys} --user NAME [--publish STREAM…] "
                 "[--subscribe]")
    else:
        progress("INSECURE: plaintext, no tokens; anyone who reaches the ports may do anything")
