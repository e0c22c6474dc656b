"""What every command module shares: the error it raises, the exit codes, how it registers."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # the client pulls in grpc, which commands that never connect should not pay for
    from thinpeer.client import ThinPeerError

EXIT_OK = 0
EXIT_ERROR = 1

# Each command module has ``register(add_command)``, called with the ``add_parser`` of the
# top-level subcommands (or of a group), so that its flags sit next to its handlers.
AddCommand = Callable[..., argparse.ArgumentParser]


class CliError(Exception):
    """A message for stderr; the command exits non-zero."""


def thin_error(exc: ThinPeerError) -> CliError:
    """A super-peer's refusal as the user sees it: ``error: CODE: message``."""
    return CliError(f"error: {exc.code}: {exc.message}")
