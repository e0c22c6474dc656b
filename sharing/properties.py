"""Properties of subscriptions and streams (paper §3.1, DESIGN.md §4).

Properties say *what part of which input stream* a subscription needs and its result stream
contains: per input stream, the selection (a predicate graph over element paths relative to the
stream item), the projection (output and referenced elements), the window, the window
aggregates, a filter on the aggregate values, and unknown operators by parameters. Restructuring
(the return clause's shape), joins between inputs and conditions that cannot be pushed to the
input are post-processing at the subscriber's super-peer and never part of what is shared.

Subscriptions and streams are described by the same structure: a stream created for a
subscription carries that subscription's properties.

This module is the public face of properties: the values live in ``stream_properties``, their
extraction from a checked query in ``property_extraction``.
"""

from __future__ import annotations

from wxquery.operators.definitions import Atom, WindowSpec

from .property_extraction import extract, window_from_ast
from .stream_properties import (Aggregation, InputProperties, InputStream, PostProcessing,
                                Projection, Properties, Selection, UnknownOperator)

__all__ = ["Aggregation", "Atom", "InputProperties", "InputStream", "PostProcessing", "Projection",
           "Properties", "Selection", "UnknownOperator", "WindowSpec", "extract", "window_from_ast"]
