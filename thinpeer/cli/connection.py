"""How a thin-peer command reaches its super-peer: the address, the CA and the token."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from thinpeer.cli.command import CliError

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient


def _client(args: argparse.Namespace) -> SuperPeerClient:
    from thinpeer.client import SuperPeerClient
    from thinpeer.credentials import Credentials, CredentialsError

    try:
        return SuperPeerClient(args.superpeer, credentials=Credentials.resolve(args.ca, args.token))
    except CredentialsError as exc:
        raise CliError(f"error: {exc}") from None


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """Where the super-peer is, and how to prove who we are (``thinpeer.credentials``)."""
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--ca", metavar="FILE",
                   help="the backbone's CA certificate (default $STREAMGLOBE_CA; neither: plaintext, "
                        "for a network started with --insecure)")
    p.add_argument("--token", metavar="TOKEN",
                   help="your token, or @FILE (default $STREAMGLOBE_TOKEN; streamglobe token issue)")
