"""A WXQuery over an archive (issue 15, ``streamglobe archive query``), with Spark in batch mode.

The query is analysed as a subscription would be; each input's operators are what a plan would
install on the raw stream (``sharing.matching``: selection, projection, window aggregates), run
by Spark tasks over the archived chunks (``executors.spark.batch``) and merged by the same
``ChainState`` the streaming driver uses; the subscriber's post-processing (restructuring, joins)
then runs here, as at a subscriber's super-peer. So an archive query gives exactly what a
subscription from the archive's first item would have given over the items in the time range.

``approximate``/``budget``: read a 1/R sample instead (OSCAR; ``archive.layout``) — with
``--approximate`` alone the coarsest, with a budget of rows the finest whose rows fit, with a
budget of seconds the finest that the throughput measured on the coarsest says fits. Window
aggregates come back scaled, with confidence intervals (``sharing.estimates``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import pyarrow.parquet as pq

from sharing.analysis import analyze
from sharing.estimates import Estimate, estimate_record, estimate_xml, with_variance_partials
from sharing.matching import match_properties, raw_properties
from wxquery.errors import WXQueryError
from wxquery.evaluator import post_process
from wxquery.operators.chains import Chain, normalise
from wxquery.operators.definitions import WindowAggregate
from wxquery.operators.panes import ChainState, aggregate_filter
from wxquery.operators.records import WindowRecord
from wxquery.operators.windows import WindowClock

from ...executors.spark.batch import Scan, Unit, run_units, watermarks_for
from .layout import SAMPLE_RATES, ArchiveLayout, ArchiveMeta, chunks

NAMESPACE = "urn:streamglobe:approximation"


class ArchiveQueryError(Exception):
    """A query the archive cannot answer, with the reason."""


@dataclass
class ArchiveRequest:
    query: str
    archive: Path
    event_from: float = -math.inf
    event_to: float = math.inf
    approximate: bool = False
    budget_rows: int | None = None
    budget_s: float | None = None
    confidence: float = 0.95
    lateness: float = 0.0

    @property
    def sampling(self) -> bool:
        """Whether a sample may answer it."""
        return self.approximate or self.budget_rows is not None or self.budget_s is not None


@dataclass
class ArchiveAnswer:
    items: list[str]
    root: str
    rate: int = 1  # 1: exact; R: from the 1/R sample
    rows_read: int = 0
    seconds: float = 0.0
    estimates: list[Estimate] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    confidence: float = 0.95
    samples_built_s: float = 0.0

    def approximation_xml(self) -> str:
        return estimate_xml(self.estimates, self.rate, self.confidence, self.rows_read, NAMESPACE) if self.rate > 1 else ""


def parse_time(text: str) -> float:
    """An event-time bound: a number (the stream's event-time units) or an ISO 8601 time (unix
    seconds, for streams archived by arrival time; without a zone, UTC)."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()  # naive: UTC
    except ValueError:
        raise ArchiveQueryError(f"{text!r} is neither a number (event time) nor an ISO 8601 time") from None


@dataclass
class InputPlan:
    variable: str
    meta: ArchiveMeta
    chain: Chain
    kind: str  # what the input delivers: items or records
    filters: tuple = ()  # aggregate filters, applied here to the scaled estimates (sampled)
    asked: tuple = ()  # the window's partials the query asks for (the others serve intervals)


def plan_inputs(analysis, layout: ArchiveLayout, approximate: bool) -> list[InputPlan]:
    plans = []
    for inp in analysis.properties.inputs:
        try:
            meta = layout.meta(inp.input.stream)
        except FileNotFoundError as exc:
            raise ArchiveQueryError(str(exc)) from None
        if tuple(inp.input.items) != (meta.root, meta.item):
            raise ArchiveQueryError(f'the query reads {"/".join(inp.input.items)} of stream "{meta.stream}"; '
                                    f"the archive holds <{meta.root}> with <{meta.item}> items")
        match = match_properties(raw_properties(inp.input), inp)
        if not match.shareable:
            raise ArchiveQueryError(f"input ${inp.variable}: {match.reason}")
        chain = normalise(0, inp.variable, meta.stream, "items", match.residual)
        if approximate and isinstance(chain.window, WindowAggregate):
            if chain.window.window.kind == "count":
                raise ArchiveQueryError("a count window depends on every item: it cannot be answered "
                                        "from a sample; ask for the exact answer, or use a time window")
            plans.append(InputPlan(inp.variable, meta, replace(chain, window=with_variance_partials(chain.window),
                                                               filters=()),
                                   match.kind, chain.filters, chain.window.partials))
            continue
        plans.append(InputPlan(inp.variable, meta, chain, match.kind))
    return plans


