"""A subscription as its registering super-peer keeps it: runtime, plan, inputs, and its health
(``route_health``, ``recovery.replanning``) — what ``status`` shows of it."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from sharing.planner import Plan, Strategy
from sharing.replay import ReplayInput
from sharing.stream_table import NetworkStream

from .step_times import StepTimes
from .runtime import SubscriptionRuntime


@dataclass
class SubscriptionRecord:
    runtime: SubscriptionRuntime
    plan: Plan | None  # None while waiting for a stream to be registered
    inputs: dict[str, str]  # variable -> delivered stream id
    strategy: Strategy = Strategy.SHARING
    waiting_for: tuple[str, ...] = ()
    error: str = ""
    registered_at: float = field(default_factory=time.time)
    paths: tuple[tuple[str, ...], ...] = ()  # the peers its items pass, per input (route_health)
    degraded: str = ""  # why its items cannot reach it now ("" while they can)
    degraded_since: float | None = None
    query: str = ""
    user: str = ""  # who created it: the only one (with admins) who may read or end it
    from_start: bool = False  # over the past its streams' logs hold, then live (``subscribe --from-start``)
    since_s: float | None = None  # ... of the last so many seconds only (``subscribe --since``)
    history: str = ""  # what it was told of how far back its streams' histories went
    # over the past: original -> (the copy its replay reaches this peer on, its first item, the
    # items logged when it was installed): how far the replay has come (``past_progress``)
    past: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    caught_up: bool = False  # … and its replay has come as far (seen here): it may move
    approximate: bool = False  # may be planned on a sample when the network cannot carry it whole
    sample: int = 1  # planned on a 1/sample sample of its input (``Planner.subscribe``)
    # approximate: the coarsest sample the network may lower it to under pressure, and its weight
    # against the others' (``control.adaptive_sampling``); when its sample last changed
    min_rate: int = 64
    weight: float = 1.0
    resampled_at: float = 0.0
    # Planned again after a failure (``recovery.replanning``): each new plan installs its streams under a
    # new plan id ``sid~xxxxxx`` (``owner``); ``stale`` are earlier plan ids (and attempts) some
    # peer may still hold.
    owner: str = ""
    stale: list[str] = field(default_factory=list)
    # plan id -> the peers it was committed at (its streams, and its user marks on the streams it
    # reuses): where it is removed; a plan id not here (restored after a restart, an attempt
    # cut short) is removed at every peer
    touched: dict[str, frozenset[str]] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)  # original -> items logged at installation
    chains: dict[str, ReplayInput] = field(default_factory=dict)  # variable -> what it read (exact)
    incarnations: dict[str, str] = field(default_factory=dict)  # path peer -> process at install
    recovering: bool = False  # its path is broken: a new plan is wanted
    must_replan: str = ""  # … or neither plan feeds it any more, whatever its path (why)
    replanning: bool = False  # the recovery worker is installing a new plan
    steps: StepTimes = field(default_factory=StepTimes)  # where its registration's time goes …
    registration_ms: dict[str, float] = field(default_factory=dict)  # … and went, once installed
    replans: int = 0
    replaced: Plan | None = None  # the plan a re-plan replaces, until one is in (its streams still are)
    last_failure: str = ""
    # Re-planned while running (``control.reoptimisation``, ``recovery.replanning``): each re-plan
    # (``plan_history``), when the last was (the cool-down), and what the last round decided
    plan_history: list[dict] = field(default_factory=list)
    last_replan: float = 0.0  # (may lie ahead: after a cancelled move, the wait before another)
    cancels: int = 0  # moves cancelled in a row
    moves: list[float] = field(default_factory=list)  # when re-optimisation last moved it (``staying.cool_down``)
    # the streams its last move left for what the others save by following (``Move.credited``),
    # not taken again until then: they need a round or two to follow
    left_for_followers: frozenset[str] = frozenset()
    left_hold_until: float = 0.0
    left_again: int = 0  # how many times in a row it left the same streams so
    reoptimisation: str = ""
    sampling: str = ""  # what adaptive sampling last decided for it, if approximate (``adaptive_sampling``)

    def leave_for_followers(self, streams: frozenset[str], seconds: float) -> None:
        """Its move left ``streams`` for what the others save by following: it does not take
        them again for ``seconds`` (they need a round or two to follow) — twice as long each
        time it leaves them again (the others did not follow: their peers may not move them)."""
        again = bool(streams & self.left_for_followers)
        self.left_again = min(self.left_again + 1, 5) if again else 0
        self.left_for_followers = streams
        self.left_hold_until = time.time() + seconds * 2 ** self.left_again

    def no_longer_left(self) -> None:
        """The move that left them was cancelled: it reads them again."""
        self.left_for_followers, self.left_hold_until, self.left_again = frozenset(), 0.0, 0

    def held_off(self) -> frozenset[str]:
        """The streams it does not take again now (``leave_for_followers``)."""
        return self.left_for_followers if time.time() < self.left_hold_until else frozenset()

    def touched_by(self, plan_ids: list[str]) -> set[str] | None:
        """Where the plans ``plan_ids`` were committed (None if one of them is not known)."""
        if any(i not in self.touched for i in plan_ids):
            return None
        return set().union(*(self.touched[i] for i in plan_ids))

    def held_by(self, plan_ids: list[str], everyone: Iterable[str]) -> set[str]:
        """Every peer the plans ``plan_ids`` may hold something at: its paths, its new streams'
        routes, and where they were committed — ``everyone`` if that is not known for one."""
        touched = self.touched_by(plan_ids)
        if touched is None:
            return set(everyone)
        peers = {p for path in self.paths for p in path}
        return touched | peers | {p for part in (self.plan.parts if self.plan else ()) for s in part.new_streams
                                  for p in (s.origin, *s.route)}

    def store_plan(self, store, owner: str | None = None, stale: list[str] | None = None) -> None:
        """Write what a restart needs of its plans (``StateStore.set_plan``): by default the
        plan it runs and the earlier ones some peer may still hold."""
        store.set_plan(self.runtime.id, self.owner if owner is None else owner,
                       self.stale if stale is None else stale, self.starts, self.chains, self.sample,
                       touched=self.touched)

    def forget_plans(self, plan_ids: list[str]) -> None:
        """Those plans are removed (or to be, wherever they were: ``Recovery.forget``)."""
        for i in plan_ids:
            self.touched.pop(i, None)

    @property
    def plan_id(self) -> str:
        """Whose streams the current plan's are, at every peer (``users``)."""
        return self.owner or self.runtime.id

    def describe(self) -> str:
        if self.plan is not None:
            return self.plan.describe()
        if self.error:
            return f"{self.runtime.id}: {self.error}"
        names = ", ".join(f'"{n}"' for n in self.waiting_for)
        return (f"{self.runtime.id}: waiting for stream {names} to be registered (no super-peer "
                "has it yet); it is planned and installed before the first item is published")

    def status(self) -> dict:
        """What ``status`` shows of it."""
        return {"inputs": self.inputs, "query": self.query, "user": self.user, "strategy": self.strategy,
                "health": health(self),
                # where a re-plan recomputes it from (``sharing.replay``)
                "replay_from": {v: {"log_item": c.start, "levels": [lv.first for lv in c.levels],
                                    "read": c.read} for v, c in self.chains.items()},
                "plan": self.plan.to_json() if self.plan else None,
                "waiting_for": list(self.waiting_for), "plan_error": self.error, "sample": self.sample,
                "plan_history": self.plan_history, "reoptimisation": self.reoptimisation,
                "registration_ms": self.registration_ms,
                "intervals": self.runtime.estimates.status() if self.runtime.estimates else None,
                **({"joins": [j.status() for j in self.runtime.joins]} if self.runtime.joins else {}),
                **({"approximate": {"min_rate": self.min_rate, "weight": self.weight, "sampling": self.sampling}}
                   if self.approximate else {}),
                **self.runtime.buffer.status()}


