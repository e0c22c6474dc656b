"""Approximate answers that adapt: sample rates lowered under pressure, raised when it goes
(issue 35; STREAM's dynamic approximation, OSCAR's resolutions chosen by the resources at hand).

An approximate subscription (``subscribe --approximate``) may run on a sample of its input: on
1/R of the items (a hash of each item's text, ``wxquery.operators.sampling``: the 1/2R sample
lies inside the 1/R one), its window aggregates scaled to the whole stream with confidence
intervals. Admission picks R once, when the network could not carry it whole. Here its
super-peer keeps adapting R while it runs:

* **pressure**: a link on the subscription's paths carries ``PRESSURE`` (90 %) of its bandwidth
  or more, as its sending super-peer measured it (``stream_rates.LinkRates``, in the usage every
  super-peer reports), or its sender holds half its link buffer or more (back-pressure: a link
  slower than declared): the subscription is moved onto a plan over a sample twice as coarse —
  never coarser than its bound (``--min-rate``, default 1/64), or straight onto a coarser one
  that another subscription's stream of the same input already carries here and that serves it
  (``lowered_rate``: shared, it adds nothing to the links) — live and exactly like a
  re-optimisation move (``Reoptimiser.migrate``), so that every window comes whole from one
  sample, its estimates scaled at that rate and its intervals saying so (``sample`` on each
  window once rates differ);
* **calm**: every link on its paths carries at most ``CALM`` (50 %) of its bandwidth, and none was
  under pressure for ``QUIET_S``: it is moved onto a sample twice as fine, down to the whole
  stream, if admission takes that plan;
* under pressure, at most one subscription of this super-peer is lowered per ``SETTLE_S`` (the
  measured rates need that long to show the change); once it is gone, every quiet one is raised,
  each at most every ``RAISE_EVERY_S``;
* **only where it relieves**: a lowering is taken only if its plan carries less over a pressured
  link than the plan at the rate now, both priced on one view (``relieved``): window records
  computed before the link, or a stream others read too, stay the same whatever the sample —
  unless those others are approximate subscriptions here too (``mates``): then they go down
  together onto one sample;
* **fairly by weight, across super-peers**: the subscription keeping the largest share of its
  items for its weight (1/R ÷ weight) is lowered first — here, and on the link: before lowering,
  its super-peer claims the link from the peer that sends on it (``lowering_claims``), which
  gives the turns to the highest claim; when calm, the one keeping the smallest is raised first.

Every change is a plan-history entry (``sample``: "1/2 → 1/4", and the window or item it
switched at). Back-pressure (``data.backpressure``) still holds publishers the moment a link is
full; lowering the samples is what lets it let go, within seconds.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import dataclass
from itertools import pairwise

from sharing.backbone import TopologyError
from sharing.estimates import samplable, with_sample
from sharing.matching import match_properties
from sharing.planner import RegistrationError
from sharing.plans import PlanPart
from sharing.reoptimisation import base, own_streams, without
from sharing.stream_table import lineage
from sharing.subnet_planning import planner_within

from ..subscriptions.record import SubscriptionRecord
from .remote_view import fetch_planning_view
from .reoptimisation import Reoptimiser
from .staying import backing_off as waits_after_cancels

log = logging.getLogger("streamglobe.superpeer")

PRESSURE = 0.9  # a link carrying this share of its bandwidth is under pressure
CALM = 0.5  # … and at most this share on every link of its paths: a sample may be raised
SETTLE_S = 4.0  # between two lowerings here (the measured rates are smoothed over rounds)
RAISE_EVERY_S = 3.0  # between two raisings of one subscription
QUIET_S = 5.0  # no pressure on its paths for this long before a sample is raised
TRIES = 3  # subscriptions tried for one lowering in a round
RECHECK_S = 15.0  # one whose lowering would relieve nothing is not planned again for that long
RELIEF = 0.9  # a lowering relieves a link if its plan carries at most this share of the plan now there


@dataclass(frozen=True)
class Pressure:
    """Why a subscription is lowered: its pressured links (``"A–B"``, the hottest first), and
    its priority among the claims on them (``lowering_claims``)."""
    links: tuple[str, ...]
    priority: float


def relieved(links: tuple[str, ...], now: PlanPart, lowered: PlanPart) -> list[str]:
    """The links (of ``links``) a lowered plan carries less on than the plan at the rate now,
    both priced alike on one view: a subscription whose window aggregates are computed before a
    link sends the same records over it on any sample, and one that reads a stream others read
    leaves it flowing — lowering either would cost precision and relieve nothing."""
    def bits(part: PlanPart, link: str) -> float:
        return part.usage.links.get(frozenset(link.split("–")), 0.0)
    return [link for link in links if bits(lowered, link) < RELIEF * bits(now, link)]


class AdaptiveSampling:
    def __init__(self, reoptimiser: Reoptimiser) -> None:
        self.reoptimiser = reoptimiser
        self.control = reoptimiser.control
        self.changes = 0
        self.last_change = self.looked_at = 0.0
        self.pressed_at: dict[str, float] = {}  # subscription -> when its paths were last under pressure
        self.no_relief: dict[str, float] = {}  # subscription -> until when a lowering would relieve nothing

    def utilisation(self, record: SubscriptionRecord) -> dict[str, float]:
        """The measured share of its bandwidth each link on the subscription's paths carries —
        at least all of it where the link's sender holds half its link buffer or more: a link
        slower than declared (shaped, congested) is under pressure however little it carries."""
        state = self.control.state
        with state.lock:
            reports = dict(state.peer_usage)
        reports[state.id] = state.usage_report()
        out: dict[str, float] = {}
        for path in record.paths:
            for a, b in pairwise(path):
                bandwidth = state.backbone.bandwidth().get(frozenset((a, b)), 0.0)
                report = reports.get(a, {})
                measured = report.get("measured_links", {}).get(b, 0.0)
                if bandwidth > 0:
                    out[f"{a}–{b}"] = measured / bandwidth
                if b in report.get("pressured_links", ()):
                    out[f"{a}–{b}"] = max(out.get(f"{a}–{b}", 0.0), 1.0)
        return out

    def round(self) -> None:
        """Lower one approximate subscription registered here, or raise the quiet ones (what
        fails is logged: the re-optimisation round that follows in the same loop still runs)."""
        try:
            self._round()
        except Exception:  # noqa: BLE001
            log.exception("adapting the samples failed")

    def _round(self) -> None:
        now = time.monotonic()
        if now - self.looked_at < 1.0:
            return
        self.looked_at = now
        self.no_relief = {sid: until for sid, until in self.no_relief.items() if until > now}
        with self.control.state.lock:
            records = [r for r in self.control.subscriptions.values()
                       if r.approximate and r.plan is not None and samplable(r.runtime.analysis.properties)]
        lower, higher = [], []
        for r in records:
            if now - r.resampled_at < RAISE_EVERY_S or self.reoptimiser.why_not(r, cooled=False, backoff=False):
                continue
            backing_off = bool(waits_after_cancels(r))  # (after cancelled moves: not raised)
            used = self.utilisation(r)
            hot = sorted(link for link, u in used.items() if u >= PRESSURE)
            if hot:
                self.pressed_at[r.runtime.id] = now
            quiet = now - self.pressed_at.get(r.runtime.id, 0.0) >= QUIET_S
            if hot and r.sample * 2 <= r.min_rate and now >= self.no_relief.get(r.runtime.id, 0.0):
                hot.sort(key=lambda link: -used[link])
                why = f"pressure on link {hot[0]} ({used[hot[0]]:.0%} of its bandwidth)"
                lower.append((1 / (r.sample * r.weight), r, why, hot))
            elif r.sample > 1 and used and max(used.values()) <= CALM and quiet and not backing_off:
                why = f"calm: its links at most {max(used.values()):.0%} of their bandwidth"
                higher.append((1 / (r.sample * r.weight), r, why))
        if lower and now - self.last_change >= SETTLE_S:
            # (the largest share for its weight first; one that would relieve no pressured link,
            # or whose link's sender gives another the turn, lets the next one try)
            for priority, record, why, hot in sorted(lower, key=lambda c: (c[0], c[1].runtime.id), reverse=True)[:TRIES]:
                if self._change(record, self.lowered_rate(record), why, Pressure(tuple(hot), priority)):
                    self.last_change = now
                    break
        elif not lower:
            for _, record, why in sorted(higher, key=lambda c: c[0]):  # (the pressure is gone: each goes up)
                self._change(record, record.sample // 2, why)

    def lowered_rate(self, record: SubscriptionRecord) -> int:
        """The sample a subscription under pressure goes down to: twice as coarse — or, within
        its bound, the finest coarser sample of its input that another subscription's stream
        already carries and that serves it (joining it adds nothing to the links; STREAM's and
        OSCAR's shared resolutions)."""
        steps = []
        rate = record.sample * 2
        while rate <= record.min_rate:
            steps.append(rate)
            rate *= 2
        if len(steps) > 1:
            props = record.runtime.analysis.properties
            with self.control.state.lock:
                running = [s for s in self.control.state.table if s.properties.sample in steps[1:]
                           and not s.original and {base(u) for u in s.users} - {record.runtime.id}]
            for rate in steps[1:]:
                wants = with_sample(props, rate).inputs[0]
                if any(s.properties.sample == rate and match_properties(s.properties, wants).shareable
                       for s in running):
                    return rate
        return steps[0]

    def mates(self, record: SubscriptionRecord, streams) -> set[str]:
        """The approximate subscriptions registered here that read a stream of this one's chain
        and may be lowered too: planned as if the streams only they and this one read were gone.
        Alone, none of them relieves a link that stream crosses (it flows for the others); so the
        first moves onto a sample of its own before the link, and the others join that sample
        on their turns (``lowered_rate``), after which the whole stream goes — one sample that
        many subscriptions share, instead of none lowered at all."""
        chain = [s for stream in record.inputs.values() for s in lineage(streams, stream) if not s.original]
        readers = {base(u) for s in chain for u in s.users} - {record.runtime.id}
        with self.control.state.lock:
            here = {sid: self.control.subscriptions.get(sid) for sid in readers}
        return {sid for sid, r in here.items() if r is not None and r.approximate and r.sample == record.sample
                and r.sample * 2 <= r.min_rate and samplable(r.runtime.analysis.properties)}

    def _change(self, record: SubscriptionRecord, rate: int, why: str, pressure: Pressure | None = None) -> bool:
        """Move it onto a 1/``rate`` sample (lowered under ``pressure``, else raised); whether it moved."""
        record.resampled_at = time.monotonic()
        old = record.sample
        try:
            moved = False
            if rate > 2 * old:  # (onto a sample that flows: taken only if the plan reuses it)
                moved = self.resample(record, rate, f"{why}: sample 1/{old} → 1/{rate} (shared)", shared=True,
                                      pressure=pressure)
                rate = rate if moved else 2 * old
            moved = moved or self.resample(record, rate, f"{why}: sample 1/{old} → 1/{rate}", pressure=pressure)
        except Exception as exc:  # noqa: BLE001 - the others are still looked at
            record.sampling = f"not moved onto a 1/{rate} sample: {exc}"
            log.exception("moving %s onto a 1/%d sample failed", record.runtime.id, rate)
            return False
        if moved:
            self.changes += 1
            log.warning("subscription %s moves from a 1/%d to a 1/%d sample (%s)", record.runtime.id, old, rate, why)
        return moved

    def resample(self, record: SubscriptionRecord, rate: int, why: str, shared: bool = False,
                 pressure: Pressure | None = None) -> bool:
        """Move the subscription onto a plan over a 1/``rate`` sample of its input, live like any
        move; False (``record.sampling`` says why) if no such plan is admitted now — or,
        ``shared``, if the plan does not reuse a running stream of that sample; or, lowered under
        ``pressure``, if it would carry no less on any pressured link (``relieved``), or the link's
        sender gives another subscription the turn (``lowering_claims``)."""
        reoptimiser, state, sid = self.reoptimiser, self.control.state, record.runtime.id
        props = with_sample(record.runtime.analysis.properties, rate)
        view = fetch_planning_view(state, self.control.link, props, self.control.new_stream_id, scoped=True)
        group = {sid} | (self.mates(record, view.snapshot.streams) if pressure is not None else set())
        without(view.snapshot, own_streams(view.snapshot.streams, group))
        try:
            planner = planner_within(view.snapshot, self.control.subnets, state.id, props, or_whole=True)
            plan = planner.subscribe(f"{sid}~{secrets.token_hex(3)}", props, state.id)
        except (RegistrationError, TopologyError, KeyError) as exc:
            record.sampling = f"no plan on a 1/{rate} sample now: {exc}"
            return False
        variable, old_stream = next(iter(record.inputs.items()))
        old, part = state.table.get(old_stream), plan.parts[0]
        entry = (next((s for s in part.new_streams if s.id == part.result_stream), None)
                 or view.snapshot.streams.get(part.result_stream))
        # (a coarser sample carries less than the running plan, whose traffic the measured load
        # admission holds the links to includes: lowering is taken over a link already full)
        if (not (plan.admitted or rate > record.sample) or old is None or entry is None
                or entry.kind != old.kind or part.result_stream == old_stream):
            record.sampling = f"kept on a 1/{record.sample} sample: {plan.reason or 'no other plan'}"
            return False
        if shared and not any(s.properties.sample == rate for s in view.lineage(part.reused)):
            return False
        if pressure is not None:
            try:
                now = planner.subscribe(f"{sid}~{secrets.token_hex(3)}",
                                        with_sample(record.runtime.analysis.properties, record.sample), state.id)
            except (RegistrationError, TopologyError, KeyError) as exc:
                record.sampling = f"no plan on its 1/{record.sample} sample to compare with: {exc}"
                return False
            links = relieved(pressure.links, now.parts[0], part)
            if not links:
                record.sampling = (f"kept on a 1/{record.sample} sample: a 1/{rate} one would carry no less on "
                                   f"link {pressure.links[0]} (only what it computes before the link is sampled)")
                self.no_relief[sid] = time.monotonic() + RECHECK_S
                return False
            a, b = links[0].split("–")
            grant = self.control.link.claim_lowering(a, b, sid, pressure.priority)
            if grant is not None and not grant.granted:
                record.sampling = f"waits to lower its sample: {grant.reason}"
                return False
        with self.control._installing:
            if reoptimiser.why_not(record, cooled=False, backoff=False) or record.inputs.get(variable) != old_stream:
                return False
            moved = reoptimiser.migrate(record, plan, view, why, (float("nan"), plan.cost, float("nan")),
                                        variable, old_stream, None, sample=rate)
        if moved:
            record.sampling = f"moving onto a 1/{rate} sample ({why})"
        return moved

    def status(self) -> dict:
        return {"changes": self.changes, "pressure": PRESSURE, "calm": CALM, "settle_s": SETTLE_S,
                "raise_every_s": RAISE_EVERY_S, "quiet_s": QUIET_S}
