"""A subscription at its super-peer: live post-processing into its result buffer (``results``).

The subscriber's super-peer runs the subscription's post-processing (restructuring, conditions
not applied upstream, joins) with the reference evaluator over *live* inputs: each input is a
blocking feed the data plane appends to, so results appear while the stream flows. An input
the evaluation reads once (the first clause of a top-level FLWR) lets go of each item as it is
read; one read again for every outer binding (a join's inner input) keeps what it received.
Once the stream has ended and the evaluation is over, the inputs are freed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial

from sharing.analysis import Analysis
from sharing.estimates import asked_partials
from wxquery.evaluator import post_process
from wxquery.join_band import join_bands
from wxquery.operators.items import atom_test
from wxquery.operators.records import serialize
from wxquery.pass_through import passed_through

from ..data.limits import DataLimits
from .approximation import CONFIDENCE, LiveEstimates
from .feeds import BlockingFeed, single_pass_clauses
from .join_feeds import InnerFeed, OuterFeed
from .results import RELEASES, ResultBuffer, ResultTooLarge

log = logging.getLogger("streamglobe.superpeer")
OFFER_BATCH = 1000  # results offered at once at most (sooner when an input waits for items)
OFFER_WITHIN_S = 0.05  # … or when the oldest of them waited this long (an evaluation behind its input)


class SubscriptionRuntime:
    """Post-processing of one subscription over its live inputs, in its own thread."""

    def __init__(self, sid: str, analysis: Analysis, retention: int,
                 limits: DataLimits | None = None, buffer: ResultBuffer | None = None) -> None:
        """``buffer``: the results of an earlier runtime of the same subscription (planned
        again): this one recomputes them from the first input item and adds only new ones."""
        self.id = sid
        self.analysis = analysis
        self.limits = limits or DataLimits()
        props = analysis.properties
        self.clauses = {b.name: b.clause for b in analysis.checked.clauses.values()
                        if b.kind != "aggregate"}
        once = single_pass_clauses(analysis.checked.query.body)
        self.feeds: dict[str, BlockingFeed] = {}
        self.joins: list[InnerFeed] = []  # window joins: inner inputs read within a band
        variables = {inp.variable for inp in props.inputs}
        for band in join_bands(analysis.checked):
            if {band.outer, band.inner} <= variables:
                outer = self.feeds.setdefault(band.outer, OuterFeed(band.outer_path))
                assert isinstance(outer, OuterFeed)
                self.feeds[band.inner] = inner = InnerFeed(band, outer)
                self.joins.append(inner)
        for inp in props.inputs:
            if inp.variable not in self.feeds:
                self.feeds[inp.variable] = BlockingFeed(replay=id(self.clauses[inp.variable]) not in once)
        # results that are the input's items as they arrive: their wire text, not evaluated
        # (``wxquery.pass_through``); the data plane then hands it the text, unparsed
        inputs = {inp.variable: inp for inp in props.inputs}
        through = (passed_through(analysis.checked, props.applied_upstream, props.aggregated_upstream,
                                  inputs[next(iter(inputs))].input.items) if len(inputs) == 1 else None)
        self.passes_through = through if through in self.feeds and not self.joins else None
        root = analysis.query.root_name or "results"
        self.buffer = buffer or ResultBuffer(retention, root, self.limits.max_read_bytes)
        self._evaluation = post_process(
            analysis.checked, {id(self.clauses[v]): f for v, f in self.feeds.items()},
            props.applied_upstream, props.aggregated_upstream)
        self._stopped = False
        self.sample = 1  # its plan reads a 1/sample sample of its input (``--approximate``)
        self.estimates: LiveEstimates | None = None  # the intervals of its windows when sampled
        self.confidence = CONFIDENCE  # of those intervals (``subscribe --confidence``)
        self._stored_looked_at = False  # (``ensure_estimates``)
        # per input, the original's item after the last one fed (None: an item whose origin is
        # not known was fed): a re-plan after a failure resumes there (``recovery.resume``)
        self.resume_at: dict[str, int | None] = {}
        # the number of its next result (from 0: a runtime planned again recomputes, and its results
        # already kept are skipped; from the kept ones' end when it resumes after a restart), and
        # for one passing its items through, the original's item after its last result's
        self.next_result = 0
        self.passed_resume: int | None = None
        # told where a joined stream it reads began for it (``join_starts``; ``plan_inputs``)
        self.on_join_start: Callable[[dict[str, int]], None] | None = None
        self.thread = threading.Thread(target=self._run, name=f"post-{sid}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def ensure_estimates(self) -> LiveEstimates | None:
        """The intervals of a subscription on a sample (``sample`` > 1), with those stored
        before a restart: made as soon as the rate is known, so that results read back after a
        restart come with their windows' intervals before anything new is fed — also for one
        raised back onto the whole stream before the restart (its earlier windows were sampled)."""
        if self.estimates is not None:
            self.estimates.rate = self.sample  # (the windows from now on: ``set_sample``)
        elif self.sample > 1 or not self._stored_looked_at:
            self._stored_looked_at = True  # (once: a feed asks every batch)
            store, rows = self.buffer.store, []
            if store is not None:
                try:
                    rows = store.intervals(self.id)
                except Exception:  # noqa: BLE001 - intervals lost are said in the log, results go on
                    log.exception("the stored intervals of %s could not be read", self.id)
            if self.sample == 1 and not rows:
                return None
            self.estimates = LiveEstimates(self.sample, {i.variable: asked_partials(i)
                                                         for i in self.analysis.properties.inputs},
                                           self.confidence, store and partial(store.add_intervals, self.id))
            if store is not None:
                self.buffer.store_on_read = True  # (a reader's next intervals come after what it has)
                self.estimates.restore(rows)
        return self.estimates

    def set_sample(self, rate: int) -> None:
        """Its plan reads a 1/``rate`` sample from the next item on (a re-plan onto another
        sample, ``control.adaptive_sampling``): the windows from then on are scaled at that
        rate, the earlier ones keep theirs."""
        if rate != self.sample:
            self.sample = rate
            self.ensure_estimates()

    def feed(self, variable: str, values: list, end: bool, origins=None) -> None:
        """The next items of an input (``origins``: where they came from in the original;
        a ``TrackSwitch`` in front of it switches by them, and the runtime notes the last)."""
        if values:
            self._note_origins(variable, len(values), origins)
        estimates = self.ensure_estimates()
        if estimates is not None:  # window records of a sample: the whole stream's estimates, intervals kept
            values = estimates.scale(variable, values, self.buffer.end)
        if variable == self.passes_through:  # (each result says where it came from: ``passed_resume``)
            values = list(zip(values, origins if origins is not None and len(origins) == len(values)
                              else [None] * len(values)))
        self.feeds[variable].feed(values, end)

    def _note_origins(self, variable: str, count: int, origins) -> None:
        at = self.resume_at.get(variable, 0)
        if origins is None or len(origins) != count or (at is not None and origins[0] < at):
            self.resume_at[variable] = None  # (not known; or out of order, which no plan sends)
        elif at is not None:
            self.resume_at[variable] = origins[-1] + 1

    def watermark(self, variable: str, path: str, value: float) -> None:
        """Event time ``value`` at ``path`` reached an input (no later item is lower there): a
        window join on that element answers the outer items it covers without waiting for the
        next inner item, and forgets what no outer item to come can match."""
        feed = self.feeds.get(variable)
        if isinstance(feed, (InnerFeed, OuterFeed)):
            feed.advance(path, value)

    def join_upstream(self, upstream: bool, narrowed: tuple | None = None) -> None:
        """Whether its plan joins its two inputs in the network (``sharing.join_planning``):
        then its outer input is fed the joined stream's groups, each an outer item and the
        inner items of its band, and its inner input reads the group of the outer item at hand.
        ``narrowed``: the atoms a reused joined stream's outer and inner items must still pass
        (``PlanPart.on_groups``). Called before anything is fed. The whole where clause is
        still evaluated here."""
        if upstream and len(self.joins) != 1:
            raise ValueError(f"{self.id} has {len(self.joins)} window joins: only one is joined in the network")
        for inner in self.joins:
            inner.outer.grouped = upstream
            inner.outer.on_began = self._join_began
            inner.outer.narrow = tuple([atom_test(a) for a in atoms] for atoms in narrowed or ((), ()))  # type: ignore[assignment]

    def _join_began(self) -> None:
        """Its first joined group came: where it began is kept (``on_join_start``), so that a
        restart of this super-peer also recomputes the join from there."""
        told = self.on_join_start
        if told is not None:
            try:
                told(self.join_starts())
            except Exception:  # noqa: BLE001 - not kept: a restart recomputes from the commit point
                log.exception("where %s's joined stream began could not be kept", self.id)

    def join_starts(self) -> dict[str, int]:
        """Where its first joined group came from in each original (none yet: {}): a re-plan
        computing the join here from the logs starts there, so that its results are those this
        runtime gave — a reused joined stream began where it stood, not where the plan was
        committed."""
        began = self.joins[0].outer.began if len(self.joins) == 1 and self.joins[0].outer.grouped else None
        if began is None:
            return {}
        names = {i.variable: i.input.stream for i in self.analysis.properties.inputs}
        band = self.joins[0].band
        if names[band.outer] == names[band.inner]:
            return {}  # (a stream joined with itself starts once: where it was committed)
        return {names[band.outer]: began[0], names[band.inner]: began[1]}

    def stop(self) -> None:
        """Nobody will read the results (unsubscribed, or failed): drop the inputs not yet
        evaluated instead of working through them, so that the thread ends at once."""
        self._stopped = True
        for f in self.feeds.values():
            f.discard()

    @property
    def wants_text(self) -> bool:
        """Whether its deliveries should be wire texts (``passes_through``), not parsed items."""
        return self.passes_through is not None

    def _passed_items(self):
        """The results of a subscription that passes its items through: each as its text (an
        item that came parsed — from an executor that hands values — is serialised). Each
        result is one item, so the original's item after the last result's is where the input
        stands once the results so far are kept (``passed_resume``; lost for good after an item
        of unknown origin)."""
        lost = False
        for value, origin in self.feeds[self.passes_through]:
            lost = lost or origin is None
            self.passed_resume = None if lost else int(origin) + 1
            yield value if isinstance(value, str) else serialize(value)

    def _run(self) -> None:
        error, code = "", ""
        pending: list[str] = []  # results not offered yet: they leave before an input waits
        since = 0.0  # when the oldest pending result was made

        def offer() -> None:
            if pending and not self._stopped:
                at = self.passed_resume
                self.buffer.offer_all(self.next_result, pending, None if at is None else (self.passes_through, at))
            self.next_result += len(pending)
            pending.clear()

        for f in self.feeds.values():
            f.before_wait = offer
        try:
            for item in (self._passed_items() if self.passes_through else self._evaluation.serialized_items()):
                if self._stopped:
                    break
                if not pending:
                    since = time.monotonic()
                pending.append(item)
                if len(pending) >= OFFER_BATCH or time.monotonic() - since > OFFER_WITHIN_S:
                    offer()
            offer()
        except ResultTooLarge as exc:
            error, code = str(exc), "RESOURCE_EXHAUSTED"
        except Exception as exc:  # a bad item must not kill the daemon; the reader is told
            error, code = f"post-processing failed: {type(exc).__name__}: {exc}", "INTERNAL"
            try:  # (the results made before it stay readable)
                offer()
            except ResultTooLarge:
                pass
        finally:
            # the evaluation is over: its inputs and state are freed, whatever still arrives
            for f in self.feeds.values():
                f.discard()
            self._evaluation = None
        if self._stopped:
            return  # unsubscribed, failed, or replaced by a runtime planned again: not its end
        self.buffer.close(error, code)
        RELEASES.schedule(self.buffer, self.limits.finished_retention_s)
