"""The operator algebra's implementation: one for every executor, the simulator and the evaluator.

Definitions (what an operator is) live in ``wxquery.algebra``; this package is what they *do*:

* ``aggregates`` — one partial aggregate per function (init/add/merge/reduce) and their finals;
* ``windows`` — the window assigner (windows and panes), the event-time clock with the one
  late/missing counter, and item-collecting windows for the reference evaluator;
* ``records`` — window records (partials per window) and the wire text of stream values;
* ``items`` — element access, atom tests and projection on one item;
* ``batch`` — a batch of items parsed once, read as columns, selections as vectorised masks;
* ``chains`` — a chain of operators over one batch (selection, projection, per-pane partials);
* ``panes`` — a chain's state across batches: panes merged into windows, combined and filtered;
* ``runner`` — both halves in-process (the inline executor, the simulator).

Pure: no I/O, threads or sockets. The Spark executor runs ``chains`` in its scan tasks and
``panes`` in its driver; the inline executor runs ``runner``.
"""
