"""A newly registered stream told to the other super-peers, which answer with the
subscriptions registered there that were waiting for it (``ControlPlane.register_stream``).

Every peer is told, in parallel, before the publisher's registration is answered: a waiting
subscription may be at any of them. (Issue 37: this is one of the calls that still grows with
the backbone; the catalogue of original streams that the heartbeats carry is the way out.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from sharing.stream_table import NetworkStream

from .peer_link import PeerLink

ANNOUNCE_TIMEOUT_S = 30
ANNOUNCE_RETRIES = (0.0, 0.1, 0.3)  # pauses before each try of an announcement (a peer down costs 0.4 s)


def announce_to(link: PeerLink, peers: Iterable[str], stream: NetworkStream) -> list[tuple[float, str, str]]:
    """Tell ``peers`` of ``stream``: the waiting subscriptions they answer with, as
    (registered at, peer, subscription). A peer that does not answer after the retries (down,
    or its channel reconnecting each time) answers nothing: its subscriptions wait for a
    heartbeat to tell it (``ControlPlane.activate_late``)."""
    waiting: list[tuple[float, str, str]] = []

    def announce(peer: str) -> None:
        for pause in ANNOUNCE_RETRIES:
            time.sleep(pause)
            answer = link.announce(peer, stream)
            if answer is not None:
                waiting.extend((w.registered_at, peer, w.subscription) for w in answer)
                return

    threads = [threading.Thread(target=announce, args=(peer,), daemon=True) for peer in peers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=ANNOUNCE_TIMEOUT_S)
    return waiting
