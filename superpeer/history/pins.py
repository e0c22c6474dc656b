"""What the history of a stream registered here must keep: its **pins**.

A stream's log is trimmed to its history bound (``retention``), but never past an item that
something may still read: where a subscription here may be replayed from after a failure
(``bounds.pins_of``), where a plan committed here for another peer's subscription began (until
that peer reports its own pins in a heartbeat), what the archive has not written yet, what the
copies being filled from the log still need, and what the other peers report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ..peer_state import PeerState
from .archive.writer import Archiver
from .bounds import pins_of
from .log_replay import LogReplays
from .retention import Retention

LOCAL_COMMIT_PIN_S = 10.0  # a plan committed here by this peer: its record holds the pins by then
log = logging.getLogger("streamglobe.superpeer")


class HistoryPins:
    def __init__(self, state: PeerState, subscriptions: Mapping, retention: Retention, replays: LogReplays,
                 archiver: Archiver | None = None) -> None:
        """``subscriptions``: the subscriptions registered here (the control plane's, by id)."""
        self.state = state
        self.subscriptions = subscriptions
        self.retention = retention
        self.replays = replays
        self.archiver = archiver

    def own(self) -> dict[str, int]:
        """The first item of each stream the subscriptions registered here may replay (what a
        heartbeat reports to the streams' super-peers)."""
        return pins_of(list(self.subscriptions.values()))

    def local(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        """(with the lock held) The first item of each stream registered here that something
        here may still read: this peer's subscriptions, plans committed here whose subscriber's
        peer has not been heard since, the archive's next item; and the copies being filled."""
        own = self.own()
        now = time.time()
        for sid, (at, pins) in list(self.state.commit_pins.items()):
            peer = sid.split("~", 1)[0].rsplit("-", 1)[0]
            if (self.state.round_heard.get(peer, 0.0) > at) or (peer == self.state.id and now - at > LOCAL_COMMIT_PIN_S):
                del self.state.commit_pins[sid]
                continue
            for name, start in pins.items():
                own[name] = min(own.get(name, start), start)
        if self.archiver is not None:  # what is not archived yet stays in the log
            for name in self.state.originals:
                at = self.archiver.position(name)
                own[name] = min(own.get(name, at), at)
        return own, self.replays.needed()

    def trim(self) -> None:
        """Trim the logs of the streams registered here to their history bounds, keeping what
        any peer's subscriptions may still replay."""
        others = [p for p in self.state.backbone.peers if p != self.state.id]
        trimmed = self.retention.trim(self.local, {p: self.state.peer_pins.get(p) for p in others})
        for name, n in trimmed.items():
            log.info("%s: trimmed %d items of %s's log (history %s)", self.state.id, n, name,
                     self.retention.bound(self.state.originals[name]))
