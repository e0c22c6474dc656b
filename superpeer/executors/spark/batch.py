"""Spark in batch mode over an archive (issue 15): the scan half of the operator chains
(``wxquery.operators.chains.evaluate_chain``, the same code the streaming executor's scan tasks
run) over archived chunks, one Spark task per chunk; the driver merges the per-pane partials
exactly as the streaming driver does (``archive.query``).

A task reads its chunk's files (one per event-time bucket in range), keeps the rows in the
query's event-time range, sorts them by position and evaluates the chain with the window clock
the driver gives it — for windows, where every earlier chunk left the clock (count windows count
every earlier selected item, time windows drop items late against every earlier one), which a
first, cheaper pass measures per chunk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Unit:
    """One chunk of an archived stream, as a task reads it."""

    index: int
    first: int
    last: int
    files: tuple[str, ...]  # parquet files (full resolution, or the sample's if it exists)
    full: tuple[tuple[str, int], ...] = ()  # (full file, bucket) to build a missing sample from
    stream: str = ""
    root: str = ""  # the archive directory (to build samples lazily)
    rate: int = 1
    events: tuple[float, float] | None = None  # the lowest and highest event time of the chunk's items
    # (after, element, value): the watermarks sent since the previous unit's items (a chunk
    # outside the query's range has none) up to just after its own
    watermarks: tuple[tuple[int, str, float], ...] = ()


@dataclass(frozen=True)
class Scan:
    """What every task of one query does."""

    chain: object  # wxquery.operators.chains.Chain
    event_from: float
    event_to: float
    lateness: float = 0.0


def read_unit(unit: Unit, scan: Scan) -> tuple[np.ndarray, list[str], float]:
    """(positions, item texts) of the unit's rows in range, in position order; seconds spent
    building samples lazily."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    built = 0.0
    paths = list(unit.files)
    if unit.full:
        from superpeer.history.archive.layout import ArchiveLayout
        from superpeer.history.archive.writer import build_sample

        began = time.perf_counter()
        layout = ArchiveLayout(unit.root)
        paths += [str(build_sample(layout, unit.stream, unit.rate, unit.first, unit.last, bucket))
                  for _, bucket in unit.full]
        built = time.perf_counter() - began
    tables = [pq.read_table(p, columns=["position", "event", "item"]) for p in paths]
    table = pa.concat_tables(tables) if tables else None
    if table is None or table.num_rows == 0:
        return np.array([], dtype=np.int64), [], built
    event = table.column("event")
    keep = pc.and_(pc.greater_equal(event, scan.event_from), pc.less(event, scan.event_to))
    table = table.filter(keep).sort_by("position")
    return table.column("position").to_numpy(), table.column("item").to_pylist(), built


def run_unit(unit: Unit, scan: Scan, clock: dict | None) -> dict:
    """One task. ``clock`` None: the measuring pass (the unit's own clock from scratch);
    else the evaluation with the clock every earlier unit left."""
    from superpeer.executors.spark.collection import cycle_collection_paused
    from wxquery.operators.batch import ItemBatch
    from wxquery.operators.chains import evaluate_chain
    from wxquery.operators.windows import WindowClock, watermark_floors

    began = time.perf_counter()
    positions, texts, built = read_unit(unit, scan)
    start = WindowClock.from_dict(clock) if clock else WindowClock()
    out: dict = {"index": unit.index, "rows": len(texts), "built_s": built, "items": [], "panes": [],
                 "malformed": 0}
    marks = watermarks_for(scan.chain, unit.watermarks)
    if texts:
        with cycle_collection_paused():
            batch = ItemBatch(texts)
            batch.prepare(scan.chain.paths())
            result = evaluate_chain(scan.chain, batch, positions, start, scan.lateness,
                                    floors=watermark_floors(positions, marks) if marks else None)
        out["malformed"] = batch.malformed
        if clock is not None or scan.chain.window is None:
            out["items"], out["panes"] = result.items, result.panes
    for _, value in marks:  # event time reached them: later units' items below are late
        start.reach(value)
    out["clock"] = start.to_dict()
    out["seconds"] = time.perf_counter() - began
    return out


def watermarks_for(chain, marks: tuple[tuple[int, str, float], ...]) -> list[tuple[int, float]]:
    """(after, value) of the watermarks a chain's time window over their element obeys, as a
    live window would (``ChainState.advance``)."""
    from wxquery.operators.panes import watermark_element

    element = watermark_element(chain)
    return sorted((after, value) for after, path, value in marks if element is not None and path == element)


def run_units(spark, units: list[Unit], scan: Scan, clocks: list[dict | None] | None) -> list[dict]:
    """Every unit as one Spark task (``clocks``: per unit, None for the measuring pass);
    the tasks' answers in unit order."""
    if not units:
        return []
    work = [(u, clocks[i] if clocks is not None else None) for i, u in enumerate(units)]
    rdd = spark.sparkContext.parallelize(work, len(work))
    answers = rdd.map(lambda w: run_unit(w[0], scan, w[1])).collect()
    return sorted(answers, key=lambda a: a["index"])
