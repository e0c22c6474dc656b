"""``streamglobe superpeer serve``, ``network up|down`` and ``demo``: commands that run daemons.

They share the executor options (``--executor``, ``--spark-master``, ``--trigger-ms``,
``--lateness``), which reach the daemons as ``spark_options``. ``--topology`` takes a file or a
shipped topology name (``thinpeer.topologies``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from streamglobe.units import parse_duration, parse_item_rate, parse_milliseconds, parse_size
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError
from thinpeer.cli.ui import add_ui_port_option


def default_state_dir(peer: str) -> Path:
    """A per-peer directory under the user's state directory (XDG)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "streamglobe" / peer


def cmd_superpeer_serve(args: argparse.Namespace) -> int:
    import logging

    from sharing.backbone import TopologyError
    from superpeer.data.limits import DataLimits
    from superpeer.node import NodeError
    from superpeer.rpc.server import limit_malloc_arenas, serve_forever, start_superpeer
    from superpeer.topology import load_topology
    from thinpeer.topologies import topology_path

    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {args.id} %(levelname)s %(message)s")
    limit_malloc_arenas()  # before the daemon's threads start
    from superpeer.history.archive.writer import ArchiveSettings
    from superpeer.history.bounds import parse_history
    from superpeer.recovery.failure_detector import HeartbeatSettings

    try:
        limits = DataLimits(max_item_bytes=args.max_item_bytes, max_read_bytes=args.max_read_bytes,
                            finished_retention_s=args.finished_retention)
        heartbeats = HeartbeatSettings(args.heartbeat_s, args.heartbeat_misses)
        history = parse_history(args.history)
        archive = (ArchiveSettings(Path(args.archive), args.archive_bucket, args.archive_samples)
                   if args.archive else None)
    except ValueError as exc:
        raise CliError(f"error: {exc}") from None
    from superpeer.security.access import UserQuotas
    from superpeer.security.tls import Security

    try:
        with topology_path(args.topology) as path:
            topology = load_topology(path)
        if args.id not in topology.backbone.peers:  # (said before anything else)
            raise CliError(f"error: {args.id} is not a super-peer of the topology")
        if not args.tls_dir and not args.insecure:
            raise CliError("error: give --tls-dir DIR (made by 'streamglobe certs init') to serve securely, "
                           "or --insecure for plaintext without tokens (one trusted host only)")
        security = Security.load(args.tls_dir, args.id) if args.tls_dir else None
        state_dir = None if args.in_memory else (args.state_dir or default_state_dir(args.id))
        quotas = UserQuotas(args.max_subscriptions_per_user, args.max_publish_rate_per_user)
        running = start_superpeer(topology, args.id, args.port, args.retention, args.executor,
                                  spark_options(args), limits, listen=args.listen, heartbeats=heartbeats,
                                  state_dir=state_dir, watermark_idle_s=args.watermark_idle_s,
                                  security=security, peer_listen=args.peer_listen, quotas=quotas,
                                  history=history, archive=archive, replay_rate=args.replay_rate)
    except (TopologyError, NodeError, OSError) as exc:
        raise CliError(f"error: {getattr(exc, 'message', exc)}") from None
    kept = f"state in {state_dir}" if state_dir else "state in memory only"
    mode = "TLS, tokens" if security else "PLAINTEXT, no tokens (--insecure)"
    print(f"{args.id} serving thin peers on {running.address}, super-peers on {running.peer_address} "
          f"({mode}; {kept})", file=sys.stderr, flush=True)
    serve_forever(running)
    return EXIT_OK


def cmd_network_up(args: argparse.Namespace) -> int:
    from thinpeer.topologies import topology_path

    # The daemons read the topology file while they run, so the file stays valid until they stop.
    with topology_path(args.topology) as path:
        return _run_network(args, path)


