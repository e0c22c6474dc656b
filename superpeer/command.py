"""``streamglobe superpeer serve``: the super-peer daemon's own command (argument parsing and
start), in the super-peer's package. The ``streamglobe`` CLI hands ``superpeer …`` here and imports
this module only then (``thinpeer.cli.app``); containers and the process launcher run it as
``python -m thinpeer.cli superpeer serve …``.

A ``--topology`` value is read through ``topology_path`` (a file, or a shipped topology by name:
the CLI passes ``thinpeer.ops.topologies.topology_path``), so that this package needs nothing of
the thin peer's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ContextManager

from streamglobe.units import parse_duration, parse_item_rate, parse_size
from superpeer.config import ConfigError, configure, print_config
from superpeer.data.limits import DataLimits
from superpeer.logs import configure_logging
from superpeer.options import (TOPOLOGY_HELP, add_executor_options, add_reoptimisation_options, add_replay_rate,
                               reoptimisation_settings, spark_options)

TopologyPath = Callable[[str], ContextManager[Path]]


class ServeError(Exception):
    """A message for stderr; the command exits 1."""


def main(argv: Sequence[str], prog: str = "streamglobe superpeer",
         topology_path: TopologyPath | None = None) -> int:
    """Run ``superpeer ACTION …``; ``topology_path`` resolves ``--topology`` (default: a file)."""
    argv = list(argv)
    try:
        if argv[:1] == ["serve"]:  # (its settings may come from a file and the environment too)
            serve = argparse.ArgumentParser(prog=f"{prog} serve", description=SERVE_HELP)
            add_serve_arguments(serve)
            args, source = configure(serve, argv[1:], peer_settings=_topology_settings(topology_path))
            if args.print_config:
                print(print_config(args, serve, source), end="")
                return 0
        else:
            args = build_parser(prog).parse_args(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args.topology_path = topology_path or (lambda spec: contextlib.nullcontext(Path(spec)))
    try:
        return args.func(args)
    except ServeError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def _topology_settings(topology_path: TopologyPath | None):
    """How ``configure`` finds a super-peer's own settings in its topology (unreadable: none
    here; ``serve`` then says what is wrong with the topology)."""
    def find(spec: str, peer: str) -> tuple[dict, str]:
        from sharing.backbone import TopologyError
        from superpeer.topology import load_topology

        try:
            with (topology_path or (lambda s: contextlib.nullcontext(Path(s))))(spec) as path:
                found = load_topology(path).settings.get(peer, {})
        except (TopologyError, OSError, ValueError):
            return {}, spec
        return found, f"topology {spec} [[superpeer]] {peer} settings"
    return find


def default_state_dir(peer: str) -> Path:
    """A per-peer directory under the user's state directory (XDG)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "streamglobe" / peer


def cmd_serve(args: argparse.Namespace) -> int:
    # Start-up makes long-lived objects only (modules, tables, the warmed-up executor): no
    # collection while it runs — with eight daemons starting on two cores, gen2 collections of
    # 130–380 ms each — then one, and what is left frozen (``start_superpeer``).
    gc.disable()
    try:
        return _serve(args)
    finally:
        gc.enable()


