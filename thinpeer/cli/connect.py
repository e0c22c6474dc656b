"""``streamglobe connect voevent``: a VOEvent broker's events, live, as a StreamGlobe stream.

It subscribes to the broker's broadcasting port over VTP and publishes every event as an item
(the shape of ``thinpeer.voevent.shape``) to ``--stream`` at ``--superpeer``, until Ctrl-C or
SIGTERM, printing progress on stderr. Its journal (``--state-dir``; by default one per stream in
the user's thin-peer state directory) makes a restart publish no event twice
(``thinpeer.voevent.bridge``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from thinpeer.cli.command import EXIT_OK, AddCommand, CliError, thin_error
from thinpeer.cli.connection import _client, add_connection_options

PROGRESS_EVERY_S = 5.0  # at most this often a progress line, and only when something changed


def register(add_command: AddCommand) -> None:
    p = add_command("connect", help="bring an outside source's data in as a stream (voevent: a VTP broker)")
    kinds = p.add_subparsers(dest="kind", metavar="SOURCE", required=True)
    v = kinds.add_parser("voevent", help="subscribe to a VOEvent broker (VTP) and publish every event "
                                         "as an item of a stream, until stopped")
    add_connection_options(v)
    v.add_argument("--remote", required=True, metavar="BROKER:PORT",
                   help="the broker's broadcasting port (VTP's default is 8099)")
    v.add_argument("--stream", required=True, metavar="NAME",
                   help="the stream to publish to (root <voevents>, items <voevent>)")
    v.add_argument("--local-ivo", metavar="IVORN", default="ivo://streamglobe/thinpeer",
                   help="the IVORN this subscriber answers the broker with")
    v.add_argument("--state-dir", type=Path, metavar="DIR",
                   help="where the journal of published events is kept (default: per stream, in "
                        "$STREAMGLOBE_STATE_DIR or ~/.local/state/streamglobe)")
    v.add_argument("--history", default="", metavar="BOUND",
                   help="how much of the stream's past its super-peer keeps ('10m', '100000', '64MB')")
    v.set_defaults(func=cmd_connect_voevent)


def default_state_dir(stream: str) -> Path:
    from thinpeer.cli.offsets import state_dir
    from thinpeer.formats.names import escape_name

    return state_dir() / "connect" / f"voevent-{escape_name(stream)}"


def cmd_connect_voevent(args: argparse.Namespace) -> int:
    from thinpeer.client import ThinPeerError
    from thinpeer.voevent.bridge import VoEventBridge, describe
    from thinpeer.voevent.transport import DEFAULT_BROADCAST_PORT, parse_address

    try:
        parse_address(args.remote, DEFAULT_BROADCAST_PORT)
    except ValueError as exc:
        raise CliError(f"error: --remote: {exc}") from None
    if not args.local_ivo.startswith("ivo://"):
        raise CliError(f"error: --local-ivo {args.local_ivo!r} is not an IVORN (ivo://…)")
    state = args.state_dir or default_state_dir(args.stream)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    stopped = threading.Event()

    def stop(signum, frame) -> None:
        if stopped.is_set():
            raise KeyboardInterrupt
        stopped.set()
        say("stopping (again to stop at once)")

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with _client(args) as client:
            bridge = VoEventBridge(client, args.stream, args.remote, state, local_ivo=args.local_ivo,
                                   history=args.history, say=say)
            bridge.start()
            say(f"publishing the events of broker {args.remote} to stream {args.stream!r} at "
                f"{args.superpeer} from position {bridge.progress().next_position} (journal in {state})")
            shown = None
            while not stopped.wait(PROGRESS_EVERY_S):
                if bridge.subscriber.error is not None:
                    break
                now = bridge.progress()
                if now != shown:
                    say(describe(now))
                    shown = now
            bridge.stop()
            bridge.join()
            say(f"stopped: {describe(bridge.progress())}")
    except ThinPeerError as exc:
        raise thin_error(exc) from None
    except OSError as exc:  # the state directory
        raise CliError(f"error: {exc}") from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return EXIT_OK
