"""Options of ``superpeer serve`` that the launchers take too (``network up``, ``deploy up``,
``demo``) and pass on to every daemon they start: the executor options (``--executor``,
``--spark-master``, ``--trigger-ms``, ``--lateness``…), which reach a daemon as
``spark_options``, and ``--replay-rate``. Defined once here, beside the command that reads them
(``superpeer.command``), so that a launcher's flag and the daemon's are the same flag."""

from __future__ import annotations

import argparse

from streamglobe.units import parse_duration, parse_item_rate, parse_milliseconds, parse_size

TOPOLOGY_HELP = "a topology TOML file, or a shipped one by name (paper-example, grid-4x4, grid-4x4-subnets)"
# spark_options' keys as ``superpeer serve`` flags (``warm`` False: --spark-cold-start)
SERVE_FLAGS = {"master": "--spark-master", "trigger_ms": "--trigger-ms", "lateness": "--lateness",
               "feed_host": "--spark-feed-host", "cores": "--spark-cores", "backlog": "--spark-backlog"}


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
    p.add_argument("--spark-backlog", type=parse_size, metavar="SIZE",
                   help="what the Spark executor may hold not yet through a micro-batch before the batches "
                        "for it wait (back-pressure up to the publishers; default 64MiB)")
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


def add_reoptimisation_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-reoptimise", action="store_true",
                   help="never re-plan a running subscription for a cheaper plan (plans stay as "
                        "registered; failures are still planned around)")
    p.add_argument("--reoptimise-every", type=parse_duration, default=5.0, metavar="DURATION",
                   help="re-run SUBSCRIBE for every subscription registered here this often, besides "
                        "after events that can change the best plan (default 5s)")
    p.add_argument("--reoptimise-margin", type=float, default=0.10, metavar="FRACTION",
                   help="take a new plan only if the network's cost falls by this share of what the "
                        "subscription's streams cost it (default 0.1)")
    p.add_argument("--widening", action=argparse.BooleanOptionalAction, default=True,
                   help="offer a new subscription that nearly matches a running stream to widen that "
                        "stream in place: its readers keep their items through a residual, nobody moves "
                        "(on by default; never with --executor spark)")
    p.add_argument("--network-joins", action=argparse.BooleanOptionalAction, default=True,
                   help="run window joins that planners place at this super-peer, where their inputs "
                        "meet (on by default, with either executor)")
    p.add_argument("--reoptimise-cooldown", type=parse_duration, default=10.0, metavar="DURATION",
                   help="no re-plan of a subscription within this long of its last one (default 10s)")
    p.add_argument("--no-adaptive-sampling", action="store_true",
                   help="keep approximate subscriptions on the sample they were admitted with (default: "
                        "lowered while a link on their paths is under pressure, raised when it is not)")


def reoptimisation_settings(args: argparse.Namespace):
    """``add_reoptimisation_options``' flags as the daemon's settings (ValueError if out of range)."""
    from superpeer.control.reoptimisation_settings import ReoptimisationSettings

    return ReoptimisationSettings(not args.no_reoptimise, args.reoptimise_every, args.reoptimise_margin,
                                  args.reoptimise_cooldown, not getattr(args, "no_adaptive_sampling", False))


def reoptimisation_flags(args: argparse.Namespace) -> list[str]:
    """The same flags for a launcher to pass on to every daemon it starts."""
    widening = [] if getattr(args, "widening", True) else ["--no-widening"]
    widening += ["--no-adaptive-sampling"] if getattr(args, "no_adaptive_sampling", False) else []
    widening += [] if getattr(args, "network_joins", True) else ["--no-network-joins"]
    if getattr(args, "no_reoptimise", False):
        return ["--no-reoptimise", *widening]
    return ["--reoptimise-every", repr(args.reoptimise_every), "--reoptimise-margin", repr(args.reoptimise_margin),
            "--reoptimise-cooldown", repr(args.reoptimise_cooldown), *widening]


def spark_options(args: argparse.Namespace) -> dict:
    """The executor options as ``start_superpeer``, the process launcher and the demo take them."""
    return {"master": args.spark_master, "trigger_ms": args.trigger_ms, "lateness": args.lateness,
            "feed_host": args.spark_feed_host, "cores": args.spark_cores,
            "backlog": getattr(args, "spark_backlog", None),
            "warm": False if args.spark_cold_start else None,
            "checkpoint_dir": getattr(args, "checkpoint_dir", None)}


def serve_flags(spark: dict | None) -> list[str]:
    """``spark_options`` (None values: the defaults) as ``superpeer serve`` flags, for a launcher
    starting daemons (a checkpoint directory is one daemon's own: never passed on)."""
    flags: list[str] = []
    for option, value in (spark or {}).items():
        flag = SERVE_FLAGS.get(option)
        if value is not None and flag is not None:
            flags += [flag, str(value)]
        elif option == "warm" and value is False:
            flags.append("--spark-cold-start")
    return flags
