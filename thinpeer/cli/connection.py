"""How a thin-peer command reaches its super-peer: the address, the CA and the token."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from thinpeer.cli.command import CliError

SUPERPEER_ENV = "STREAMGLOBE_SUPERPEER"  # for scripts and shells that talk to one super-peer

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient


def _client(args: argparse.Namespace) -> SuperPeerClient:
    from thinpeer.client import SuperPeerClient
    from thinpeer.credentials import Credentials, CredentialsError

    address = superpeer_address(args)
    try:
        return SuperPeerClient(address, credentials=Credentials.resolve(args.ca, args.token))
    except CredentialsError as exc:
        raise CliError(f"error: {exc}") from None


def superpeer_address(args: argparse.Namespace) -> str:
    """``--superpeer``, else ``$STREAMGLOBE_SUPERPEER`` (kept in ``args``: what the command says
    it talks to)."""
    address = args.superpeer or os.environ.get(SUPERPEER_ENV, "").strip()
    if not address:
        raise CliError(f"error: give --superpeer HOST:PORT (or set {SUPERPEER_ENV}): the super-peer to talk to")
    args.superpeer = address
    return address


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """Where the super-peer is, and how to prove who we are (``thinpeer.credentials``)."""
    p.add_argument("--superpeer", metavar="HOST:PORT",
                   help=f"the super-peer to talk to (default ${SUPERPEER_ENV})")
    p.add_argument("--ca", metavar="FILE",
                   help="the backbone's CA certificate (default $STREAMGLOBE_CA; neither: plaintext, "
                        "for a network started with --insecure)")
    p.add_argument("--token", metavar="TOKEN",
                   help="your token, or @FILE (default $STREAMGLOBE_TOKEN; streamglobe token issue)")
