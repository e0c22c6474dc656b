"""``streamglobe query check|explain|run|match``: WXQuery files in, verdicts and results out."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from thinpeer.cli.command import EXIT_ERROR, EXIT_OK, AddCommand, CliError

if TYPE_CHECKING:
    from sharing.analysis import Analysis
    from wxquery.stream_document import StreamDocument


def read_query(path: str) -> str:
    """The text of a query file (``-``: standard input), or a ``CliError`` that says why not."""
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: error: no such query file") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: error: query file is not UTF-8 text ({exc.reason} at byte "
                       f"{exc.start})") from None
    except OSError as exc:
        raise CliError(f"{path}: error: cannot read query file: {exc.strerror}") from None


def analyze_file(path: str) -> Analysis:
    from sharing.analysis import analyze
    from wxquery.errors import WXQueryError

    text = read_query(path)
    try:
        analysis = analyze(text)
    except WXQueryError as exc:
        raise CliError(exc.format(path)) from None
    for warning in analysis.warnings:
        print(warning.format(path), file=sys.stderr)
    return analysis


def cmd_query_check(args: argparse.Namespace) -> int:
    if not args.json:
        analyze_file(args.file)
        print("ok")
        return EXIT_OK
    from sharing.analysis import analyze
    from wxquery.errors import WXQueryError

    try:  # (a file that cannot be read is still an error on stderr: it is not a verdict on a query)
        analysis = analyze(read_query(args.file))
    except WXQueryError as exc:
        print(json.dumps({"file": args.file, "ok": False, "line": exc.position.line,
                          "column": exc.position.column, "error": exc.message}))
        return EXIT_ERROR
    print(json.dumps({"file": args.file, "ok": True, "warnings": [
        {"line": w.position.line, "column": w.position.column, "warning": w.message} for w in analysis.warnings]}))
    return EXIT_OK


def cmd_query_explain(args: argparse.Namespace) -> int:
    analysis = analyze_file(args.file)
    json.dump(analysis.properties.to_json(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return EXIT_OK


def input_documents(specs: list[str]) -> StreamDocument | dict[str, StreamDocument]:
    """The ``--input`` documents: one unnamed document, or one per stream name."""
    from wxquery.stream_document import StreamDocument

    if not specs:
        raise CliError("error: give the stream document with --input DOC.xml "
                       "(or --input NAME=DOC.xml per stream, '-' for standard input)")
    named: dict[str, StreamDocument] = {}
    default = None
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if path == "-":
            doc = StreamDocument.from_bytes(sys.stdin.buffer.read(), "<stdin>")
        else:
            if not Path(path).is_file():
                raise CliError(f"{path}: error: no such input file")
            doc = StreamDocument.from_file(path)
        if name:
            named[name] = doc
        else:
            default = doc
    if default is not None and not named:
        return default
    if default is not None:
        raise CliError("error: mix of named (NAME=DOC) and unnamed --input; name every input")
    return named


def cmd_query_run(args: argparse.Namespace) -> int:
    from wxquery.errors import InputDocumentError
    from wxquery.evaluator import evaluate

    analysis = analyze_file(args.file)
    inputs = input_documents(args.input)
    evaluation = evaluate(analysis.checked, inputs, lateness=args.lateness)
    # Results are spooled so that a malformed input never leaves half a document on stdout.
    with tempfile.SpooledTemporaryFile(max_size=64 << 20, mode="w+", encoding="utf-8") as out:
        root = evaluation.root_name
        empty = True
        try:
            for text in evaluation.serialized_items():
                if empty:
                    out.write(f"<{root}>")
                    empty = False
                out.write(text)
        except InputDocumentError as exc:
            raise CliError(str(exc)) from None
        out.write(f"<{root}/>\n" if empty else f"</{root}>\n")
        out.seek(0)
        shutil.copyfileobj(out, sys.stdout)
    for warning in evaluation.stats.warnings():
        print(f"warning: {warning}", file=sys.stderr)
    return EXIT_OK


def match_texts(old_text: str, new_text: str, single: str = "") -> dict:
    """``{"shareable", "reason"}``, plus ``"error": True`` when a query does not analyse.
    ``single``: the elements that occur once per item, comma-separated ("all": every one), as
    a super-peer's statistics would know them; any other element may occur more than once."""
    from sharing.analysis import analyze
    from sharing.matching import Repetition, match_subscriptions
    from sharing.repetition import owner
    from wxquery.errors import WXQueryError

    analyses = []
    for label, text in (("old", old_text), ("new", new_text)):
        try:
            # Unsatisfiable predicates are legitimate here: an unsatisfiable P' implies any P.
            analyses.append(analyze(text, require_satisfiable=False))
        except WXQueryError as exc:
            return {"shareable": False, "reason": f"{label} query: {exc}", "error": True}
    paths = {p.strip() for p in single.split(",") if p.strip()}
    if paths == {"all"}:  # (every element either query names, and those their attributes are of)
        paths = {q for a in analyses for i in a.properties.inputs for p in i.projection.referenced
                 for q in (p, owner(p))}
    repetition = Repetition(frozenset(paths))
    match = match_subscriptions(analyses[0].properties, analyses[1].properties, repetition)
    return {"shareable": match.shareable, "reason": match.reason}


