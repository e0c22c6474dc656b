"""``streamglobe certs init`` and ``streamglobe token issue``: a backbone's keys and its users'
tokens (``thinpeer.ops.certs``, ``thinpeer.ops.tokens``; README "Security")."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from thinpeer.cli.command import EXIT_OK, AddCommand, CliError

KEYS_ENV = "STREAMGLOBE_KEYS"
DEFAULT_KEYS = ".streamglobe/tls"  # where ``network up`` (default state directory) keeps them


def cmd_certs_init(args: argparse.Namespace) -> int:
    from sharing.backbone import TopologyError
    from superpeer.topology import load_topology
    from thinpeer.ops.certs import init_backbone, topology_hosts
    from thinpeer.ops.topologies import topology_path

    try:
        with topology_path(args.topology) as path:
            topology = load_topology(path)
    except TopologyError as exc:
        raise CliError(f"error: {exc}") from None
    hosts = {p: names + list(args.host or []) for p, names in topology_hosts(topology).items()}
    try:
        out = init_backbone(args.out, hosts)
    except OSError as exc:
        raise CliError(f"error: cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"{out}: ca.pem, ca.key (keep it offline), token.key, token.pub and a key and certificate "
          f"for each of {', '.join(hosts)}", file=sys.stderr)
    print(f"serve each with: streamglobe superpeer serve --tls-dir {out} …", file=sys.stderr)
    return EXIT_OK


def cmd_token_issue(args: argparse.Namespace) -> int:
    from thinpeer.ops.tokens import TokenError, issue_token, parse_duration

    keys = args.keys or os.environ.get(KEYS_ENV) or DEFAULT_KEYS
    try:
        expires = None if args.expires in ("never", "0") else parse_duration(args.expires)
        token = issue_token(keys, args.user, args.publish or [], args.subscribe, args.admin, expires)
    except TokenError as exc:
        raise CliError(f"error: {exc}") from None
    print(token)
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    certs = add_command("certs", help="a backbone's certificate authority and super-peer certificates")
    actions = certs.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    p = actions.add_parser("init", help="create a CA, a key and certificate per super-peer, and the token key")
    p.add_argument("--topology", required=True, help="a topology TOML file, or a shipped one by name")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="the backbone directory to write")
    p.add_argument("--host", action="append", metavar="NAME",
                   help="another host name or address every super-peer is reached at (repeatable)")
    p.set_defaults(func=cmd_certs_init)

    token = add_command("token", help="tokens for thin peers (users)")
    actions = token.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    p = actions.add_parser("issue", help="print a signed token for a user")
    p.add_argument("--user", required=True, metavar="NAME")
    p.add_argument("--publish", nargs="+", metavar="STREAM",
                   help="stream names the user may register and publish ('*': any)")
    p.add_argument("--subscribe", action="store_true", help="the user may subscribe")
    p.add_argument("--admin", action="store_true",
                   help="the user may do everything, and sees every subscription in status")
    p.add_argument("--expires", default="30d", metavar="DURATION",
                   help="e.g. 12h, 30d, 2w, or never (default %(default)s)")
    p.add_argument("--keys", metavar="DIR",
                   help=f"the backbone directory with token.key (default ${KEYS_ENV}, else {DEFAULT_KEYS}, "
                        "which 'network up' writes)")
    p.set_defaults(func=cmd_token_issue)