def _run_network(args: argparse.Namespace, topology: Path) -> int:
    import signal
    import threading

    from sharing.backbone import TopologyError
    from superpeer.history.bounds import parse_history
    from thinpeer.network import NetworkError, up

    try:
        parse_history(args.history or "")  # (said here, not in every daemon's log)
    except ValueError as exc:
        raise CliError(f"error: --history: {exc}") from None
    try:
        past = ((("--history", args.history) if args.history else ())
                + (("--archive", str(Path(args.archive).resolve())) if args.archive else ())
                + (("--replay-rate", str(args.replay_rate)) if args.replay_rate else ()))
        network = up(topology, args.executor, args.state_dir, spark=spark_options(args),
                     progress=lambda m: print(m, file=sys.stderr, flush=True), secure=not args.insecure,
                     keys=args.tls_dir, serve_args=past)
    except (NetworkError, TopologyError) as exc:
        raise CliError(f"error: {exc}") from None
    # from here on, Ctrl-C (or SIGTERM) stops the network: never a KeyboardInterrupt that leaves it running
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    view = None
    try:
        _say_network_up(args, network)
        if args.ui_port:
            from thinpeer.cli.ui import start_in_background

            view = start_in_background(next(iter(network.addresses.values())), network.credentials, args.ui_port)
        print("network up; Ctrl-C or 'streamglobe network down' stops it", file=sys.stderr, flush=True)
        while not stop.wait(1.0):
            dead = [p for p, proc in network.processes.items() if proc.poll() is not None]
            if dead:
                print(f"warning: super-peer(s) {', '.join(dead)} exited; see {args.state_dir}/<id>.log",
                      file=sys.stderr, flush=True)
                for p in dead:
                    network.processes.pop(p)
    finally:
        if view is not None:
            view.stop()
        network.stop()
    print("network stopped", file=sys.stderr)
    return EXIT_OK


def _say_network_up(args: argparse.Namespace, network) -> None:
    """The addresses on stdout; on stderr, how to talk to the network (secure or not)."""
    for peer, address in network.addresses.items():
        print(f"{peer} {address}", flush=True)
    if network.credentials.secure:
        state = Path(args.state_dir).resolve()
        keys = Path(args.tls_dir or state / "tls").resolve()
        token = f" STREAMGLOBE_TOKEN=$(cat {state}/admin.token)" if network.credentials.token else ""
        print(f"secure: TLS and tokens. As its admin:\n  export STREAMGLOBE_CA={keys}/ca.pem{token}\n"
              f"other users: streamglobe token issue --keys {keys} --user NAME [--publish STREAM…] "
              "[--subscribe]", file=sys.stderr, flush=True)
    else:
        print("INSECURE: plaintext, no tokens; anyone who reaches the ports may do anything",
              file=sys.stderr, flush=True)


def _network_action(action, says) -> int:
    """Run a ``thinpeer.network`` action; its failures are one clear error line."""
    from thinpeer.network import NetworkError

    try:
        done = action()
    except NetworkError as exc:
        raise CliError(f"error: {exc}") from None
    print(says(done), file=sys.stderr)
    return EXIT_OK


def cmd_network_down(args: argparse.Namespace) -> int:
    from thinpeer.network import down

    return _network_action(lambda: down(args.state_dir),
                           lambda stopped: f"stopped {', '.join(stopped) or 'nothing (already gone)'}")


def cmd_network_kill(args: argparse.Namespace) -> int:
    from thinpeer.network import kill_peer

    return _network_action(lambda: kill_peer(args.state_dir, args.peer),
                           lambda pid: f"killed {args.peer} (pid {pid}, SIGKILL)")


def cmd_network_start(args: argparse.Namespace) -> int:
    from thinpeer.network import start_peer

    return _network_action(lambda: start_peer(args.state_dir, args.peer),
                           lambda address: f"{args.peer} serving again at {address}")


def cmd_demo(args: argparse.Namespace) -> int:
    import signal

    from thinpeer.demo import run_demo

    def terminated(signum, frame):  # the demo's network is stopped on the way out (finally)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminated)
    return run_demo(photons=args.photons, executor=args.executor, spark=spark_options(args),
                    secure=not args.insecure, ui_port=args.ui_port)


def add_executor_options(p: argparse.ArgumentParser, checkpoint: bool = False) -> None:
    p.add_argument("--executor", choices=["inline", "spark"], default="inline",
                   help="where operators run: in the daemon (inline) or on Spark (one job per micro-batch)")
    p.add_argument("--spark-master", metavar="URL",
                   help="Spark master for --executor spark (default local[2]; a cluster URL scales out)")
    p.add_argument("--spark-feed-host", metavar="HOST",
                   help="the address Spark's workers reach this super-peer's feed and driver at "
                        "(default 127.0.0.1 for local masters; for a cluster, this host's address)")
    p.add_argument("--spark-cores", type=int, metavar="N",
                   help="cores a super-peer's Spark application takes on a cluster, and task slots "
                        "per micro-batch (default: N of local[N], else 2)")
    p.add_argument("--trigger-ms", type=parse_milliseconds, metavar="MS",
                   help="micro-batch trigger interval of the Spark executor, in milliseconds or with "
                        "a unit (100ms, 1s; default 100)")
    p.add_argument("--spark-cold-start", action="store_true",
                   help="start a super-peer's Spark session with its first operator rather than with "
                        "the daemon (saves a JVM where no operator ever runs; the first operator then "
                        "waits for it)")
    p.add_argument("--lateness", type=float, metavar="UNITS",
                   help="how far (in reference units) items may arrive out of order in time windows "
                        "before they are dropped and counted (default 0)")
    if checkpoint:
        p.add_argument("--checkpoint-dir", metavar="DIR",
                       help="Spark executor checkpoint; restarting with the same directory resumes "
                            "exactly once (default: a temporary directory, removed at exit)")


