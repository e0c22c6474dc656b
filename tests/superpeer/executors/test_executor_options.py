"""Executor options reach both executors: the lateness a daemon is started with is the lateness its
time windows use (no Spark started: the Spark executor starts its session with its first chain)."""

from __future__ import annotations

from fractions import Fraction as F

from executor_harness import EOF, TestingSource, run_executor
from superpeer.executors import make_executor
from superpeer.command import build_parser
from superpeer.options import spark_options
from wxquery.operators import definitions as alg

WINDOW = (alg.WindowAggregate(alg.WindowSpec("diff", F(10), F(10), "t"), (("count", "."),)),)


def items(times: list[float]) -> list[str]:
    return [f"<i><t>{t}</t></i>" for t in times]


def test_inline_executor_drops_only_items_later_than_its_lateness() -> None:
    outputs = {}
    late = {}
    for lateness in (0.0, 5.0):
        run = run_executor(lambda deliver: make_executor("inline", "p", deliver, lateness=lateness, trigger_ms=None),
                           {"w": WINDOW}, TestingSource("raw", [items([1, 12, 8, 25]), EOF]))  # 8 after 12: 4 late
        outputs[lateness] = run.sink.items("w")
        late[lateness] = run.counters["w"].late_items
    first = '<w k="0"><p f="count" e=".">{}</p></w>'
    assert outputs[0.0][0] == first.format(1)  # 8 dropped: 4 later than the 12 before it
    assert outputs[5.0][0] == first.format(2)  # within 5 of 12: counted in window [0, 10)
    assert outputs[0.0][1:] == outputs[5.0][1:]
    assert late == {0.0: 1, 5.0: 0}  # the dropped item is counted where it was dropped


def test_spark_executor_takes_the_lateness_option(tmp_path) -> None:
    ex = make_executor("spark", "p", lateness=2.5, checkpoint_dir=str(tmp_path), trigger_ms=50, master=None)
    try:
        assert ex.lateness == 2.5 and ex.interval == 0.05 and ex.master == "local[2]"
        assert ex.status()["state"] == "not started"  # not attached to a node: no JVM yet
    finally:
        ex.stop()


def test_cli_passes_lateness_to_the_executor() -> None:
    args = build_parser().parse_args(["serve", "--topology", "t.toml", "--id", "P0", "--lateness", "3"])
    assert spark_options(args)["lateness"] == 3.0


def test_inline_executor_drops_and_counts_an_item_that_does_not_parse() -> None:
    """A malformed item (from a neighbour that did not validate it) reaches no operator output,
    not even as a placeholder, and the executor's status counts it."""
    made = []

    def inline(deliver):
        made.append(make_executor("inline", "p", deliver))
        return made[-1]

    chains = {"project": (alg.Project(frozenset({"t"})),),
              "count": (alg.WindowAggregate(alg.WindowSpec("count", F(2), F(2)), (("count", "."),)),)}
    run = run_executor(inline, chains, TestingSource("raw", [["<i><t>1</t></i>", "<i><t>2", "<i><t>3</t></i>"], EOF]))
    assert run.sink.items("project") == ["<i><t>1</t></i>", "<i><t>3</t></i>"]
    assert run.sink.items("count") == ['<w k="0"><p f="count" e=".">2</p></w>']
    assert made[0].status()["malformed_items_dropped"] == 1


def test_spark_starts_with_the_node_unless_told_to_wait_for_the_first_operator(tmp_path) -> None:
    """Warm (the default): attached to a node, the executor starts Spark and reports ready before
    any operator is installed; cold: nothing starts until the first operator."""
    from network_harness import until

    got: list[str] = []
    warm = make_executor("spark", "warm", deliver=lambda stream, seq, out, end: got.extend(out),
                         checkpoint_dir=str(tmp_path / "w"), trigger_ms=50)
    cold = make_executor("spark", "cold", checkpoint_dir=str(tmp_path / "c"), trigger_ms=50, warm=False)
    try:
        warm.start()
        cold.start()
        until(lambda: warm.status()["state"] == "ready", seconds=300, pause=0.1)
        status = warm.status()
        assert status["ready_after_s"] > 0 and status["chains"] == 0 and status["error"] is None
        assert cold.status()["state"] == "not started"
        warm.install("w", WINDOW, parent="raw")
        warm.push("raw", [], items([1, 12, 25]), True)
        until(lambda: len(got) == 3, seconds=60, pause=0.02)
        assert got[0] == '<w k="0"><p f="count" e=".">1</p></w>'
        cold.install("w", WINDOW, parent="raw")
        assert cold.status()["state"] in ("starting", "ready")
    finally:
        warm.stop()
        cold.stop()
    assert warm.status()["state"] == "stopped"