def units_for(layout: ArchiveLayout, meta: ArchiveMeta, rate: int, lo: float, hi: float) -> list[Unit]:
    """The chunks holding items in [lo, hi), one unit each, reading the 1/``rate`` sample's files
    where they exist and building the missing ones from the full files."""
    sampled = {(f.first, f.bucket): f for f in layout.files(meta.stream, rate)} if rate > 1 else {}
    events = layout.event_ranges(meta.stream)
    units, previous = [], -1
    for first, last, files in chunks(layout.files(meta.stream)):
        files = [f for f in files if (f.bucket + 1) * meta.span > lo and f.bucket * meta.span < hi]
        if not files:
            continue
        if rate == 1:
            have, missing = [str(f.path) for f in files], ()
        else:
            have = [str(sampled[(f.first, f.bucket)].path) for f in files if (f.first, f.bucket) in sampled]
            missing = tuple((str(f.path), f.bucket) for f in files if (f.first, f.bucket) not in sampled)
        # the watermarks since the last unit (a chunk skipped for the range has its place too),
        # those of event times in range: a watermark at or above the range's end is as an item there
        marks = tuple(m for m in layout.watermarks(meta.stream, previous, last + 1) if m[2] < hi)
        units.append(Unit(len(units), first, last, tuple(have), missing, meta.stream, str(layout.root), rate,
                          events.get((first, last)), marks))
        previous = last
    return units


def rows_in(units: list[Unit]) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for u in units for p in (*u.files, *(f for f, _ in u.full)))


def run_input(spark, plan: InputPlan, units: list[Unit], request: ArchiveRequest,
              progress: Callable[[str], None]) -> tuple[list[str], int, float]:
    """The input's derived stream over the units: (texts in order, rows read, seconds spent
    building samples)."""
    scan = Scan(plan.chain, request.event_from, request.event_to, request.lateness)
    clocks: list[dict | None] | None = None
    built = 0.0
    ordered = in_event_order(plan, units, request.lateness)
    if plan.chain.window is not None and not ordered:  # where every earlier unit leaves the window's clock
        progress(f"${plan.variable}: measuring {len(units)} chunk(s) of {plan.meta.stream}")
        measured = run_units(spark, units, scan, None)
        built += sum(a["built_s"] for a in measured)
        clocks, running = [], WindowClock()
        for a in measured:  # (the measuring pass's drop counts are not the evaluation's)
            clocks.append(running.to_dict())
            running.follow(WindowClock.from_dict(a["clock"]), counted=False)
    progress(f"${plan.variable}: evaluating {len(units)} chunk(s) of {plan.meta.stream}")
    answers = run_units(spark, units, scan, clocks or [WindowClock().to_dict()] * len(units))
    built += sum(a["built_s"] for a in answers)
    rows = sum(a["rows"] for a in answers)
    if plan.chain.window is None:
        return [t for a in answers for _, t in a["items"]], rows, built
    state = ChainState(plan.chain)
    out: list[str] = []
    for i, a in enumerate(answers):
        # a unit that started from a fresh clock (``ordered``) is raised by ``apply`` to where
        # the units before it left event time, as every batch's clock is
        clock = WindowClock.from_dict(a["clock"])
        out.extend(state.apply([], a["panes"], [], clock, request.lateness, end=i == len(answers) - 1))
    if not answers:
        out.extend(state.apply([], [], [], None, request.lateness, end=True))
    return out, rows, built


def no_items_in_range(layout: ArchiveLayout, meta: ArchiveMeta, request: ArchiveRequest) -> str:
    buckets = sorted({f.bucket for f in layout.files(meta.stream)})
    unit = f"event time ({meta.event_time})" if meta.event_time else "event time (arrival, unix seconds)"
    held = (f"it holds {unit} {buckets[0] * meta.span:g} to {(buckets[-1] + 1) * meta.span:g}" if buckets
            else "it is empty")
    return f'no archived item of "{meta.stream}" in [{request.event_from:g}, {request.event_to:g}): {held}'


def in_event_order(plan: InputPlan, units: list[Unit], lateness: float) -> bool:
    """Whether a time window over the stream's event time can skip the measuring pass: no
    unit's items reach below the highest event time of the units before it (minus the
    lateness), so no item is late across units and each may start from a fresh clock."""
    window = plan.chain.window
    if not isinstance(window, WindowAggregate) or window.window.kind != "diff" or \
            window.window.ref != plan.meta.event_time or not units:
        return False
    clock = WindowClock()
    for u in units:
        if u.events is None or u.events[0] < clock.watermark(lateness):
            return False
        for value in (u.events[1], *(value for _, value in watermarks_for(plan.chain, u.watermarks))):
            clock.reach(value)
    return True