def _serve(args: argparse.Namespace) -> int:
    from sharing.backbone import TopologyError
    from superpeer.node import NodeError
    from superpeer.rpc.server import limit_malloc_arenas, serve_forever, start_superpeer
    from superpeer.topology import load_topology

    configure_logging(args.id, args.log_level, args.log_format, args.log_file, args.log_max_bytes,
                      args.log_backups)
    limit_malloc_arenas()  # before the daemon's threads start
    from superpeer.history.archive.writer import ArchiveSettings
    from superpeer.history.bounds import parse_history
    from superpeer.recovery.failure_detector import HeartbeatSettings

    try:
        limits = DataLimits(max_item_bytes=args.max_item_bytes, max_read_bytes=args.max_read_bytes,
                            finished_retention_s=args.finished_retention, link_buffer_bytes=args.link_buffer,
                            link_buffer_items=args.link_buffer_items)
        heartbeats = HeartbeatSettings(args.heartbeat_s, args.heartbeat_misses)
        reoptimisation = reoptimisation_settings(args)
        history = parse_history(args.history)
        archive = (ArchiveSettings(Path(args.archive), args.archive_bucket, args.archive_samples)
                   if args.archive else None)
    except ValueError as exc:
        raise ServeError(f"error: {exc}") from None
    from superpeer.security.access import UserQuotas
    from superpeer.security.tls import Security

    try:
        with args.topology_path(args.topology) as path:
            topology = load_topology(path)
        if args.id not in topology.backbone.peers:  # (said before anything else)
            raise ServeError(f"error: {args.id} is not a super-peer of the topology")
        if not args.tls_dir and not args.insecure:
            raise ServeError("error: give --tls-dir DIR (made by 'streamglobe certs init') to serve securely, "
                           "or --insecure for plaintext without tokens (one trusted host only)")
        security = Security.load(args.tls_dir, args.id) if args.tls_dir else None
        state_dir = None if args.in_memory else (args.state_dir or default_state_dir(args.id))
        quotas = UserQuotas(args.max_subscriptions_per_user, args.max_publish_rate_per_user)
        running = start_superpeer(topology, args.id, args.port, args.retention, args.executor,
                                  spark_options(args), limits, listen=args.listen, heartbeats=heartbeats,
                                  state_dir=state_dir, watermark_idle_s=args.watermark_idle_s,
                                  security=security, peer_listen=args.peer_listen, quotas=quotas,
                                  history=history, archive=archive, replay_rate=args.replay_rate,
                                  cut_links=tuple(args.cut_link), reoptimisation=reoptimisation,
                                  widening=args.widening, network_joins=args.network_joins,
                                  metrics_port=args.metrics_port,
                                  metrics_host=args.metrics_host, freeze=True)
    except (TopologyError, NodeError, OSError) as exc:
        raise ServeError(f"error: {getattr(exc, 'message', exc)}") from None
    kept = f"state in {state_dir}" if state_dir else "state in memory only"
    mode = "TLS, tokens" if security else "PLAINTEXT, no tokens (--insecure)"
    metrics = running.node.metrics.address
    print(f"{args.id} serving thin peers on {running.address}, super-peers on {running.peer_address} "
          f"({mode}; {kept}" + (f"; metrics on http://{metrics}/metrics" if metrics else "") + ")",
          file=sys.stderr, flush=True)
    gc.enable()
    serve_forever(running)
    return 0


def build_parser(prog: str = "streamglobe superpeer") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="run a super-peer daemon")
    sp_commands = parser.add_subparsers(dest="superpeer_command", metavar="ACTION", required=True)
    add_serve_arguments(sp_commands.add_parser("serve", help=SERVE_HELP, description=SERVE_HELP))
    return parser


