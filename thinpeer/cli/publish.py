"""``streamglobe publish``: register a stream at a super-peer and publish an input as its items.

The input is read as it arrives (``thinpeer.sources``): a file, a file still being written
(``--follow``) or stdin, in one of three formats — an XML document whose root's children are the
items, one XML item per line, or one JSON value per line (``thinpeer.formats.json_items``). Items
leave in batches, and a batch waits at most ``--linger-ms`` for more items, so a live source's
items reach subscribers at once while a file still goes in full batches.

Every item is numbered by its place in the input: the super-peer checks each (an element that is
not an item of the stream is rejected there and reported with its number, never skipped
silently); a JSON line that is not JSON is rejected here, with its line number, and the lines
after it go on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from streamglobe.units import parse_item_rate
from thinpeer.cli.command import EXIT_ERROR, EXIT_OK, AddCommand, CliError, thin_error
from thinpeer.cli.connection import _client, add_connection_options

if TYPE_CHECKING:
    from thinpeer.client import PublishSummary
    from thinpeer.linger import Rejected

FORMATS = ("xml", "lines", "ndjson")
DEFAULT_LINGER_MS = 50.0


class Input:
    """An opened input: the stream's root and item names, and its items as they come."""

    def __init__(self, root: str, item: str, items: Iterable[str | Rejected], source=None) -> None:
        self.root = root
        self.item = item
        self.items = items
        self.source = source  # an XmlItems (it counts text outside the items), else None

    @property
    def stray_text(self) -> int:
        return getattr(self.source, "stray_text", 0)


def open_input(path: str, fmt: str, follow: bool = False, root: str | None = None,
               item: str | None = None, stopped: Callable[[], bool] = lambda: False) -> Input:
    """The input at ``path`` ("-": stdin) in format ``fmt``. A plain XML file is checked whole
    first, so that a malformed one publishes nothing; stdin and a followed file are checked as
    they come (their items before an error are published)."""
    from lxml import etree

    from thinpeer.sources.chunks import InputError, read_chunks
    from thinpeer.sources.lines import JsonLineItems, LineItems
    from thinpeer.sources.xml_items import open_xml
    from wxquery.errors import InputDocumentError
    from wxquery.stream_document import StreamDocument

    if follow and path == "-":
        raise CliError("error: --follow is for a file (stdin is read until its writer closes it)")
    if path != "-" and not Path(path).is_file():
        raise CliError(f"{path}: error: no such input file: {path}")
    name = "<stdin>" if path == "-" else path
    try:
        if fmt == "xml":
            if path != "-" and not follow:
                StreamDocument.from_file(path)
            if root is not None:
                raise CliError("error: --root is for --format lines or ndjson (an XML document "
                               "names its own root)")
            items = open_xml(name, read_chunks(path, follow, stop=stopped), item, stopped)
            return Input(items.root, items.item, items, items)
        if item is not None and not _is_name(item):
            raise CliError(f"error: --item {item!r} is not an XML element name")
        if root is not None and not _is_name(root):
            raise CliError(f"error: --root {root!r} is not an XML element name")
        if fmt == "lines":
            lines = LineItems(read_chunks(path, follow, stop=stopped), item)
            return Input(root or "items", lines.item, lines)
        json_lines = JsonLineItems(read_chunks(path, follow, stop=stopped), item or "item")
        return Input(root or "items", json_lines.item, json_lines)
    except (InputDocumentError, InputError) as exc:
        raise CliError(str(exc)) from None
    except etree.XMLSyntaxError as exc:
        raise CliError(f"{name}: error: malformed XML: {exc.msg}") from None


def _follow_until_stopped() -> Callable[[], bool]:
    """With --follow the input never ends by itself: the first Ctrl-C or SIGTERM ends it (what
    was read is published and the stream closed, unless --keep-open); a second stops at once."""
    asked = {"stop": False}

    def ask(signum, frame) -> None:
        if asked["stop"]:
            raise KeyboardInterrupt
        asked["stop"] = True
        print("\nstopping: publishing what was read, then ending (again to stop at once)",
              file=sys.stderr, flush=True)

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, ask)
    return lambda: asked["stop"]


