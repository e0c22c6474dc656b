"""``streamglobe publish|subscribe|unsubscribe|status``: a thin peer talking to one super-peer.

All of them go through the client library (``thinpeer.client``); ``subscribe`` reads with its
``result_batches`` loop, so resuming and idle timeouts work the same as for library users.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Iterator

from thinpeer.cli.command import EXIT_ERROR, EXIT_OK, AddCommand, CliError, thin_error
from thinpeer.cli.query import read_query

if TYPE_CHECKING:
    from thinpeer.client import PublishSummary, SuperPeerClient


def _client(address: str) -> SuperPeerClient:
    from thinpeer.client import SuperPeerClient

    return SuperPeerClient(address)


def _document_items(path: str) -> tuple[str, str, Iterator[str]]:
    """(root, item, iterator of item XML strings) of a stream document."""
    from lxml import etree

    from wxquery.errors import InputDocumentError
    from wxquery.stream_document import StreamDocument

    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            doc = StreamDocument.from_bytes(data, "<stdin>")
        else:
            doc = StreamDocument.from_file(path)
    except InputDocumentError as exc:  # a missing file: a message, not a traceback
        raise CliError(str(exc)) from None

    def opened() -> BinaryIO:
        return io.BytesIO(data) if path == "-" else open(path, "rb")

    try:
        # Only the first two start tags are read here, to name the stream's root and items.
        with opened() as f:
            root = item = None
            for event, el in etree.iterparse(f, events=("start",)):
                if root is None:
                    root = el.tag
                elif item is None:
                    item = el.tag
                    break
    except etree.XMLSyntaxError as exc:
        raise CliError(f"{path}:{exc.position[0]}:{exc.position[1]}: error: malformed XML: {exc.msg}") from None
    if root is None or item is None:
        raise CliError(f"{path}: error: no items: expected <root><item>…</item>…</root>")

    def items() -> Iterator[str]:
        try:
            for el in doc.items(root, item):
                yield etree.tostring(el, encoding="unicode", with_tail=False)
        except InputDocumentError as exc:
            raise CliError(str(exc)) from None

    return root, item, items()


def cmd_publish(args: argparse.Namespace) -> int:
    from photons.generator import generate
    from thinpeer.client import ThinPeerError

    if args.input is None and not args.synthetic:
        raise CliError("error: give --input DOC.xml or --synthetic")
    if args.input is not None:
        root, item, items = _document_items(args.input)
    else:
        root, item = "photons", "photon"
        items = (p.to_xml() for p in generate(args.count, args.seed, rate=10.0))
    if args.count is not None:
        items = itertools.islice(items, args.count)
    started = time.monotonic()

    def progress(summary: PublishSummary) -> None:
        elapsed = time.monotonic() - started
        print(f"\r{args.stream}: {summary.accepted} items published, {summary.rejected} rejected "
              f"({summary.accepted / max(elapsed, 1e-9):,.0f} items/s)", end="", file=sys.stderr, flush=True)

    try:
        with _client(args.superpeer) as client:
            client.register_stream(args.stream, root, item, args.rate or 0.0)
            try:
                summary = client.publish(args.stream, items, rate=args.rate, progress=progress)
            finally:
                client.close_stream(args.stream)
    except ThinPeerError as exc:
        print(file=sys.stderr)
        raise thin_error(exc) from None
    print(file=sys.stderr)
    for reason in summary.reasons or []:
        print(f"rejected: {reason}", file=sys.stderr)
    print(f"{args.stream}: {summary.accepted} items published and the stream closed; "
          f"{summary.rejected} rejected", file=sys.stderr)
    return EXIT_OK if not summary.rejected else EXIT_ERROR


def _offset_file(subscription: str) -> Path:
    return Path(".streamglobe") / f"{subscription}.offset"


def cmd_subscribe(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            if args.resume:
                sid = args.resume
                offset = args.offset if args.offset is not None else (
                    int(_offset_file(sid).read_text()) if _offset_file(sid).exists() else 0)
                print(f"resuming subscription {sid} at offset {offset}", file=sys.stderr)
            else:
                if not args.query:
                    raise CliError("error: give --query FILE (or --resume ID)")
                reply = client.subscribe(read_query(args.query), args.strategy,
                                         wait_for_streams=not args.no_wait)
                sid, offset = reply.subscription, 0
                print(f"subscription {sid}", file=sys.stderr)
                print(reply.description, file=sys.stderr, flush=True)
            written, root, closed = _write_results(client, sid, offset, args.count, args.timeout)
            sys.stdout.write(f"</{root or 'results'}>\n")
            why = "the stream closed" if closed else (
                "count reached" if args.count is not None and written >= args.count else "timeout")
            print(f"{written} result item(s); stopped: {why}; resume with --resume {sid}",
                  file=sys.stderr)
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    return EXIT_OK


def _write_results(client: SuperPeerClient, sid: str, offset: int, count: int | None,
                   timeout: float | None) -> tuple[int, str | None, bool]:
    """Stream results to stdout from ``offset`` until the stream closes, ``count`` items were
    written or nothing came for ``timeout`` seconds; (items written, root, closed).

    The opening tag is written with the first read (even an empty one); the caller closes it.
    After every read that brought items, the next offset is saved for ``--resume``.
    """
    written = 0
    root = None
    if count is not None and count <= 0:
        return written, root, False
    for batch in client.result_batches(sid, offset, idle_timeout=timeout, max_items=1000,
                                       wait_ms=500):
        if batch.dropped:
            print(f"warning: {batch.dropped} result item(s) were dropped by the retention "
                  "bound before they were read", file=sys.stderr)
        if root is None:
            root = batch.root or "results"
            sys.stdout.write(f"<{root}>")
        items = batch.items if count is None else batch.items[: count - written]
        for item in items:
            sys.stdout.write(item)
        sys.stdout.flush()
        written += len(items)
        if items:
            _offset_file(sid).parent.mkdir(exist_ok=True)
            _offset_file(sid).write_text(str(batch.offset + len(items)))
        if batch.closed and len(items) == len(batch.items):
            return written, root, True
        if count is not None and written >= count:
            break
    return written, root, False


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            removed = client.unsubscribe(args.subscription)
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    print(json.dumps({"unsubscribed": args.subscription, "removed_streams": removed}))
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError

    try:
        with _client(args.superpeer) as client:
            print(json.dumps(client.status(), indent=2))
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    p = add_command("publish", help="register a stream at a super-peer and publish it")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--stream", required=True)
    p.add_argument("--input", metavar="DOC.xml", help="stream document ('-' for stdin)")
    p.add_argument("--synthetic", action="store_true", help="generated photons")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=float, help="items per second (default: as fast as possible)")
    p.add_argument("--count", type=int, help="publish at most N items")
    p.set_defaults(func=cmd_publish)

    p = add_command("subscribe", help="register a subscription and print its results")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--query", metavar="FILE")
    p.add_argument("--count", type=int, help="stop after N result items")
    p.add_argument("--timeout", type=float, help="stop after S seconds without results")
    p.add_argument("--resume", metavar="ID", help="resume reading a subscription")
    p.add_argument("--offset", type=int, help="with --resume: the offset to read from")
    p.add_argument("--strategy", default="sharing", choices=["sharing", "data-shipping", "query-shipping"])
    p.add_argument("--no-wait", action="store_true",
                   help="fail if a stream the query reads is not registered yet (default: wait for it)")
    p.set_defaults(func=cmd_subscribe)

    p = add_command("unsubscribe", help="remove a subscription")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("subscription")
    p.set_defaults(func=cmd_unsubscribe)

    p = add_command("status", help="a super-peer's streams, operators, routes, traffic (JSON)")
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.set_defaults(func=cmd_status)