SERVE_HELP = ("serve one super-peer of a topology; every setting is also read from --config FILE.toml "
              "and from STREAMGLOBE_<SETTING> (flag > environment > file > default; --print-config shows them)")


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, metavar="FILE.toml",
                   help="settings from a TOML file: each flag's name without dashes (metrics_port = 9464); "
                        "an unknown key is an error")
    p.add_argument("--print-config", action="store_true",
                   help="print the settings in effect as TOML, each with where it came from, and exit")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    p.add_argument("--id", required=True, help="this super-peer's id in the topology")
    p.add_argument("--port", type=int, help="listen port (default: the topology's)")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="listen address for thin peers, when it differs from the address the topology "
                        "advertises (e.g. 0.0.0.0:50051 in a container)")
    p.add_argument("--peer-listen", metavar="HOST:PORT",
                   help="listen address for the other super-peers, when it differs from the topology's "
                        "peer_address (e.g. 0.0.0.0:50052 in a container)")
    p.add_argument("--tls-dir", type=Path, metavar="DIR",
                   help="the backbone directory ('streamglobe certs init'): TLS for thin peers, who need "
                        "tokens, and mutual TLS between super-peers")
    p.add_argument("--insecure", action="store_true",
                   help="plaintext, no tokens: anyone who reaches the ports may do anything")
    p.add_argument("--max-subscriptions-per-user", type=int, default=1000, metavar="N",
                   help="subscriptions one user may have at this super-peer (default %(default)s)")
    p.add_argument("--max-publish-rate-per-user", type=parse_item_rate, default=0.0, metavar="ITEMS_PER_S",
                   help="items per second one user may publish at this super-peer (default 0: no limit)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics (0: a free port; default: none)")
    p.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                   help="the metrics server's address (default %(default)s; 0.0.0.0 to be scraped from "
                        "elsewhere)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="the least severe log records written to stderr (default %(default)s)")
    p.add_argument("--log-format", default="text", choices=["text", "json"],
                   help="text lines, or one JSON object per record (time, level, peer, logger, message)")
    p.add_argument("--log-file", type=Path, metavar="FILE",
                   help="log to FILE instead of stderr, with everything the process prints; it is rolled "
                        "over at --log-max-bytes, keeping FILE.1 … FILE.N (--log-backups)")
    p.add_argument("--log-max-bytes", type=parse_size, default=16 << 20, metavar="SIZE",
                   help="with --log-file: its size before it is rolled over (default %(default)s bytes)")
    p.add_argument("--log-backups", type=int, default=3, metavar="N",
                   help="with --log-file: rolled-over files kept (default %(default)s)")
    add_executor_options(p, checkpoint=True)
    p.add_argument("--retention", type=int, default=500_000,
                   help="result items kept per subscription for disconnected readers")
    defaults = DataLimits()
    p.add_argument("--max-item-bytes", type=parse_size, default=defaults.max_item_bytes, metavar="SIZE",
                   help="largest item a publisher may send (UTF-8 bytes, e.g. 16MiB, or a number of bytes; "
                        "default %(default)s; at most the gRPC message limit less 1 MiB)")
    p.add_argument("--max-read-bytes", type=parse_size, default=defaults.max_read_bytes, metavar="SIZE",
                   help="bytes of results one read returns (e.g. 4MiB; at least one item; default %(default)s)")
    p.add_argument("--link-buffer", type=parse_size, default=defaults.link_buffer_bytes, metavar="SIZE",
                   help="what one outbound link may hold, queued and unacknowledged, before the batches "
                        "bound for it wait and the pressure goes upstream to the publishers (back-pressure; "
                        "nothing is dropped); default %(default)s bytes")
    p.add_argument("--link-buffer-items", type=int, default=defaults.link_buffer_items, metavar="N",
                   help="the same bound in items (default %(default)s)")
    p.add_argument("--finished-retention", type=parse_duration, default=defaults.finished_retention_s,
                   metavar="DURATION",
                   help="how long an ended subscription keeps results not read to the end (e.g. 10m, "
                        "or seconds; default %(default)s)")
    p.add_argument("--heartbeat-s", type=parse_duration, default=1.0, metavar="DURATION",
                   help="how often this super-peer asks the others how they are (seconds, or e.g. "
                        "500ms; default %(default)s)")
    p.add_argument("--heartbeat-misses", type=int, default=3, metavar="N",
                   help="missed heartbeats in a row before a peer (or the link to it) is declared "
                        "down (default %(default)s)")
    p.add_argument("--history", default="", metavar="BOUND",
                   help="how much of its past each stream registered here keeps on disk for "
                        "subscriptions over it (subscribe --since/--from-start), unless registered "
                        "with its own (publish --history): items ('100000'), a size ('64MB', "
                        "'1GiB'), a duration ('10m', '1h30m'), several with commas ('10m,1GB': whichever keeps "
                        "less); default: everything. Items a running subscription may still replay "
                        "are kept beyond it")
    add_replay_rate(p)
    add_reoptimisation_options(p)
    p.add_argument("--archive", metavar="DIR",
                   help="persist every stream registered here as Parquet under DIR, partitioned by "
                        "event time, for 'streamglobe archive query' and for subscribe --since "
                        "reaching past the history")
    p.add_argument("--archive-bucket", type=float, default=3600.0, metavar="SPAN",
                   help="with --archive: the width of an event-time partition, in the stream's "
                        "event-time units (seconds of arrival for a stream without one; default %(default)s)")
    p.add_argument("--archive-samples", default="hybrid", choices=["eager", "lazy", "hybrid"],
                   help="with --archive: build the 1/2 … 1/64 samples approximate queries read as "
                        "items are archived (eager), by the first query that needs them (lazy), or "
                        "the coarse ones eagerly and the fine ones lazily (hybrid, default)")
    p.add_argument("--watermark-idle-s", type=parse_duration, default=2.0, metavar="DURATION",
                   help="a stream registered here with an event time (publish --event-time) that "
                        "gets no item this long is sent watermarks, so time windows downstream "
                        "close (default %(default)s)")
    p.add_argument("--state-dir", type=Path, metavar="DIR",
                   help="where this super-peer keeps its streams' logs, subscriptions and results "
                        "across restarts (default: $XDG_STATE_HOME/streamglobe/<id>, i.e. "
                        "~/.local/state/streamglobe/<id>); started again on the same directory it "
                        "resumes everything")
    p.add_argument("--in-memory", action="store_true",
                   help="keep nothing across a restart (no state directory)")
    p.add_argument("--cut-link", action="append", default=[], metavar="PEER",
                   help="start with the link to this neighbour cut (fault injection; 'streamglobe network "
                        "cut' passes it to a daemon it starts again); may be repeated")
    p.set_defaults(func=cmd_serve)


