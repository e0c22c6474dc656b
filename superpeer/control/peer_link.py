"""How the control plane talks to super-peers, itself included: the calls (``PeerLink``), what a
peer serves when called (``PeerHandler``), and the answers, in the optimizer's own types.

A transport implements ``PeerLink``: ``rpc.peer_channels.GrpcPeerChannels`` over gRPC (a call to
this peer itself goes to its own handler without the network), and the in-process fake of the
tests. The handler is the super-peer's ``Node``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

from sharing.properties import InputStream
from sharing.serialization import stream_from_json, stream_to_json
from sharing.stream_table import NetworkStream
from wxquery.operators.count_alignment import Anchor

from .lowering_claims import Grant


@dataclass
class Waiting:
    """A subscription at some peer that was waiting for a stream that is now registered."""

    subscription: str
    registered_at: float


@dataclass(frozen=True)
class Aligned:
    """What a held count window said to an anchor (``count_handover``)."""

    aligned: bool
    later: bool = False  # not yet: ask again
    reason: str = ""


@dataclass
class Committed:
    """A peer's answer to a commit."""

    starts: dict[str, int]  # stream registered there -> items logged when the plan took it
    incarnation: str = ""  # the process that committed: a later new one has lost the plan
    anchors: dict[str, int] = field(default_factory=dict)  # original -> exact first item taken there
    replayed: dict[str, int] = field(default_factory=dict)  # original -> first log item its replay sends
    history: dict[str, str] = field(default_factory=dict)  # original -> how far back its history goes

    @classmethod
    def of(cls, reply: dict, incarnation: str = "") -> "Committed":
        """From ``Participant.commit``'s answer."""
        return cls(dict(reply.get("logged", {})), incarnation, dict(reply.get("anchors", {})),
                   {k: int(v) for k, v in reply.get("replayed", {}).items()},
                   {k: str(v) for k, v in reply.get("history", {}).items()})


@dataclass
class Reserved:
    """A peer's answer to a reservation. For a past subscription served from a running replay
    of a stream registered there (``sharing.replay_plans``): where it starts, and which
    running copy could not serve it (``refused``: plan again without it)."""

    ok: bool
    reason: str = ""
    starts: dict[str, int] = field(default_factory=dict)  # new copy of a running replay -> its first item
    replayed: dict[str, int] = field(default_factory=dict)  # original -> the subscription's first item
    history: dict[str, str] = field(default_factory=dict)  # original -> how far back its history goes
    refused: str = ""
    at: str = ""  # the peer that refused (the coordinator's own note: not on the wire)

    def to_json(self) -> dict:
        return {"starts": self.starts, "replayed": self.replayed, "history": self.history, "refused": self.refused}

    @classmethod
    def of(cls, ok: bool, reason: str, answer: dict) -> "Reserved":
        return cls(ok, reason, {k: int(v) for k, v in answer.get("starts", {}).items()},
                   {k: int(v) for k, v in answer.get("replayed", {}).items()},
                   {k: str(v) for k, v in answer.get("history", {}).items()}, str(answer.get("refused", "")))


class PeerHandler(Protocol):
    """What a super-peer serves to the others (its participant side)."""

    def lookup(self, input_stream: InputStream) -> tuple[list[NetworkStream], dict]: ...

    def statistics(self, name: str, sample_of: int = 0) -> dict: ...

    def announce(self, stream: NetworkStream) -> list[Waiting]: ...

    def activate(self, subscription: str) -> tuple[bool, str]: ...

    def find_stream(self, name: str) -> NetworkStream | None: ...

    def reserve(self, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None,
                pins: list[str] | None = None) -> Reserved: ...

    def commit(self, txn: str, subscription: str, lineage: list[str],
               replay: dict[str, int] | None = None, since: dict[str, float] | None = None,
               held: list[str] | None = None) -> dict[str, dict]: ...

    def abort(self, txn: str) -> bool: ...

    def remove(self, subscription: str) -> list[str]: ...

    def truncate(self, stream: str, last: str) -> None: ...

    def count_anchor(self, stream: str) -> tuple[Anchor | None, str]: ...

    def align_count(self, stream: str, anchor: Anchor) -> Aligned: ...

    def claim_lowering(self, neighbour: str, subscription: str, priority: float) -> Grant: ...

    def widen_stream(self, txn: str, step: str, wide: NetworkStream, was: NetworkStream) -> None: ...


