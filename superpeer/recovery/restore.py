"""A super-peer started again on its ``--state-dir`` takes back what it had (``state_store``).

* The streams registered here are registered again, each where its publisher stood (the next
  position ``publish --resume`` continues from) and with its log; a stream that was closed stays
  closed. The other peers learn them with the next heartbeat. Their statistics are learnt again
  from the newest items of their logs (``relearn_statistics``).
* The subscriptions registered here come back with the results they had. An unfinished one is
  planned again at the first heartbeat round (``recovery.replanning``): its results are recomputed from
  the item it began with and those it had are skipped; the plans it had are removed wherever a
  peer still holds them. A finished one keeps its results for its reader.

The streams other peers' plans had routed through this peer are gone: those subscriptions'
super-peers see this peer answer as a new process and plan them again.
"""

from __future__ import annotations

import logging
import time

from lxml import etree

from sharing.analysis import analyze
from sharing.planner import Strategy
from sharing.statistics import StreamStatistics
from wxquery.errors import WXQueryError

from ..control.control_plane import ControlPlane
from ..data.data_plane import MIN_RATE_WINDOW_S, STATISTICS_FULL
from ..data.event_time import EventTime
from ..history.bounds import parse_history
from ..peer_state import OriginalState, PeerState
from ..subscriptions.record import SubscriptionRecord
from ..subscriptions.results import RELEASES
from ..subscriptions.runtime import SubscriptionRuntime
from .replanning import Recovery

log = logging.getLogger("streamglobe.superpeer")


def restore_originals(state: PeerState) -> int:
    stored = state.store.originals()
    with state.lock:
        for o in stored:
            state.add_original(OriginalState(
                o.name, o.root, o.item, accepted=o.accepted, rejected=o.rejected, closed=o.closed,
                statistics=StreamStatistics(frequency=o.rate), rate=o.rate,
                next_position=o.next_position, duplicates=o.duplicates, logged=o.logged,
                event_time=EventTime(o.event_time, o.event_time_rate) if o.event_time else None,
                publisher=o.publisher, history=parse_history(o.history) if o.history else None,
                retained_from=o.retained_from))
            if o.closed:
                state.table.mark_ended(o.name)
    for o in stored:
        relearn_statistics(state, state.originals[o.name])
    return len(stored)


#: at most about this much of a log is observed again at a restart: observing costs about 0.4 ms
#: per kilobyte of item, and a restarted super-peer must be back within a second or two
RELEARNT_BYTES = 1 << 20


def relearn_statistics(state: PeerState, original: OriginalState) -> None:
    """Observe the newest items of a restored stream's log again, as they were observed when
    they arrived, and take its rate from the log's arrival times (unless one was declared).
    Without it, every plan made after a restart (a failure's re-plan, a re-optimisation round,
    a new subscription) was priced as for an empty stream at one item per second — and with
    every element possibly repeated, so that it shared less — until new items came."""
    store, name = state.store, original.name
    extent = store.extent(name)
    arrivals = store.arrivals(name)
    start = max(extent.first, extent.stop - STATISTICS_FULL)
    held = 0  # (the batches' sizes say in which one the newest megabyte begins: none older is read)
    for first, _, size in reversed(arrivals):
        held += size
        if held > RELEARNT_BYTES:
            start = max(start, first)
            break
    texts = store.read_log(name, start, extent.stop)
    held, dropped = sum(map(len, texts)), 0
    while len(texts) - dropped > 1 and held > RELEARNT_BYTES:  # (and within that batch, its newest items)
        held -= len(texts[dropped])
        dropped += 1
    start, texts = start + dropped, texts[dropped:]
    stats = original.statistics
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    for k, text in enumerate(texts):
        try:
            stats.observe(etree.fromstring(text, parser), index=start + k)
        except etree.XMLSyntaxError:  # (logged items were checked: never, but a restart must not fail)
            continue
    if original.rate <= 0 and arrivals and extent.stop > arrivals[0][0]:
        span = arrivals[-1][1] - arrivals[0][1]
        stats.frequency = (extent.stop - arrivals[0][0]) / max(span, MIN_RATE_WINDOW_S)
        # (so that the rate measured as new items arrive goes on from this one)
        original.first_arrival = time.monotonic() - original.accepted / stats.frequency


def resumes_at(runtime: SubscriptionRuntime, resume: tuple[str, int, int] | None) -> None:
    """A subscription passing its items through, whose kept results are exactly those of the
    original's items before ``resume``'s: its re-plan resumes there (``recovery.resume``) and its
    results go on from the kept ones' end, instead of recomputing every result from the
    stream's first item — a restarted subscriber's super-peer no longer costs the stream's
    whole history again."""
    if resume is None or resume[0] != runtime.passes_through or resume[2] != runtime.buffer.end:
        return
    variable, at, _ = resume
    runtime.resume_at[variable] = runtime.passed_resume = at
    runtime.next_result = runtime.buffer.end
    runtime.buffer.resume = (variable, at)


def restore_subscriptions(control: ControlPlane, recovery: Recovery) -> int:
    state = control.state
    restored = 0
    for s in state.store.subscriptions():
        try:
            analysis = analyze(s.query, limits=control.query_limits)
        except WXQueryError as exc:  # accepted before: only a changed language refuses it now
            log.error("subscription %s cannot be restored: %s", s.sid, exc)
            continue
        buffer = control.result_buffer(s.sid, analysis)
        buffer.restore(s.base, s.results, s.closed, s.error, s.code)
        runtime = SubscriptionRuntime(s.sid, analysis, control.retention, state.limits, buffer=buffer)
        record = SubscriptionRecord(runtime, None, {}, Strategy(s.strategy), (), query=s.query,
                                    registered_at=s.registered_at, owner=s.owner, starts=dict(s.starts),
                                    chains=dict(s.chains), stale=list(s.stale), user=s.user, sample=s.sample,
                                    approximate=bool(s.bounds.get("approximate", s.sample > 1)),
                                    min_rate=int(s.bounds.get("min_rate", 64)), weight=float(s.bounds.get("weight", 1.0)),
                                    touched={i: frozenset(peers) for i, peers in s.touched.items()})
        runtime.sample, runtime.confidence = s.sample, s.confidence
        runtime.ensure_estimates()  # results read back before its re-plan carry their intervals
        resumes_at(runtime, s.resume)
        for plan_id in [*s.stale, s.owner or s.sid]:  # every plan it had: where it was committed, if known
            recovery.forget([plan_id], s.touched.get(plan_id))
        if s.closed:
            RELEASES.schedule(buffer, state.limits.finished_retention_s)
        else:
            runtime.start()
            record.recovering = True
            record.degraded = "its super-peer restarted; planning it again"
            record.degraded_since = time.time()
        with state.lock:
            control.subscriptions[s.sid] = record
        restored += 1
    return restored
