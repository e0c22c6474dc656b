"""The operator algebra: one implementation for every executor, the simulator and the evaluator.

Each semantic rule is written here once and everything that evaluates WXQuery calls it: the
executors (inline, Spark), the archive and the reference evaluator, which is production
post-processing built on these functions; Saxon-HE, through the differential tests, is the
independent oracle they are all checked against.

* ``comparisons`` — the comparison ``x θ y + c``: one table of θ, a per-item and a vectorised
  entry point;
* ``definitions`` — what an operator is: small validated value objects the optimizer reasons
  about and puts into plans (selection, projection, window aggregate, combined windows,
  aggregate filter; atoms, window specifications, partials);
* ``aggregates`` — one partial aggregate per function (init/add/merge/reduce) and their finals;
* ``windows`` — the window assigner (windows and panes, which windows are final), the event-time
  clock (the one raise of event time, the one late/missing counter, an item's reference), and
  item-collecting windows for the reference evaluator;
* ``records`` — window records (partials per window) and the wire text of stream values;
* ``items`` — element access, atom tests and projection on one item;
* ``batch`` — a batch of items parsed once, read as columns, selections as vectorised masks;
* ``chains`` — a chain of operators over one batch (selection, projection, per-pane partials);
* ``panes`` — a chain's state across batches: panes merged into windows, combined and filtered;
* ``runner`` — both halves in-process (the inline executor, the simulator).

Pure: no I/O, threads or sockets. The Spark executor runs ``chains`` in its scan tasks and
``panes`` in its driver; the inline executor runs ``runner``.
"""