def choose_rate(request: ArchiveRequest, total_rows: int, rows_per_s: float | None) -> int:
    """1 (exact) without approximation; else the finest sample that fits the budget."""
    if not request.sampling:
        return 1
    if request.budget_rows is None and request.budget_s is None:
        return SAMPLE_RATES[-1]
    fitting = [r for r in (1, *SAMPLE_RATES) if
               (request.budget_rows is None or total_rows / r <= request.budget_rows) and
               (request.budget_s is None or rows_per_s is None or total_rows / r / rows_per_s <= request.budget_s)]
    return fitting[0] if fitting else SAMPLE_RATES[-1]


def query_archive(request: ArchiveRequest, spark, progress: Callable[[str], None] = lambda _: None) -> ArchiveAnswer:
    began = time.monotonic()
    try:
        analysis = analyze(request.query)
    except WXQueryError as exc:
        raise ArchiveQueryError(exc.format("query")) from None
    layout = ArchiveLayout(request.archive)
    if not layout.root.is_dir():
        raise ArchiveQueryError(f"no archive at {layout.root}")
    plans = plan_inputs(analysis, layout, request.sampling)
    if request.sampling and len(plans) > 1:
        raise ArchiveQueryError("an approximate answer is for a query over one stream; ask for the exact answer")
    root = analysis.query.root_name or "results"
    answer = ArchiveAnswer([], root, confidence=request.confidence)
    delivered: dict[int, list] = {}
    clauses = {b.name: b.clause for b in analysis.checked.clauses.values() if b.kind != "aggregate"}
    for plan in plans:
        full = units_for(layout, plan.meta, 1, request.event_from, request.event_to)
        total = rows_in(full)
        if not full and (request.event_from > -math.inf or request.event_to < math.inf):
            answer.notes.append(no_items_in_range(layout, plan.meta, request))
        rate, speed = choose_rate(request, total, None), None
        if request.budget_s is not None and rate < SAMPLE_RATES[-1]:
            coarse = units_for(layout, plan.meta, SAMPLE_RATES[-1], request.event_from, request.event_to)
            t0 = time.monotonic()
            texts, rows, built = run_input(spark, plan, coarse, request, progress)
            speed = max(rows, 1) / max(time.monotonic() - t0, 1e-3)
            left = request.budget_s - (time.monotonic() - began)
            rate = choose_rate(replace(request, budget_s=max(left, 0.0)), total, speed)
            if rate == SAMPLE_RATES[-1]:
                answer.samples_built_s += built
                _finish(answer, plan, texts, rows, rate, delivered, clauses, request)
                continue
        units = full if rate == 1 else units_for(layout, plan.meta, rate, request.event_from, request.event_to)
        texts, rows, built = run_input(spark, plan, units, request, progress)
        answer.samples_built_s += built
        _finish(answer, plan, texts, rows, rate, delivered, clauses, request)
        if request.sampling and rate == 1:
            answer.notes.append(f"the whole of {plan.meta.stream} in range fits the budget: the answer is exact")
    answer.items = list(post_process(analysis.checked, delivered, analysis.properties.applied_upstream,
                                     analysis.properties.aggregated_upstream).serialized_items())
    answer.seconds = time.monotonic() - began
    return answer


def _finish(answer: ArchiveAnswer, plan: InputPlan, texts: list[str], rows: int, rate: int,
            delivered: dict[int, list], clauses: dict, request: ArchiveRequest) -> None:
    """One input's derived stream, scaled where sampled, handed to post-processing (into
    ``delivered``; what was read and estimated into ``answer``)."""
    from lxml import etree

    answer.rows_read += rows
    answer.rate = max(answer.rate, rate)
    if plan.kind == "records":
        records = [WindowRecord.from_xml(t) for t in texts]
        if rate > 1:  # scaled first, then filtered: a filter is about the whole stream's aggregates
            keep = aggregate_filter(plan.filters) if plan.filters else (lambda r: True)
            kept = []
            for r in records:
                estimates = estimate_record(r, rate, request.confidence, plan.asked)
                if keep(r):
                    kept.append(r)
                    answer.estimates.extend(estimates)
            records = kept
        values: list = records
    else:
        values = [etree.fromstring(t) for t in texts]
        if rate > 1:
            answer.notes.append(f"the items are a 1/{rate} sample of those the query selects")
    delivered[id(clauses[plan.variable])] = values
