"""``streamglobe publish|subscribe|unsubscribe|status``: a thin peer talking to one super-peer.

All of them go through the client library (``thinpeer.client``); ``subscribe`` reads with its
``result_batches`` loop, so resuming and idle timeouts work the same as for library users.

``publish`` lives in ``thinpeer.cli.publish``. ``subscribe`` prints results (``--format``) or hands
them to a sink (``thinpeer.cli.sink_options``); it saves the offset it has read up to in a per-user
state directory (``$STREAMGLOBE_STATE_DIR``, else ``$XDG_STATE_HOME/streamglobe``, else
``~/.local/state/streamglobe``), so ``--resume`` continues where it stopped from any working
directory, and refuses to guess when it has no saved offset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from streamglobe.units import parse_duration
from thinpeer.cli.command import EXIT_OK, EXIT_TIMEOUT, AddCommand, CliError, thin_error
from thinpeer.cli.connection import _client, add_connection_options
from thinpeer.cli.offsets import save_offset, saved_offset
from thinpeer.cli.query import read_query
from thinpeer.cli.sink_options import (
    add_sink_options,
    check_sink_arguments,
    run_sink,
    sink_arguments_given,
)

PAST_EVERY_S = 2.0  # how often a subscription over the past prints how far its replay has come

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient


def cmd_subscribe(args: argparse.Namespace) -> int:
    from thinpeer.approximation import merged
    from thinpeer.client import ThinPeerError

    if args.count is not None and args.count < 0:
        raise CliError(f"error: --count must be 0 or more, not {args.count}")
    if args.resume and (args.since is not None or args.from_start or args.approximate):
        raise CliError("error: --since, --from-start and --approximate are for a new subscription, not --resume")
    if args.confidence is not None and not (args.approximate and 0 < args.confidence < 1):
        raise CliError("error: --confidence is for --approximate, between 0 and 1"
                       + (f", not {args.confidence}" if args.approximate else ""))
    if (args.min_rate is not None or args.weight is not None) and not args.approximate:
        raise CliError("error: --min-rate and --weight are for --approximate")
    check_sink_arguments(args)
    if args.json and args.format == "xml" and args.count != 0 and not sink_arguments_given(args):
        raise CliError("error: --json writes JSON lines on stdout: give --format lines or ndjson for the "
                       "results (one per line), or --count 0 to only subscribe")
    since_s = args.since
    if since_s is not None and args.from_start:
        raise CliError("error: give --since or --from-start, not both")
    try:
        with _client(args) as client:
            if args.resume:
                sid = args.resume
                if sink_arguments_given(args):  # a sink knows where it stopped
                    return run_sink(client, sid, args.offset, args)
                offset = args.offset if args.offset is not None else saved_offset(sid)
                print(f"resuming subscription {sid} at offset {offset}", file=sys.stderr)
                said = {"subscription": sid, "offset": offset}
            else:
                if not args.query:
                    raise CliError("error: give --query FILE (or --resume ID)")
                reply = client.subscribe(read_query(args.query), args.strategy,
                                         wait_for_streams=not args.no_wait, from_start=args.from_start,
                                         since_s=since_s, approximate=args.approximate,
                                         confidence=args.confidence, min_rate=args.min_rate, weight=args.weight)
                sid, offset = reply.subscription, 0
                save_offset(sid, 0)
                print(f"subscription {sid}", file=sys.stderr)
                for warning in reply.warnings:
                    print(f"{args.query}:{warning}", file=sys.stderr)
                if reply.history:
                    print(f"note: {reply.history}", file=sys.stderr)
                if reply.sample > 1:
                    print(f"note: the network cannot carry this subscription whole: it reads a 1/{reply.sample} "
                          f"sample of its stream; counts and sums are scaled estimates", file=sys.stderr)
                print(reply.description, file=sys.stderr, flush=True)
                said = {"subscription": sid, "offset": 0, "plan": reply.description, "sample": reply.sample,
                        "history": reply.history or None}
            if args.json:  # (first, so that a script has the id while the results come)
                print(json.dumps(said), flush=True)
            if sink_arguments_given(args):
                return run_sink(client, sid, offset, args)
            if args.json and args.count == 0:
                return EXIT_OK
            approximations: list[str] = []
            written, root, closed = _write_results(client, sid, offset, args.count, args.timeout,
                                                   approximations, args.format)
            if args.format == "xml":
                sys.stdout.write(f"{merged(approximations)}</{root}>\n")
            why = "the stream closed" if closed else (
                "count reached" if args.count is not None and written >= args.count else "timeout")
            print(f"{written} result item(s); stopped: {why}; resume with --resume {sid}",
                  file=sys.stderr)
            if args.json:
                print(json.dumps({"subscription": sid, "results": written, "stopped": why,
                                  "next_offset": offset + written}), flush=True)
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    return EXIT_TIMEOUT if why == "timeout" and not written else EXIT_OK


def _write_results(client: SuperPeerClient, sid: str, offset: int, count: int | None,
                   timeout: float | None, approximations: list[str] | None = None,
                   fmt: str = "xml") -> tuple[int, str, bool]:
    """Stream results to stdout from ``offset`` until the stream closes, ``count`` items were
    written or nothing came for ``timeout`` seconds; (items written, root, closed). The reads'
    ``<sg:approximation>`` elements (a subscription on a sample) go to ``approximations``.

    The opening tag is written with the first read (even an empty one, or with ``count`` 0);
    the caller closes it. After every read that brought items, the next offset is saved for
    ``--resume``; once everything of an ended stream is written, the read is confirmed so the
    super-peer can release the results. ``fmt`` "lines" or "ndjson": one result per line, no
    opening tag (``thinpeer.formats.results``).
    """
    from thinpeer.formats.results import render_line

    written = 0
    if count == 0:  # nothing to print, but a well-formed (empty) result document
        root = client.read(sid, offset, max_items=1, wait_ms=0).root or "results"
        if fmt == "xml":
            sys.stdout.write(f"<{root}>")
        return written, root, False
    root = None
    degraded = shown = ""  # shown: the replay's progress as last printed
    told = 0.0
    for batch in client.result_batches(sid, offset, idle_timeout=timeout, max_items=1000,
                                       wait_ms=500):
        if batch.past and batch.past != shown and time.monotonic() - told >= PAST_EVERY_S:
            print(f"the past: {batch.past}", file=sys.stderr, flush=True)
            shown, told = batch.past, time.monotonic()
        elif shown and not batch.past:
            if not batch.closed:
                print("the past has been replayed (its last results follow): live from here on",
                      file=sys.stderr, flush=True)
            shown = ""
        if batch.degraded != degraded:  # the subscriber sees a failure on its route, and the end of it
            print(f"subscription {sid} degraded: {batch.degraded}" if batch.degraded else
                  f"subscription {sid} healthy again (nothing lost)", file=sys.stderr, flush=True)
            degraded = batch.degraded
        if batch.dropped:
            print(f"warning: {batch.dropped} result item(s) before offset {batch.offset} are no "
                  "longer held by the super-peer (retention bound, or released after the stream "
                  "ended)", file=sys.stderr)
        if root is None:
            root = batch.root or "results"
            if fmt == "xml":
                sys.stdout.write(f"<{root}>")
        items = batch.items if count is None else batch.items[: count - written]
        if approximations is not None and batch.approximation:
            approximations.append(batch.approximation)
        if fmt == "xml":
            for item in items:
                sys.stdout.write(item)
        else:
            sys.stdout.write("".join(render_line(item, fmt) + "\n" for item in items))
        sys.stdout.flush()
        written += len(items)
        if items:
            save_offset(sid, batch.offset + len(items))
        if batch.closed and len(items) == len(batch.items):
            client.confirm_read(sid, batch.offset + len(items))
            return written, root, True
        if count is not None and written >= count:
            break
    return written, root or "results", False


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args) as client:
            removed = client.unsubscribe(args.subscription)
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    print(json.dumps({"unsubscribed": args.subscription, "removed_streams": removed}))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args) as client:
            print(json.dumps(client.status(), indent=2))
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    p = add_command("subscribe", help="register a subscription and print its results")
    add_connection_options(p)
    p.add_argument("--query", metavar="FILE")
    p.add_argument("--count", type=int, help="stop after N result items (0: only subscribe)")
    p.add_argument("--json", action="store_true",
                   help="for scripts: the subscription (id, offset, plan) as a JSON line on stdout first, "
                        "and after the results (--format lines or ndjson) a JSON line saying how many came "
                        "and why it stopped")
    p.add_argument("--timeout", type=parse_duration, metavar="DURATION",
                   help="stop after this long without results (seconds, or e.g. 5m)")
    p.add_argument("--resume", metavar="ID", help="resume reading a subscription")
    p.add_argument("--offset", type=int, help="with --resume: the offset to read from")
    p.add_argument("--strategy", default="sharing", choices=["sharing", "data-shipping", "query-shipping"])
    p.add_argument("--from-start", action="store_true",
                   help="over every item its streams' super-peers retain (their history), then "
                        "live: no gap and no duplicate at the seam")
    p.add_argument("--since", metavar="DURATION", type=parse_duration,
                   help="over the items that arrived in the last DURATION ('90s', '10m', '2h'), "
                        "then live; when the history does not reach that far, it starts at the "
                        "oldest item retained and says so")
    p.add_argument("--approximate", action="store_true",
                   help="if the network cannot carry the subscription whole, plan it on the finest "
                        "sample of its stream (1/2 … 1/64) that fits rather than refuse it; window "
                        "counts and sums come back scaled (not for joins or count windows)")
    p.add_argument("--confidence", type=float, metavar="C",
                   help="with --approximate: of the intervals written in <sg:approximation> (default 0.95)")
    p.add_argument("--min-rate", type=sample_rate, metavar="1/R",
                   help="with --approximate: the coarsest sample the network may lower it to while it runs, "
                        "under pressure (1/2 … 1/64, default 1/64; 1: never lowered)")
    p.add_argument("--weight", type=positive_weight, metavar="W",
                   help="with --approximate: under pressure, subscriptions keeping more of their items for "
                        "their weight are lowered first (default 1)")
    p.add_argument("--no-wait", action="store_true",
                   help="fail if a stream the query reads is not registered yet (default: wait for it)")
    add_sink_options(p)
    p.set_defaults(func=cmd_subscribe)

    p = add_command("unsubscribe", help="remove a subscription")
    add_connection_options(p)
    p.add_argument("subscription")
    p.set_defaults(func=cmd_unsubscribe)

    p = add_command("status", help="a super-peer's streams, operators, routes, traffic (JSON)")
    add_connection_options(p)
    p.set_defaults(func=cmd_status)


def sample_rate(text: str) -> int:
    """``--min-rate``: "1/8" (or "8"): R of a 1/R sample, a power of two up to 64, or 1."""
    number = text.strip().removeprefix("1/")
    if not number.isdigit() or int(number) not in (1, 2, 4, 8, 16, 32, 64):
        raise argparse.ArgumentTypeError(f"{text!r} is not a sample of 1, 1/2, 1/4, … 1/64")
    return int(number)


def positive_weight(text: str) -> float:
    try:
        weight = float(text)
    except ValueError:
        weight = 0.0
    if not 0 < weight < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return weight