def _is_name(name: str) -> bool:
    from thinpeer.formats.names import is_name

    return is_name(name)


def cmd_publish(args: argparse.Namespace) -> int:
    from photons.generator import generate
    from thinpeer.client import TRANSIENT, ThinPeerError
    from wxquery.errors import InputDocumentError

    if args.input is None and not args.synthetic:
        raise CliError("error: give --input DOC.xml or --synthetic")
    if args.follow and args.input is None:
        raise CliError("error: --follow is for --input FILE")
    if args.linger_ms < 0:
        raise CliError(f"error: --linger-ms must be 0 or more, not {args.linger_ms:g}")
    opened = None
    stop = _follow_until_stopped() if args.follow else (lambda: False)
    if args.input is not None:
        opened = open_input(args.input, args.format, args.follow, args.root, args.item, stop)
        root, item = opened.root, opened.item
        items: Iterator = iter(opened.items)
    else:
        root, item = "photons", "photon"
        items = (p.to_xml() for p in generate(args.count, args.seed, rate=10.0))
    started = time.monotonic()
    said_held = [""]

    def progress(summary: PublishSummary) -> None:
        elapsed = time.monotonic() - started
        again = f", {summary.duplicates} already there" if summary.duplicates else ""
        # back-pressure: the rate the network holds this publisher to, and why (a new line each
        # time the reason changes, so that it stays on screen)
        held = (f"; held back {summary.held_back_s:,.0f} s: {summary.held_back}" if summary.held_back else "")
        if held and summary.held_back != said_held[0]:
            said_held[0] = summary.held_back
            print(file=sys.stderr)
        print(f"\r{args.stream}: {summary.accepted} items published, {summary.rejected} rejected{again} "
              f"({summary.accepted / max(elapsed, 1e-9):,.0f} items/s){held}\x1b[K", end="", file=sys.stderr,
              flush=True)

    def stays_open(why: str = "") -> str:
        return (f"{why}; " if why else "") + (
            f"the stream {args.stream} stays open: run the same command with --resume "
            "to continue after the last item the super-peer has")

    registered = False
    try:
        with _client(args) as client:
            have = client.register_stream(args.stream, root, item, args.rate or 0.0,
                                          args.event_time or "", args.event_time_rate, args.history or "")
            registered = True
            if args.history:
                print(f"{args.stream}: its super-peer keeps a history of "
                      f"{client.history_bounds.get(args.stream) or args.history}", file=sys.stderr)
            # resuming, the input's item N is the stream's item N (an item refused here keeps
            # its number too): what the super-peer has is skipped, and the batches are numbered,
            # so one whose reply is lost is sent again safely; otherwise the items are appended,
            # unnumbered (other publishers may append to the same stream meanwhile)
            position = have if args.resume else None
            items = itertools.islice(items, position or 0, args.count)
            if args.resume:
                print(f"{args.stream}: resuming at item {have} (the super-peer has items 0..{have - 1})"
                      if have else f"{args.stream}: the super-peer has no items yet; publishing from item 0",
                      file=sys.stderr, flush=True)
            try:
                summary = client.publish(args.stream, items, rate=args.rate, progress=progress,
                                         position=position, linger_s=args.linger_ms / 1000)
            except KeyboardInterrupt:
                print(file=sys.stderr)
                print(stays_open(), file=sys.stderr)  # then "interrupted" (the CLI's own)
                raise
            except ThinPeerError as exc:
                if exc.code not in TRANSIENT:
                    try:  # nothing to resume: end the stream, as a finished publish does
                        client.close_stream(args.stream)
                    except ThinPeerError:
                        pass
                raise
            except (CliError, InputDocumentError) as exc:  # the input broke off: what came is published
                print(file=sys.stderr)
                raise CliError(stays_open(str(exc))) from None
            if not args.keep_open:
                client.close_stream(args.stream)
    except ThinPeerError as exc:
        print(file=sys.stderr)
        error = thin_error(exc)
        if registered and exc.code in TRANSIENT:
            error = CliError(stays_open(str(error)))
        raise error from None
    print(file=sys.stderr)
    for reason in summary.reasons or []:
        print(f"rejected: {reason}", file=sys.stderr)
    if summary.rejected > len(summary.reasons or []):
        print(f"rejected: … {summary.rejected - len(summary.reasons or [])} more", file=sys.stderr)
    stray = opened.stray_text if opened is not None else 0
    if stray:
        print(f"warning: {args.input}: text outside the <{item}> items in {stray} place(s) of the "
              "document was not published", file=sys.stderr)
    ended = ("the stream stays open (continue with --resume, or a new input)" if args.keep_open
             else "the stream closed")
    print(f"{args.stream}: {summary.accepted} items published and {ended}; "
          f"{summary.rejected} rejected", file=sys.stderr)
    if args.json:
        print(json.dumps({"stream": args.stream, "published": summary.accepted, "rejected": summary.rejected,
                          "reasons": list(summary.reasons or []), "stray_text": stray,
                          "closed": not args.keep_open, "held_back_s": round(summary.held_back_s, 3),
                          "held_back": summary.held_back}), flush=True)
    return EXIT_OK if not summary.rejected and not stray else EXIT_ERROR


