"""``streamglobe photons generate|from-fits``: photon stream documents on standard output."""

from __future__ import annotations

import argparse
import sys

from streamglobe.units import parse_item_rate
from thinpeer.cli.command import EXIT_OK, AddCommand, CliError


def cmd_photons_generate(args: argparse.Namespace) -> int:
    from photons.generator import generate, write_document

    if args.count < 0:
        raise CliError("error: --count must not be negative")
    if args.rate <= 0:
        raise CliError("error: --rate must be positive")
    write_document(sys.stdout, generate(args.count, args.seed, args.rate, args.start_time))
    return EXIT_OK


def cmd_photons_from_fits(args: argparse.Namespace) -> int:
    from photons.fits_events import EventListError, write_fits_document

    def progress(n: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{n} photons converted", end="", file=sys.stderr, flush=True)

    try:
        report = write_fits_document(args.file, sys.stdout, limit=args.limit, progress=progress)
    except EventListError as exc:
        raise CliError(f"{args.file}: error: {exc}") from None
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"{args.file}: {report.photons_out} photons from {report.events_in} events "
          f"(sky from {report.sky_columns}, energy in {report.energy_unit or 'n/a'})",
          file=sys.stderr)
    for reason, n in report.skipped.items():
        print(f"warning: {n} event(s) skipped: {reason}", file=sys.stderr)
    return EXIT_OK


def register(add_command: AddCommand) -> None:
    photons = add_command("photons", help="produce photon stream documents")
    photon_commands = photons.add_subparsers(dest="photons_command", metavar="ACTION",
                                             required=True)
    p = photon_commands.add_parser("generate", help="seeded synthetic photons on stdout")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rate", type=parse_item_rate, default=10.0, help="mean photons per second (default 10)")
    p.add_argument("--start-time", type=float, default=0.0, help="det_time origin in seconds")
    p.set_defaults(func=cmd_photons_generate)
    p = photon_commands.add_parser("from-fits", help="convert a FITS X-ray event list")
    p.add_argument("file")
    p.add_argument("--limit", type=int, default=None, help="convert at most N events (by time)")
    p.set_defaults(func=cmd_photons_from_fits)
