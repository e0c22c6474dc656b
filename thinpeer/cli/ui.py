"""``streamglobe ui``: the live web view of a network, from any one of its super-peers; and the
``--ui-port`` that ``network up``, ``deploy up`` and ``demo`` share."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import TYPE_CHECKING

from streamglobe.units import parse_duration
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError
from thinpeer.cli.connection import add_connection_options, superpeer_address

if TYPE_CHECKING:
    from thinpeer.credentials import Credentials
    from thinpeer.ops.ui.server import WebView


def add_ui_port_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ui-port", type=int, metavar="PORT",
                   help="also serve the live web view (streamglobe ui) at http://127.0.0.1:PORT/")


def check_port(host: str, port: int) -> None:
    """Refuse a port we cannot listen on before anything starts (uvicorn would only log it)."""
    if not 0 < port < 65536:
        raise CliError(f"error: --port {port}: not a TCP port")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise CliError(f"error: cannot serve the web view at {host}:{port}: {exc.strerror}") from None


def web_view(entry: str, credentials: Credentials, port: int, host: str = "127.0.0.1",
             interval_s: float = 1.0, addresses: dict[str, str] | None = None) -> WebView:
    from thinpeer.ops.ui.collector import Collector
    from thinpeer.ops.ui.server import WebView

    check_port(host, port)
    return WebView(Collector(entry, credentials, interval_s, addresses=addresses), host, port)


def start_in_background(entry: str, credentials: Credentials, port: int,
                        addresses: dict[str, str] | None = None) -> WebView:
    """For the launchers: the view runs beside the network until they stop it."""
    view = web_view(entry, credentials, port, addresses=addresses).start()
    if not view.wait_started():
        view.stop()
        raise CliError(f"error: the web view did not start at port {port}")
    print(f"web view: {view.url}", file=sys.stderr, flush=True)
    return view


def cmd_ui(args: argparse.Namespace) -> int:
    from thinpeer.credentials import Credentials, CredentialsError

    try:
        credentials = Credentials.resolve(args.ca, args.token)
    except CredentialsError as exc:
        raise CliError(f"error: {exc}") from None
    view = web_view(superpeer_address(args), credentials, args.port, args.host, args.interval)
    print(f"web view of the network of {args.superpeer}: {view.url}  (Ctrl-C stops it)",
          file=sys.stderr, flush=True)
    view.run()
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    p = add_command("ui", help="serve a live web view of the network (topology, streams, plans, load)")
    add_connection_options(p)
    p.add_argument("--port", type=int, default=8080, help="HTTP port (default 8080)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen at (default 127.0.0.1: the view shows what your token may see)")
    p.add_argument("--interval", type=parse_duration, default=1.0, metavar="DURATION",
                   help="how often every super-peer's status is read (seconds, or e.g. 500ms; default 1 s)")
    p.set_defaults(func=cmd_ui)
