"""``subscribe --format``, and the sinks ``--to-dir``, ``--to-webhook`` and ``--to-vtp``.

A sink runs until the stream ends, nothing comes for ``--timeout``, or it is stopped (Ctrl-C or
SIGTERM: what it holds is delivered first; a second Ctrl-C stops at once, and what was held is
read again next time). Started again with ``--resume SID`` and the same sink, it goes on from
what it delivered for good, without a gap or a duplicate (``thinpeer.sinks.runner``).
"""

from __future__ import annotations

import argparse
import hashlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from streamglobe.units import parse_duration
from thinpeer.cli.command import EXIT_OK, CliError
from thinpeer.cli.offsets import save_offset, saved_offset, state_dir
from thinpeer.formats.results import FORMATS

if TYPE_CHECKING:
    from thinpeer.client import SuperPeerClient
    from thinpeer.sinks.base import ResultSink


def add_sink_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=FORMATS, default="xml",
                   help="xml: one document <root>result…</root> (default); lines: one XML result "
                        "per line; ndjson: one JSON value per line (also of the sinks' files and POSTs)")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-dir", metavar="DIR", type=Path,
                    help="write results to rotating files in DIR, each complete when it appears, "
                         "named SID-FIRST-LAST.FORMAT; runs until stopped and resumes after the last file")
    to.add_argument("--to-webhook", metavar="URL",
                    help="POST results in batches to URL (retried with back-off; an Idempotency-Key "
                         "per batch, the same on every redelivery)")
    to.add_argument("--to-vtp", metavar="HOST:PORT",
                    help="send each result as a VOEvent to a VOEvent broker's receiving port (VTP)")
    p.add_argument("--rotate-items", type=int, default=10_000, metavar="N",
                   help="with --to-dir: results per file at most (default 10000)")
    p.add_argument("--rotate-s", type=parse_duration, default=60.0, metavar="DURATION",
                   help="with --to-dir: a file is completed after this long at most (default 60s)")
    p.add_argument("--webhook-batch", type=int, default=500, metavar="N",
                   help="with --to-webhook: results per POST at most (default 500)")
    p.add_argument("--webhook-linger", type=parse_duration, default=1.0, metavar="DURATION",
                   help="with --to-webhook: how long a result waits for its batch to fill (default 1s)")
    p.add_argument("--webhook-ca", metavar="FILE",
                   help="with --to-webhook: a CA certificate to trust (besides the system's)")
    p.add_argument("--vtp-ivorn", metavar="IVORN", default="ivo://streamglobe/results",
                   help="with --to-vtp: the IVORN the results' IVORNs start with "
                        "(each is IVORN#SID-OFFSET; default ivo://streamglobe/results)")


def sink_arguments_given(args: argparse.Namespace) -> bool:
    return bool(args.to_dir or args.to_webhook or args.to_vtp)


def check_sink_arguments(args: argparse.Namespace) -> None:
    """Refuse what cannot work before a subscription is registered."""
    if not sink_arguments_given(args):
        return
    if args.count is not None:
        raise CliError("error: --count is for results printed on stdout, not a sink (a sink runs "
                       "until the stream ends, --timeout passes or it is stopped)")
    if args.rotate_items < 1:
        raise CliError(f"error: --rotate-items must be 1 or more, not {args.rotate_items}")
    if args.webhook_batch < 1:
        raise CliError(f"error: --webhook-batch must be 1 or more, not {args.webhook_batch}")
    if args.to_webhook and not args.to_webhook.startswith(("http://", "https://")):
        raise CliError(f"error: --to-webhook {args.to_webhook!r} is not an http:// or https:// URL")
    if args.to_vtp and ":" not in args.to_vtp:
        raise CliError(f"error: --to-vtp {args.to_vtp!r} is not HOST:PORT")


def _state_path(kind: str, subscription: str, target: str) -> Path:
    """Where a sink that has no directory of its own keeps its offsets: per subscription and
    target, in the user's thin-peer state directory."""
    digest = hashlib.sha256(target.encode()).hexdigest()[:12]
    return state_dir() / "sinks" / f"{subscription}-{kind}-{digest}.json"


def build_sink(args: argparse.Namespace, subscription: str) -> ResultSink:
    from thinpeer.sinks.base import SinkError

    try:
        if args.to_dir:
            from thinpeer.sinks.directory import DirectorySink

            return DirectorySink(args.to_dir, subscription, args.format, args.rotate_items, args.rotate_s)
        if args.to_webhook:
            from thinpeer.sinks.webhook import WebhookSink

            return WebhookSink(args.to_webhook, subscription,
                               _state_path("webhook", subscription, args.to_webhook), args.format,
                               args.webhook_batch, args.webhook_linger, ca=args.webhook_ca,
                               say=lambda message: print(message, file=sys.stderr, flush=True))
        from thinpeer.sinks.vtp import VtpSink

        return VtpSink(args.to_vtp, subscription, _state_path("vtp", subscription, args.to_vtp),
                       ivorn_base=args.vtp_ivorn,
                       say=lambda message: print(message, file=sys.stderr, flush=True))
    except SinkError as exc:
        raise CliError(f"error: {exc}") from None


def run_sink(client: SuperPeerClient, subscription: str, offset: int | None,
             args: argparse.Namespace) -> int:
    """Deliver the subscription's results to the sink the arguments name, from its own committed
    offset; if it keeps none yet, from ``offset`` (None: where ``subscribe`` last saved it)."""
    from thinpeer.sinks.base import SinkError
    from thinpeer.sinks.runner import deliver_results

    sink = build_sink(args, subscription)
    if sink.committed() is None and offset is None:
        offset = saved_offset(subscription)
    stopping = {"asked": False}

    def stop_gently(signum, frame) -> None:
        if stopping["asked"]:
            raise KeyboardInterrupt
        stopping["asked"] = True
        print(f"stopping: delivering what is held to {sink.description} first (again to stop at once)",
              file=sys.stderr, flush=True)

    previous = {s: signal.signal(s, stop_gently) for s in (signal.SIGINT, signal.SIGTERM)}
    committed = sink.committed()
    if committed is not None and offset is not None and offset != committed:
        print(f"note: --offset {offset} is not used: {sink.description} has delivered the results "
              f"before offset {committed} for good, and goes on from there", file=sys.stderr)
    print(f"delivering results of {subscription} to {sink.description} from offset "
          f"{offset if committed is None else committed}", file=sys.stderr, flush=True)
    try:
        done = deliver_results(client, subscription, sink, start=offset or 0, idle_timeout=args.timeout,
                               say=lambda message: print(message, file=sys.stderr, flush=True),
                               stop=lambda: stopping["asked"])
    except SinkError as exc:
        raise CliError(f"error: {exc}; started again with --resume {subscription}, the sink goes on "
                       "from its last delivered result") from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        sink.close()
    save_offset(subscription, done.committed)
    print(f"{done.items} result item(s) delivered to {sink.description} (up to offset "
          f"{done.committed}); stopped: {done.why}; resume with --resume {subscription}", file=sys.stderr)
    return EXIT_OK