STATISTICS = "statistics"  # (a lookup answer's usage: the original's statistics, when asked for)


def with_statistics(usage: dict, statistics_json: str) -> dict:
    """A lookup answer's usage, with the statistics it carries (``PeerLink.lookup``)."""
    if statistics_json:
        usage[STATISTICS] = json.loads(statistics_json)
    return usage


class PeerLink(Protocol):
    """Calls to a peer by id. ``None`` answers mean the peer could not be reached and the
    caller can do without it; methods that cannot do without raise ``NodeError``."""

    def lookup(self, peer: str, input_stream: InputStream,
               statistics_of: int | None = None) -> tuple[list[NetworkStream], dict] | None:
        """``statistics_of``: the input's original is registered at ``peer``; its statistics
        come in the answer's usage under ``STATISTICS`` (as ``statistics`` gives them, for the
        sample held) — one call fewer for a plan, which asks that peer anyway. A peer that
        leaves them out is asked with ``statistics``."""
        ...

    def statistics(self, peer: str, name: str, sample_of: int = 0) -> dict: ...

    def announce(self, peer: str, stream: NetworkStream) -> list[Waiting] | None: ...

    def activate(self, peer: str, subscription: str) -> None: ...

    def find_stream(self, peer: str, name: str) -> NetworkStream | None:
        """The original ``name`` as ``peer`` knows it (None: not known there, or unreachable)."""

    def reserve(self, peer: str, txn: str, streams: list[NetworkStream], subscription: str,
                target: str, version: int | None = None, attach: dict | None = None,
                pins: list[str] | None = None) -> Reserved:
        """``pins``: the reused streams ``peer`` keeps until the transaction ends (``Participant.reserve``)."""

    def commit(self, peer: str, txn: str, subscription: str, lineage: list[str],
               required: bool, replay: dict[str, int] | None = None,
               since: dict[str, float] | None = None, held: list[str] | None = None) -> Committed: ...

    def abort(self, peer: str, txn: str) -> bool | None:
        """Whether a replay ``txn`` held at ``peer`` had been let go before (None: unreachable)."""

    def remove(self, peer: str, subscription: str) -> list[str] | None: ...

    def truncate(self, peer: str, stream: str, last: str) -> None: ...

    def count_anchor(self, peer: str, stream: str) -> tuple[Anchor | None, str]:
        """Where the count window computing ``stream`` at ``peer`` stands (``count_handover``)."""

    def align_count(self, peer: str, stream: str, anchor: Anchor) -> Aligned | None:
        """The held count window computing ``stream`` at ``peer`` aligned (None: unreachable; a
        refusal, such as a peer that did not plan it asking, raises ``NodeError``)."""

    def claim_lowering(self, peer: str, neighbour: str, subscription: str, priority: float) -> Grant | None:
        """May ``subscription`` lower its sample for the link ``peer`` sends on to ``neighbour``
        (``lowering_claims``; None: ``peer`` did not answer)?"""

    def widen_stream(self, peer: str, txn: str, step: str, wide: NetworkStream, was: NetworkStream) -> None:
        """One step of widening ``wide.id`` in place at ``peer`` (``widening_in_place``); a
        refusal, or a peer that does not answer, raises ``NodeError``."""


def copy_stream(s: NetworkStream) -> NetworkStream:
    """A stream entry no other peer (or plan) shares: what the wire gives a remote peer."""
    return stream_from_json(stream_to_json(s))
