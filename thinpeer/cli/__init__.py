"""The ``streamglobe`` command line: one console script, one subcommand per user task.

Each subcommand is a thin shell over the library: it reads files, calls one function, and turns
typed errors into ``FILE:LINE:COL: error: …`` lines and non-zero exit codes. No traceback
reaches a user for bad input.

One module per command group: ``query`` (check, explain, run, match), ``simulate`` (with its
tables; ``plots`` draws the figures), ``network`` (network up and the launcher verbs for
processes, demo), ``deploy`` (the same for containers, with build, bandwidth and simulate),
``launchers`` (the verbs both share), ``keys`` (certs, tokens), ``pubsub`` (publish, subscribe,
unsubscribe, status), ``photon_commands`` (generate, from-fits), ``archive``, ``ui``; ``app``
assembles the parser, runs a command, and hands ``superpeer …`` to the super-peer's own command
(``superpeer.command``), imported only then. The console script is
``streamglobe = "thinpeer.cli:main"``.
"""

from thinpeer.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
