"""The heartbeat rounds of one super-peer: hear every other peer each interval, then do what
depends on having heard them.

A round asks every other super-peer how it is (``Transport.heartbeat_round``): the answers and
silences go to the failure detector (``failure_detector``), and each answer brings the usage the
peer reports (what planners here read of it), the streams registered there (a peer that just
started learns them so) and the first item of each stream its subscriptions may still replay
(what the history here must keep). Then the round's jobs run, each on its own so that one that
fails does not keep the others from running: re-planning broken routes (``replanning``),
watermarks of idle streams, trimming the history, activating subscriptions whose stream's
announcement was missed. A heartbeat's answer is ``reply``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from sharing.serialization import stream_to_json
from sharing.stream_table import NetworkStream

from ..peer_state import PeerState
from .failure_detector import FailureDetector

log = logging.getLogger("streamglobe.superpeer")


class HeartbeatTransport(Protocol):
    detector: FailureDetector
    epoch: str  # this process's incarnation, as the others hear it

    def heartbeat_round(self, peers: list[str]) -> dict[str, tuple[dict, list[NetworkStream], dict[str, int]]]:
        """(usage report, originals registered there, subscriptions' pins) per peer that answered."""
        ...


class Heartbeats:
    def __init__(self, state: PeerState, transport: HeartbeatTransport,
                 jobs: Sequence[tuple[str, Callable[[], None]]], own_pins: Callable[[], dict[str, int]]) -> None:
        """``jobs``: what runs after each round, in order, by name (for the log of a failure);
        ``own_pins``: the first item of each stream the subscriptions here may replay."""
        self.state = state
        self.transport = transport
        self.jobs = list(jobs)
        self.own_pins = own_pins
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"hb-{self.state.id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self.transport.detector.settings.interval_s):
            try:
                self.once()
            except Exception:  # noqa: BLE001 - failure detection must go on, whatever failed
                log.exception("%s: a heartbeat round failed", self.state.id)

    def once(self) -> None:
        """One round: hear from every peer, then run the jobs."""
        state, started = self.state, time.time()
        for peer, (usage, originals, pins) in self.transport.heartbeat_round(list(state.backbone.peers)).items():
            if usage:
                state.peer_usage[peer] = usage
            state.peer_pins[peer] = pins
            state.round_heard[peer] = started  # its pins are those of a reply made after this
            with state.lock:
                for s in originals:  # (a peer speaks for the streams registered there only)
                    if s.origin == peer and s.original and s.id not in state.known_originals:
                        state.known_originals[s.id] = s
                        state.heard_of[s.id] = time.time()
        for name, job in self.jobs:
            try:
                job()
            except Exception:  # noqa: BLE001 - the next jobs must still run
                log.exception("%s: %s failed after a heartbeat round", state.id, name)

    def reply(self) -> tuple[str, str, list[str], str, str]:
        """(usage, originals registered here, the peers this one hears, this process's
        incarnation, the first item of each stream the subscriptions here may replay)."""
        state = self.state
        with state.lock:
            originals = [stream_to_json(s) for n in state.originals if (s := state.table.get(n)) is not None]
            pins = self.own_pins()
        return (json.dumps(state.usage_report()), json.dumps(originals),
                self.transport.detector.hearing(), self.transport.epoch, json.dumps(pins))