def add_replay_rate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--replay-rate", type=parse_item_rate, default=0.0, metavar="ITEMS_PER_S",
                   help="the most items per second a replay of a stream's past (subscribe --since/"
                        "--from-start, recovery) sends; 0 (default): as fast as the links take them. "
                        "A slower replay leaves the links to live streams, and runs long enough for "
                        "later subscriptions over the same past to share it")


def spark_options(args: argparse.Namespace) -> dict:
    """The executor options as ``start_superpeer``, ``network.up`` and the demo take them."""
    return {"master": args.spark_master, "trigger_ms": args.trigger_ms, "lateness": args.lateness,
            "feed_host": args.spark_feed_host, "cores": args.spark_cores,
            "warm": False if args.spark_cold_start else None,
            "checkpoint_dir": getattr(args, "checkpoint_dir", None)}


TOPOLOGY_HELP = "a topology TOML file, or a shipped one by name (paper-example, grid-4x4)"


def _limit_defaults():
    from superpeer.data.limits import DataLimits

    return DataLimits()


def register_superpeer(add_command: AddCommand) -> None:
    sp = add_command("superpeer", help="run a super-peer daemon")
    sp_commands = sp.add_subparsers(dest="superpeer_command", metavar="ACTION", required=True)
    p = sp_commands.add_parser("serve", help="serve one super-peer of a topology")
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
    add_executor_options(p, checkpoint=True)
    p.add_argument("--retention", type=int, default=500_000,
                   help="result items kept per subscription for disconnected readers")
    defaults = _limit_defaults()
    p.add_argument("--max-item-bytes", type=parse_size, default=defaults.max_item_bytes, metavar="SIZE",
                   help="largest item a publisher may send (UTF-8 bytes, e.g. 16MiB, or a number of bytes; "
                        "default %(default)s; at most the gRPC message limit less 1 MiB)")
    p.add_argument("--max-read-bytes", type=parse_size, default=defaults.max_read_bytes, metavar="SIZE",
                   help="bytes of results one read returns (e.g. 4MiB; at least one item; default %(default)s)")
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
    p.set_defaults(func=cmd_superpeer_serve)


def register_network_and_demo(add_command: AddCommand) -> None:
    net = add_command("network", help="run a local network of super-peer processes")
    net_commands = net.add_subparsers(dest="network_command", metavar="ACTION", required=True)
    p = net_commands.add_parser("up", help="start every super-peer of a topology, wait until healthy")
    p.add_argument("--topology", required=True, help=TOPOLOGY_HELP)
    add_executor_options(p)
    p.add_argument("--state-dir", default=".streamglobe",
                   help="daemons' logs and state; the backbone's keys (tls/) and an admin token (admin.token)")
    p.add_argument("--insecure", action="store_true",
                   help="plaintext and no tokens (default: TLS between everyone, mutual between "
                        "super-peers, and tokens for thin peers)")
    p.add_argument("--tls-dir", type=Path, metavar="DIR",
                   help="the backbone's keys from 'streamglobe certs init' (default: made in "
                        "<state-dir>/tls)")
    p.add_argument("--history", metavar="BOUND", help="every super-peer's serve --history (default: everything)")
    add_replay_rate(p)
    p.add_argument("--archive", metavar="DIR",
                   help="every super-peer archives the streams registered there under DIR (serve --archive)")
    add_ui_port_option(p)
    p.set_defaults(func=cmd_network_up)
    p = net_commands.add_parser("down", help="stop the network started by 'network up'")
    p.add_argument("--state-dir", default=".streamglobe")
    p.set_defaults(func=cmd_network_down)
    p = net_commands.add_parser("kill", help="kill -9 one super-peer of the running network (a crash)")
    p.add_argument("peer", metavar="SP")
    p.add_argument("--state-dir", default=".streamglobe")
    p.set_defaults(func=cmd_network_kill)
    p = net_commands.add_parser("start", help="start a killed super-peer again on its state directory")
    p.add_argument("peer", metavar="SP")
    p.add_argument("--state-dir", default=".streamglobe")
    p.set_defaults(func=cmd_network_start)

    p = add_command("demo", help="the paper's example network, live: plans, results, traffic")
    p.add_argument("--photons", type=int, default=6000)
    p.add_argument("--insecure", action="store_true", help="plaintext and no tokens (default: secure)")
    add_executor_options(p)
    add_ui_port_option(p)
    p.set_defaults(func=cmd_demo)
