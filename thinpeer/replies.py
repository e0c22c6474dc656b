"""What the client library returns: typed replies instead of protobuf messages and JSON text.

A program using StreamGlobe should not need ``proto/streamglobe.proto`` open to read a plan or a
result batch. Each class here is built from one reply of a super-peer (``from_reply``/``from_json``)
and is shared by the synchronous client (``thinpeer.client``) and the ``asyncio`` one
(``thinpeer.aio``), so that both return the same things.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import grpc

#: gRPC status codes after which the same call may succeed: the super-peer is restarting or busy
TRANSIENT = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED"})
#: how a super-peer's reason starts when it took nothing of a batch because the links the batch
#: would leave on are full (back-pressure, ``superpeer.data.backpressure``): send it again
HELD_BACK = "held back: "

_WHERE = re.compile(r"\bquery:(\d+):(\d+):")


class ThinPeerError(Exception):
    """A call a super-peer refused or could not be made. ``code`` is the gRPC status code's name
    (``INVALID_ARGUMENT``, ``NOT_FOUND``, ``RESOURCE_EXHAUSTED``, ``UNAVAILABLE`` …) and
    ``message`` the super-peer's reason; for an error in a query, ``line`` and ``column`` say
    where it is (1-based), else they are None."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        where = _WHERE.search(message)
        self.line: int | None = int(where.group(1)) if where else None
        self.column: int | None = int(where.group(2)) if where else None

    @property
    def status(self) -> grpc.StatusCode:
        """The gRPC status code itself (``grpc.StatusCode.UNKNOWN`` for a name gRPC lacks)."""
        return getattr(grpc.StatusCode, self.code, grpc.StatusCode.UNKNOWN)

    @property
    def transient(self) -> bool:
        """Whether the same call may succeed later (the super-peer is unreachable or slow)."""
        return self.code in TRANSIENT

    @property
    def held_back(self) -> bool:
        """The super-peer took nothing of a published batch because the network downstream is
        full (back-pressure): the publisher waits and sends it again."""
        return self.code == "RESOURCE_EXHAUSTED" and self.message.startswith(HELD_BACK)


@dataclass(frozen=True)
class ResultBatch:
    """One read of a subscription's results: ``items`` start at ``offset``; ``dropped`` counts
    items the retention bound discarded before this read; ``closed``: no more will come."""

    offset: int
    items: list[str]
    root: str
    dropped: int
    closed: bool
    degraded: str = ""  # why its items cannot reach it now ("": they can)
    # on a sample: the <sg:approximation> element of the windows that arrived with these items
    approximation: str = ""
    past: str = ""  # over the past: how far the replay of its streams' past has come ("": live)

    @property
    def next_offset(self) -> int:
        """Where the next read starts: after the items of this one."""
        return self.offset + len(self.items)

    @classmethod
    def from_reply(cls, reply) -> ResultBatch:
        return cls(reply.offset, list(reply.items), reply.root, reply.dropped, reply.closed,
                   reply.degraded, reply.approximation, reply.past)


@dataclass
class PublishSummary:
    accepted: int = 0
    rejected: int = 0
    reasons: list[str] | None = None
    duplicates: int = 0  # items the super-peer had taken before (a retried batch), skipped
    next_position: int | None = None  # numbered publishing: the number the next item gets
    held_back_s: float = 0.0  # how long the network held the publisher back (back-pressure)
    held_back: str = ""  # why: what held it back longest ("": it was not held back)


@dataclass(frozen=True)
class PlanPart:
    """How one input of a subscription is fed: which running stream is reused where, the
    operators installed on top of it and where, and the route of what is new."""

    input: str
    reused_stream: str
    reuse_peer: str
    operator_peer: str
    operators: tuple[str, ...]
    route: tuple[str, ...]
    new_streams: tuple[str, ...]
    delivered_stream: str
    match: str
    cost: float
    relayed: str = ""  # the subnet its first new stream brings the original into (a relay), if any

    @classmethod
    def from_json(cls, part: dict) -> PlanPart:
        return cls(part.get("input", ""), part.get("reused_stream", ""), part.get("reuse_peer", ""),
                   part.get("operator_peer", ""), tuple(part.get("operators", ())),
                   tuple(part.get("route", ())), tuple(part.get("new_streams", ())),
                   part.get("delivered_stream", ""), part.get("match", ""), float(part.get("cost", 0.0)),
                   part.get("relayed", ""))


