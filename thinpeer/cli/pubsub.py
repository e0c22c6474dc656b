"""``streamglobe publish|subscribe|unsubscribe|status``: a thin peer talking to one super-peer.

All of them go through the client library (``thinpeer.client``); ``subscribe`` reads with its
``result_batches`` loop, so resuming and idle timeouts work the same as for library users.

``publish`` sends every child element of the document's root, in order: the super-peer checks
each (an element that is not an item of the stream is rejected there and reported with its
number, never skipped silently). ``subscribe`` saves the offset it has read up to in a per-user
state directory (``$STREAMGLOBE_STATE_DIR``, else ``$XDG_STATE_HOME/streamglobe``, else
``~/.local/state/streamglobe``), so ``--resume`` continues where it stopped from any working
directory, and refuses to guess when it has no saved offset.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import sys
import time
from typing import TYPE_CHECKING, BinaryIO, Iterator

from streamglobe.units import parse_duration, parse_item_rate
from thinpeer.cli.command import EXIT_ERROR, EXIT_OK, AddCommand, CliError, thin_error
from thinpeer.cli.offsets import save_offset, saved_offset
from thinpeer.cli.query import read_query

PAST_EVERY_S = 2.0  # how often a subscription over the past prints how far its replay has come

if TYPE_CHECKING:
    from thinpeer.client import PublishSummary, SuperPeerClient


def _client(args: argparse.Namespace) -> SuperPeerClient:
    from thinpeer.client import SuperPeerClient
    from thinpeer.credentials import Credentials, CredentialsError

    try:
        return SuperPeerClient(args.superpeer, credentials=Credentials.resolve(args.ca, args.token))
    except CredentialsError as exc:
        raise CliError(f"error: {exc}") from None


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """Where the super-peer is, and how to prove who we are (``thinpeer.credentials``)."""
    p.add_argument("--superpeer", required=True, metavar="HOST:PORT")
    p.add_argument("--ca", metavar="FILE",
                   help="the backbone's CA certificate (default $STREAMGLOBE_CA; neither: plaintext, "
                        "for a network started with --insecure)")
    p.add_argument("--token", metavar="TOKEN",
                   help="your token, or @FILE (default $STREAMGLOBE_TOKEN; streamglobe token issue)")


class DocumentItems:
    """The child elements of a stream document's root as item texts, in document order.

    Elements that are not named like items are yielded too (the super-peer rejects them with
    their number); non-blank text between the children cannot be sent and is counted in
    ``stray_text``. Comments and processing instructions are not data and are left out.
    """

    def __init__(self, name: str, opened, item: str) -> None:
        self.name = name
        self.opened = opened
        self.item = item
        self.stray_text = 0

    def __iter__(self) -> Iterator[str]:
        from lxml import etree

        from wxquery.errors import InputDocumentError

        def text(el) -> str:
            if el.tail and el.tail.strip():
                self.stray_text += 1
            return etree.tostring(el, encoding="unicode", with_tail=False)

        with self.opened() as f:
            # only items reach Python as events; what lies between them is read off the tree
            parser = etree.iterparse(f, events=("end",), tag=self.item, remove_comments=True,
                                     remove_pis=True, huge_tree=True, resolve_entities=False,
                                     no_network=True)
            last = None
            try:
                for _, el in parser:
                    root = el.getparent()
                    if root is None or root.getparent() is not None:
                        continue  # named like an item, but deeper in the document
                    if last is None and root.text and root.text.strip():
                        self.stray_text += 1
                    for before in reversed(list(el.itersiblings(preceding=True))):
                        if before is not last:
                            yield text(before)
                        root.remove(before)
                    yield text(el)
                    last = el
            except etree.XMLSyntaxError as exc:
                line, column = exc.position if exc.position else (None, None)
                raise CliError(str(InputDocumentError(f"malformed XML: {exc.msg}", self.name, line,
                                                      column))) from None
            rest = last.itersiblings() if last is not None else iter(parser.root)
            for after in list(rest):
                yield text(after)


def _document_items(path: str, item: str | None = None) -> tuple[str, str, DocumentItems]:
    """(root, item, the root's children as item texts) of a stream document; the item name is
    the first child's unless given."""
    from lxml import etree

    from wxquery.errors import InputDocumentError
    from wxquery.stream_document import StreamDocument

    try:
        if path == "-":
            data = sys.stdin.buffer.read()
            StreamDocument.from_bytes(data, "<stdin>")
        else:
            StreamDocument.from_file(path)
    except InputDocumentError as exc:  # a missing file: a message, not a traceback
        raise CliError(str(exc)) from None

    def opened() -> BinaryIO:
        return io.BytesIO(data) if path == "-" else open(path, "rb")

    try:
        # Only the first two start tags are read here, to name the stream's root and items.
        with opened() as f:
            root = first = None
            for event, el in etree.iterparse(f, events=("start",), resolve_entities=False, no_network=True,
                                             load_dtd=False):
                if root is None:
                    root = el.tag
                elif first is None:
                    first = el.tag
                    break
    except etree.XMLSyntaxError as exc:
        raise CliError(f"{path}:{exc.position[0]}:{exc.position[1]}: error: malformed XML: {exc.msg}") from None
    item = item or first
    if root is None or item is None:
        raise CliError(f"{path}: error: no items: expected <root><item>…</item>…</root>")
    return root, item, DocumentItems("<stdin>" if path == "-" else path, opened, item)


def cmd_publish(args: argparse.Namespace) -> int:
    from photons.generator import generate
    from thinpeer.client import TRANSIENT, ThinPeerError

    if args.input is None and not args.synthetic:
        raise CliError("error: give --input DOC.xml or --synthetic")
    document = None
    if args.input is not None:
        root, item, document = _document_items(args.input, args.item)
        items: Iterator[str] = iter(document)
    else:
        root, item = "photons", "photon"
        items = (p.to_xml() for p in generate(args.count, args.seed, rate=10.0))
    started = time.monotonic()

    def progress(summary: PublishSummary) -> None:
        elapsed = time.monotonic() - started
        again = f", {summary.duplicates} already there" if summary.duplicates else ""
        print(f"\r{args.stream}: {summary.accepted} items published, {summary.rejected} rejected{again} "
              f"({summary.accepted / max(elapsed, 1e-9):,.0f} items/s)", end="", file=sys.stderr, flush=True)

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
            # resuming, the input's item N is the stream's item N: what the super-peer has is
            # skipped, and the batches are numbered, so one whose reply is lost is sent again
            # safely; otherwise the items are appended, unnumbered
            position = have if args.resume else None
            items = itertools.islice(items, position or 0, args.count)
            if args.resume:
                print(f"{args.stream}: resuming at item {have} (the super-peer has items 0..{have - 1})"
                      if have else f"{args.stream}: the super-peer has no items yet; publishing from item 0",
                      file=sys.stderr, flush=True)
            try:
                summary = client.publish(args.stream, items, rate=args.rate, progress=progress, position=position)
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
    stray = document.stray_text if document is not None else 0
    if stray:
        print(f"warning: {args.input}: text outside the <{item}> items in {stray} place(s) of the "
              "document was not published", file=sys.stderr)
    ended = ("the stream stays open (continue with --resume, or a new input)" if args.keep_open
             else "the stream closed")
    print(f"{args.stream}: {summary.accepted} items published and {ended}; "
          f"{summary.rejected} rejected", file=sys.stderr)
    return EXIT_OK if not summary.rejected and not stray else EXIT_ERROR


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
    since_s = args.since
    if since_s is not None and args.from_start:
        raise CliError("error: give --since or --from-start, not both")
    try:
        with _client(args) as client:
            if args.resume:
                sid = args.resume
                offset = args.offset if args.offset is not None else saved_offset(sid)
                print(f"resuming subscription {sid} at offset {offset}", file=sys.stderr)
            else:
                if not args.query:
                    raise CliError("error: give --query FILE (or --resume ID)")
                reply = client.subscribe(read_query(args.query), args.strategy,
                                         wait_for_streams=not args.no_wait, from_start=args.from_start,
                                         since_s=since_s, approximate=args.approximate,
                                         confidence=args.confidence)
                sid, offset = reply.subscription, 0
                save_offset(sid, 0)
                print(f"subscription {sid}", file=sys.stderr)
                if reply.history:
                    print(f"note: {reply.history}", file=sys.stderr)
                if reply.sample > 1:
                    print(f"note: the network cannot carry this subscription whole: it reads a 1/{reply.sample} "
                          f"sample of its stream; counts and sums are scaled estimates", file=sys.stderr)
                print(reply.description, file=sys.stderr, flush=True)
            approximations: list[str] = []
            written, root, closed = _write_results(client, sid, offset, args.count, args.timeout, approximations)
            sys.stdout.write(f"{merged(approximations)}</{root}>\n")
            why = "the stream closed" if closed else (
                "count reached" if args.count is not None and written >= args.count else "timeout")
            print(f"{written} result item(s); stopped: {why}; resume with --resume {sid}",
                  file=sys.stderr)
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    return EXIT_OK


def _write_results(client: SuperPeerClient, sid: str, offset: int, count: int | None,
                   timeout: float | None, approximations: list[str] | None = None) -> tuple[int, str, bool]:
    """Stream results to stdout from ``offset`` until the stream closes, ``count`` items were
    written or nothing came for ``timeout`` seconds; (items written, root, closed). The reads'
    ``<sg:approximation>`` elements (a subscription on a sample) go to ``approximations``.

    The opening tag is written with the first read (even an empty one, or with ``count`` 0);
    the caller closes it. After every read that brought items, the next offset is saved for
    ``--resume``; once everything of an ended stream is written, the read is confirmed so the
    super-peer can release the results.
    """
    written = 0
    if count == 0:  # nothing to print, but a well-formed (empty) result document
        root = client.read(sid, offset, max_items=1, wait_ms=0).root or "results"
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
            sys.stdout.write(f"<{root}>")
        items = batch.items if count is None else batch.items[: count - written]
        if approximations is not None and batch.approximation:
            approximations.append(batch.approximation)
        for item in items:
            sys.stdout.write(item)
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
    p = add_command("publish", help="register a stream at a super-peer and publish it")
    add_connection_options(p)
    p.add_argument("--stream", required=True)
    p.add_argument("--input", metavar="DOC.xml", help="stream document ('-' for stdin)")
    p.add_argument("--synthetic", action="store_true", help="generated photons")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=parse_item_rate, metavar="ITEMS_PER_S",
                   help="items per second (default: as fast as possible)")
    p.add_argument("--event-time", metavar="PATH",
                   help="the item's element time windows read (e.g. det_time): while the stream is "
                        "idle its super-peer advances event time with watermarks, so time windows "
                        "close without waiting for the next item")
    p.add_argument("--event-time-rate", type=float, default=1.0, metavar="UNITS_PER_S",
                   help="with --event-time: how many of its units pass per second (default 1)")
    p.add_argument("--count", type=int, help="publish at most N items")
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
    p.add_argument("--item", metavar="NAME",
                   help="the item element's name (default: the first child of the root's)")
    p.set_defaults(func=cmd_publish)

    p = add_command("subscribe", help="register a subscription and print its results")
    add_connection_options(p)
    p.add_argument("--query", metavar="FILE")
    p.add_argument("--count", type=int, help="stop after N result items (0: only subscribe)")
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
    p.add_argument("--no-wait", action="store_true",
                   help="fail if a stream the query reads is not registered yet (default: wait for it)")
    p.set_defaults(func=cmd_subscribe)

    p = add_command("unsubscribe", help="remove a subscription")
    add_connection_options(p)
    p.add_argument("subscription")
    p.set_defaults(func=cmd_unsubscribe)

    p = add_command("status", help="a super-peer's streams, operators, routes, traffic (JSON)")
    add_connection_options(p)
    p.set_defaults(func=cmd_status)