def cmd_query_match(args: argparse.Namespace) -> int:
    if args.batch:
        try:
            lines = (sys.stdin if args.batch == "-" else open(args.batch, encoding="utf-8")).read().splitlines()
        except OSError as exc:
            raise CliError(f"{args.batch}: error: cannot read: {exc.strerror}") from None
        failures = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                pair = json.loads(line)
                result = match_texts(pair["old"], pair["new"], args.single_valued)
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                result = {"shareable": False, "reason": f"line {number}: not a JSON object with "
                          f"\"old\" and \"new\" query texts ({exc})", "error": True}
            failures += bool(result.pop("error", False))
            print(json.dumps(result), flush=True)
        if failures:
            print(f"warning: {failures} line(s) could not be matched (see their reasons)",
                  file=sys.stderr)
        return EXIT_OK
    if not args.old or not args.new:
        raise CliError("error: give OLD and NEW query files, or --batch FILE.jsonl")
    result = match_texts(read_query(args.old), read_query(args.new), args.single_valued)
    failed = result.pop("error", False)
    print(json.dumps(result))
    return EXIT_ERROR if failed else EXIT_OK


def register(add_command: AddCommand) -> None:
    """``query`` and its actions."""
    query = add_command("query", help="check, explain and run WXQuery subscriptions")
    query_commands = query.add_subparsers(dest="query_command", metavar="ACTION", required=True)
    p = query_commands.add_parser("check", help="check a query; prints ok or FILE:LINE:COL: error")
    p.add_argument("file", help="the WXQuery file ('-' for standard input)")
    p.add_argument("--json", action="store_true",
                   help='the verdict as JSON on stdout: {"file", "ok"} and, on an error, "line", "column", "error"')
    p.set_defaults(func=cmd_query_check)
    p = query_commands.add_parser("explain", help="print the query's properties as JSON")
    p.add_argument("file")
    p.set_defaults(func=cmd_query_explain)
    p = query_commands.add_parser("run", help="evaluate a query over a finite stream document")
    p.add_argument("file")
    p.add_argument("--input", action="append", default=[], metavar="[NAME=]DOC.xml",
                   help="the stream document ('-' for stdin); NAME=DOC per stream when the query "
                        "reads several streams")
    p.add_argument("--lateness", type=float, default=0.0, metavar="UNITS",
                   help="how far (in reference units) items may arrive out of order in time "
                        "windows before they are dropped and counted (default 0)")
    p.set_defaults(func=cmd_query_run)

    p = query_commands.add_parser("match", help="can a stream produced for OLD serve NEW? (JSON)")
    p.add_argument("old", nargs="?", help="the query whose stream exists")
    p.add_argument("new", nargs="?", help="the new query")
    p.add_argument("--batch", metavar="FILE.jsonl",
                   help='lines {"old": "<query text>", "new": "<query text>"}; one JSON answer '
                        "per line, in order ('-' for stdin)")
    p.add_argument("--single-valued", default="", metavar="PATHS",
                   help="item-relative element paths that occur at most once per item, comma-separated, "
                        "or 'all' (default: none known, as before a stream's first items: comparisons of "
                        "elements are then taken one at a time, as XQuery compares repeated elements)")
    p.set_defaults(func=cmd_query_match)
