"""A newly registered stream told to the other super-peers, which answer with the subscriptions
registered there that were waiting for it (``ControlPlane.register_stream``).

The peers told, in parallel, before the publisher's registration is answered, are the stream
name's ``HOMES`` catalogue homes and those whose subscriptions may wait for it. The homes are
the same for every super-peer (rendezvous hashing over the topology's peers): a super-peer asked
for a stream it does not know yet — a subscription naming it, a plan reserving it — asks them
(``find_original``), a constant number of calls whatever the network's size. As for waiting:
each super-peer's record names the streams its waiting subscriptions wait for
(``recovery.membership``: pushed by gossip the moment one begins to wait), and a peer whose
record is not known yet is told too. The others learn the stream from its super-peer's record,
by gossip: a registration no longer calls every super-peer. A subscription that began to wait
while the stream was being registered, before its peer's record came, is activated by its own
super-peer once gossip brings the stream (``ControlPlane.activate_late``)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from sharing.stream_table import NetworkStream

from .peer_link import PeerLink

HOMES = 3  # super-peers told of every stream of a name, whom the others ask (``find_original``)
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


def everyone_else(state) -> Callable[[str], list[str]]:
    """Every other super-peer (where no records tell who waits: an in-process network)."""
    return lambda name: [p for p in state.backbone.peers if p != state.id]


def waited_for(state, subscriptions: Mapping) -> list[str]:
    """The streams the waiting ones of ``subscriptions`` wait for (what this peer's record says)."""
    with state.lock:
        return sorted({n for r in subscriptions.values() if r.plan is None and not r.error for n in r.waiting_for})


def homes(name: str, peers: Iterable[str], k: int = HOMES) -> list[str]:
    """The ``k`` peers that hold the catalogue entry of stream ``name``: the highest hashes of
    (name, peer), so every super-peer finds the same ones and a peer added to the topology
    takes over only the names it now hashes highest for (rendezvous hashing)."""
    def weight(peer: str) -> bytes:
        return hashlib.blake2b(f"{name}\0{peer}".encode(), digest_size=8).digest()
    return sorted(set(peers), key=weight, reverse=True)[:k]


def find_original(state, link: PeerLink, name: str) -> NetworkStream | None:
    """The original stream ``name``: known here, or told by one of its homes (then known here)."""
    with state.lock:
        known = state.known_originals.get(name)
    if known is not None:
        return known
    for peer in homes(name, state.backbone.peers):
        found = link.find_stream(peer, name) if peer != state.id else None
        if found is not None and found.original and found.id == name:
            with state.lock:
                state.heard_of.setdefault(name, time.time())
                return state.known_originals.setdefault(name, found)
    return None


def missing_streams(state, link: PeerLink, analysis) -> list[str]:
    """The input streams of ``analysis`` that no super-peer has registered (those not known
    here are asked of their homes first)."""
    for name in state.missing_streams(analysis):
        find_original(state, link, name)
    return state.missing_streams(analysis)
