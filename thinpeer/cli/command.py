"""What every command module shares: the error it raises, the exit codes, how it registers."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the client pulls in grpc, which commands that never connect should not pay for
    from thinpeer.client import ThinPeerError

# Exit codes, the same for every command (``streamglobe --help`` lists them):
EXIT_OK = 0  # done
EXIT_ERROR = 1  # an error, said on stderr (a refusal, an unreachable super-peer, items rejected)
EXIT_USAGE = 2  # the command line itself was wrong (argparse's)
EXIT_TIMEOUT = 3  # `subscribe --timeout`: the time passed without a single result
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)
EXIT_CODES = ("exit codes: 0 done; 1 error (said on stderr); 2 usage; 3 subscribe --timeout passed "
              "without a result; 130 interrupted")

# Each command module has ``register(add_command)``, called with the ``add_parser`` of the
# top-level subcommands (or of a group), so that its flags sit next to its handlers.
AddCommand = Callable[..., argparse.ArgumentParser]


class CliError(Exception):
    """A message for stderr; the command exits non-zero."""


def thin_error(exc: ThinPeerError) -> CliError:
    """A super-peer's refusal as the user sees it: ``error: CODE: message``."""
    return CliError(f"error: {exc.code}: {exc.message}")