@dataclass(frozen=True)
class Plan:
    """The plan the super-peer chose. ``target`` is where the results are restructured (the
    subscriber's super-peer); ``sample`` R > 1: an approximate plan on a 1/R sample."""

    target: str
    strategy: str
    admitted: bool
    reason: str
    cost: float
    sample: int
    parts: tuple[PlanPart, ...]

    @classmethod
    def from_json(cls, plan: dict) -> Plan | None:
        """None for a subscription still waiting for its streams to be registered."""
        if not plan:
            return None
        return cls(plan.get("target", ""), plan.get("strategy", ""), bool(plan.get("admitted", False)),
                   plan.get("reason", ""), float(plan.get("cost", 0.0)), int(plan.get("sample", 1)),
                   tuple(PlanPart.from_json(p) for p in plan.get("parts", ())))

    @property
    def reused(self) -> bool:
        """Whether some input is fed from a stream that already ran (sharing happened)."""
        return any(p.reused_stream and p.reused_stream != p.input for p in self.parts)


@dataclass(frozen=True)
class Subscription:
    """A registered subscription: its id (``subscription``, also ``id``), its plan typed and as
    the super-peer's JSON, the plan described for people, and what it got of what was asked:
    ``history`` is how far back its past goes when that is less than asked ("" when it got it
    all), ``sample`` R for a 1/R sample (1: every item), ``warnings`` what in the query is
    legal but probably not meant ("LINE:COL: warning: ...")."""

    subscription: str
    plan: Plan | None
    description: str
    history: str = ""
    sample: int = 1
    plan_json: str = "{}"
    warnings: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.subscription

    @classmethod
    def from_reply(cls, reply) -> Subscription:
        return cls(reply.subscription, Plan.from_json(json.loads(reply.plan_json or "{}")),
                   reply.description, reply.history, reply.sample or 1, reply.plan_json or "{}",
                   tuple(reply.warnings))


@dataclass(frozen=True)
class RegisteredStream:
    """A stream registered at the super-peer asked: how many items it took and refused."""

    name: str
    root: str
    item: str
    accepted: int
    rejected: int
    closed: bool
    next_position: int


@dataclass(frozen=True)
class LinkTraffic:
    """What went over one of the super-peer's links (``"SP1->SP2"``) and what waits to."""

    link: str
    items: int
    bytes: int
    dropped: int
    held_items: int
    held_bytes: int
    errors: int
    last_error: str | None


@dataclass(frozen=True)
class SubscriptionState:
    """A subscription of the super-peer asked: ``health`` is ok, waiting or degraded (with the
    reason), ``results`` how many it has made, ``delivered`` how many were read."""

    subscription: str
    query: str
    health: str
    reason: str
    results: int
    delivered: int
    closed: bool
    sample: int
    plan: Plan | None


class Status(dict):
    """A super-peer's ``status`` document: a dict (as ``streamglobe status`` prints it, every key
    there) with typed views of the parts a program usually wants."""

    @property
    def superpeer(self) -> str:
        return self.get("superpeer", "")

    @property
    def executor(self) -> str:
        return self.get("executor", "")

    @property
    def streams(self) -> dict[str, RegisteredStream]:
        return {n: RegisteredStream(n, s.get("root", ""), s.get("item", ""), s.get("accepted", 0),
                                    s.get("rejected", 0), bool(s.get("closed")), s.get("next_position", 0))
                for n, s in self.get("streams_registered_here", {}).items()}

    @property
    def links(self) -> dict[str, LinkTraffic]:
        return {n: LinkTraffic(n, c.get("items", 0), c.get("bytes", 0), c.get("dropped", 0),
                               c.get("held_items", 0), c.get("held_bytes", 0), c.get("errors", 0),
                               c.get("last_error"))
                for n, c in self.get("links", {}).items()}

    @property
    def subscriptions(self) -> dict[str, SubscriptionState]:
        out = {}
        for sid, s in self.get("subscriptions", {}).items():
            health: dict[str, Any] = s.get("health", {})
            out[sid] = SubscriptionState(sid, s.get("query", ""), health.get("state", ""),
                                         health.get("reason", "") or "", s.get("results", 0),
                                         s.get("delivered", 0), bool(s.get("closed")), s.get("sample", 1) or 1,
                                         Plan.from_json(s.get("plan") or {}))
        return out

    @property
    def unreachable_peers(self) -> dict[str, str]:
        return dict(self.get("unreachable_peers", {}))

