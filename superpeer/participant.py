"""The participant side of the control plane: what a super-peer does when another one (or
itself) plans and installs a subscription.

* ``lookup`` / ``statistics``: the stream property table for an input, and the statistics of a
  stream registered here — what a planning peer fetches before it plans;
* ``reserve`` → ``commit`` | ``abort``: the two phases of an installation. A reservation checks
  this peer's load capacity and the bandwidth of its outgoing links against what is installed,
  what other transactions hold reserved, and what neighbours report sending on shared links;
  commit adds the streams to the table, installs their operators on the executor and makes the
  subscription a user of the reused streams (and their ancestors) present here;
* ``remove`` / ``truncate``: unsubscribe releases what nothing uses any more, and a route that
  now ends at a peer that does not need the stream is cut back one peer at a time.
"""

from __future__ import annotations

import threading

from sharing.properties import InputStream
from sharing.serialization import statistics_to_json
from sharing.stream_table import NetworkStream

from .errors import NodeError
from .executors import Executor
from .peer_channels import PeerLink
from .peer_state import PeerState


class Participant:
    def __init__(self, state: PeerState, executor: Executor, link: PeerLink,
                 background: bool = True) -> None:
        self.state = state
        self.executor = executor
        self.link = link
        self.background = background  # cut routes in a thread (False in unit tests)
        self.pending: dict[str, list[NetworkStream]] = {}  # transaction -> reserved streams

    # ------------------------------------------------------------------ planning reads

    def lookup(self, input_stream: InputStream) -> tuple[list[NetworkStream], dict]:
        return self.state.local_streams(input_stream), self.state.own_usage().to_json(self.state.id)

    def statistics(self, name: str) -> dict:
        state = self.state.originals.get(name)
        if state is None:
            raise NodeError("NOT_FOUND", f'stream "{name}" is not registered at {self.state.id}')
        with self.state.lock:
            return {**statistics_to_json(state.statistics), "closed": state.closed}

    # ------------------------------------------------------------------ two phases

    def reserve(self, txn: str, streams: list[NetworkStream], subscription: str,
                target: str) -> tuple[bool, str]:
        here = self.state.id
        backbone = self.state.backbone
        with self.state.lock:
            used = self.state.table.usage_at(here, [s for held in self.pending.values() for s in held])
            capacity = backbone.peers[here].load_capacity
            add = sum(s.usage.peers.get(here, 0.0) for s in streams)
            if used.load + add > capacity * (1 + 1e-9):
                return False, (f"{here} would need {100 * (used.load + add) / capacity:.1f}% of its "
                               "load capacity")
            for s in streams:
                for n in s.next_hops(here):
                    bw = backbone.links[frozenset((here, n))].bandwidth
                    need = used.links.get(n, 0.0) + self.state.reported_link(n) + s.estimate.bits_per_second
                    if need > bw * (1 + 1e-9):
                        return False, f"link {here}–{n} would need {100 * need / bw:.1f}% of its bandwidth"
            self.pending[txn] = streams
        return True, ""

    def commit(self, txn: str, subscription: str, lineage: list[str]) -> None:
        here = self.state.id
        with self.state.lock:
            for s in self.pending.pop(txn, []):
                s.users.add(subscription)
                if here in s.route:
                    self.state.table.add(s)
                if s.origin == here and s.parent is not None:
                    parent = self.state.table.get(s.parent)
                    self.executor.install(s.id, s.operators, s.parent,
                                          parent.kind if parent is not None else "items")
            # the reused streams and their ancestors present here gain the subscription as a user
            for sid in lineage:
                entry = self.state.table.get(sid)
                if entry is not None:
                    entry.users.add(subscription)

    def abort(self, txn: str) -> None:
        with self.state.lock:
            self.pending.pop(txn, None)

    # ------------------------------------------------------------------ removal

    def remove(self, subscription: str) -> list[str]:
        with self.state.lock:
            removed = self.state.table.release(subscription)
            for s in removed:
                self.executor.remove(s.id)
        if self.background:
            threading.Thread(target=self.cut_tails, daemon=True).start()
        else:
            self.cut_tails()
        return [s.id for s in removed]

    def cut_tails(self) -> None:
        """Tell the route of every stream this peer no longer needs to end one peer earlier."""
        with self.state.lock:
            tails = [s for s in self.state.table if self.state.unneeded_tail(s)]
        for s in tails:
            previous = s.route[-2]
            for peer in dict.fromkeys(s.route):
                self.link.truncate(peer, s.id, previous)

    def truncate(self, stream: str, last: str) -> None:
        with self.state.lock:
            route = self.state.table.truncate(stream, last)
            if route is None:
                return
            if self.state.id not in route:
                self.state.table.discard(stream)
                return
            s = self.state.table.get(stream)
            again = s is not None and self.state.unneeded_tail(s)
        if again:
            self.cut_tails()
