"""The ``streamglobe`` command line: one console script, one subcommand per user task.

Each subcommand is a thin shell over the library: it reads files, calls one function, and turns
typed errors into ``FILE:LINE:COL: error: …`` lines and non-zero exit codes. No traceback
reaches a user for bad input.

One module per command group: ``query`` (check, explain, run, match), ``simulate`` (with its
tables; ``plots`` draws the figures), ``daemons`` (superpeer serve, network up/down, demo),
``pubsub`` (publish, subscribe, unsubscribe, status), ``photon_commands`` (generate, from-fits);
``app`` assembles the parser and runs a command. The console script is
``streamglobe = "thinpeer.cli:main"``.
"""

from thinpeer.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