def past_of(record: SubscriptionRecord, plan: Plan, logged: dict[str, int], here: str,
            resumed: dict[str, int] | None = None) -> dict[str, tuple[str, int, int]]:
    """Where the replay of each input's past reaches ``here`` (the subscription's peer) as a copy
    (items numbered as in the log), and from and up to which item (``SubscriptionRecord.past``).
    Not where the operators run at the stream's super-peer (no copy comes here: its progress is
    not seen). ``resumed``: per variable, the item a failure's re-plan resumed it at (its past
    is replayed from there)."""
    past = {}
    for p in plan.parts:
        name = p.input_properties.input.stream
        first = max(record.starts.get(name, 0), (resumed or {}).get(p.input_properties.variable, 0))
        copies = [s.id for s in p.new_streams if not s.operators and here in s.route]
        if copies and name in logged and logged[name] > first:
            past[name] = (copies[0], first, logged[name])
    return past


def past_progress(record: SubscriptionRecord, reached: dict[str, int]) -> dict[str, dict]:
    """Per stream whose past the subscription is still receiving, how far its replay has come:
    ``reached``, the next item of each stream that has passed this peer (``positions``). The
    past ends at the items logged when it was installed (later ones are its live part)."""
    out = {}
    for name, (copy, first, until) in sorted(record.past.items()):
        at = max(first, reached.get(copy, first))
        if at < until:
            out[name] = {"first_item": first, "next_item": at, "live_from": until,
                         "fraction": round((at - first) / (until - first), 4)}
    return out


def past_text(progress: dict[str, dict]) -> str:
    """``past_progress`` for people ("": caught up with every stream's past)."""
    return "; ".join(f"{name}: {p['next_item'] - p['first_item']:,} of {p['live_from'] - p['first_item']:,} "
                     f"past items replayed ({int(100 * p['fraction'])}%)" for name, p in progress.items())


def health(record: SubscriptionRecord) -> dict:
    since = (None if record.degraded_since is None else
             datetime.fromtimestamp(record.degraded_since, timezone.utc).isoformat(timespec="milliseconds"))
    history = {"replans": record.replans, "last_failure": record.last_failure}
    if record.degraded:
        return {"state": "degraded", "since": since, "reason": record.degraded, **history}
    return {"state": "ok" if record.plan is not None else "waiting", "since": since, **history}


def replaced_by(stream: NetworkStream, plan_id: str) -> bool:
    """Whether only earlier plans of ``plan_id``'s subscription use ``stream`` (plan ids are
    ``sid`` and ``sid~xxxxxx``): a new plan of it may take what that stream holds."""
    base = plan_id.split("~", 1)[0]
    return (bool(stream.users) and plan_id not in stream.users
            and all(u.split("~", 1)[0] == base for u in stream.users))