def register(add_command: AddCommand) -> None:
    p = add_command("publish", help="register a stream at a super-peer and publish it")
    add_connection_options(p)
    p.add_argument("--stream", required=True)
    p.add_argument("--input", metavar="FILE",
                   help="what to publish: a file, or '-' for stdin (read as it comes: a live "
                        "writer's items go at once)")
    p.add_argument("--format", choices=FORMATS, default="xml",
                   help="xml: a document whose root's children are the items (default); lines: "
                        "one XML item per line; ndjson: one JSON value per line, as an XML item")
    p.add_argument("--follow", action="store_true",
                   help="with --input FILE: at its end, wait for more, like tail -f (Ctrl-C ends)")
    p.add_argument("--linger-ms", type=float, default=DEFAULT_LINGER_MS, metavar="MS",
                   help="how long an item waits for its batch to fill before it goes anyway "
                        f"(default {DEFAULT_LINGER_MS:g})")
    p.add_argument("--root", metavar="NAME",
                   help="with --format lines or ndjson: the stream's root element, as queries "
                        "name it: stream(\"S\")/ROOT/ITEM (default 'items')")
    p.add_argument("--item", metavar="NAME",
                   help="the item element's name (default: xml, the first child of the root; "
                        "lines, the first line's element; ndjson, 'item')")
    p.add_argument("--synthetic", action="store_true", help="generated photons")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=parse_item_rate, metavar="ITEMS_PER_S",
                   help="items per second (default: as fast as possible)")
    p.add_argument("--event-time", metavar="PATH",
                   help="the item's element (or attribute) time windows read (e.g. det_time, @t): while the stream is "
                        "idle its super-peer advances event time with watermarks, so time windows "
                        "close without waiting for the next item")
    p.add_argument("--event-time-rate", type=float, default=1.0, metavar="UNITS_PER_S",
                   help="with --event-time: how many of its units pass per second (default 1)")
    p.add_argument("--count", type=int, help="publish at most N items")
    p.add_argument("--json", action="store_true",
                   help="for scripts: at the end, what was published as a JSON object on stdout")
    p.add_argument("--keep-open", action="store_true",
                   help="do not end the stream after the last item: publish more later (e.g. the "
                        "rest of the same input with --resume)")
    p.add_argument("--history", metavar="BOUND",
                   help="how much of the stream's past its super-peer keeps for subscriptions over "
                        "it (subscribe --since): items ('100000'), a size ('64MB'), a duration "
                        "('10m', '1h30m'), several with commas; default: the super-peer's (serve --history)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted publish of the same input: skip the items the "
                        "super-peer already has (the stream stays open after a lost connection or "
                        "Ctrl-C); its batches are numbered, so a lost reply is retried safely")
    p.set_defaults(func=cmd_publish)
