"""Whether what a rejected plan needs is held by installations still in flight.

A peer's usage report counts the streams in-flight installations hold reserved (``PeerState.
own_usage``): a planner that did not see them would promise the same capacity twice. But a
reservation is not yet a stream. Forty subscriptions registered at once reserve a busy peer
to its capacity with plans that, once committed, the later ones would have reused at no
cost — registered one after the other, every one is admitted. So a registration refused
for a peer or link that in-flight installations hold capacity on is planned again once they
have settled (committed or aborted), until the installation deadline; only a refusal over
settled usage is final (``ControlPlane._reserve``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sharing.backbone import Backbone
from sharing.cost_model import Overload

IN_FLIGHT = "in_flight"  # the key of a usage report: that part's ``PeerUsage.to_json`` (load, links)


def held_in_flight(overloads: Iterable[Overload], reports: Mapping[str, dict], backbone: Backbone) -> bool:
    """Whether letting go of what in-flight installations hold, as the peers' usage ``reports``
    (peer -> report) said, could make room for one of ``overloads``: a peer's own reservations,
    or a link's (named ``"SPa–SPb"``, ``cost_model``) by both ends towards each other, against
    the ``backbone``'s capacity of it. A plan far beyond what is held is refused at once,
    whatever else is in flight."""
    capacity, bandwidth = backbone.capacity(), backbone.bandwidth()
    for overload in overloads:
        short = overload.needed - overload.available  # (of the resource's capacity)
        if overload.kind == "peer":
            held = reports.get(overload.name, {}).get(IN_FLIGHT, {}).get("load", 0.0)
            whole = capacity.get(overload.name, 0.0)
        elif overload.kind == "link":
            ends = overload.name.split("–")
            if len(ends) != 2:
                continue
            a, b = ends
            held = sum(reports.get(here, {}).get(IN_FLIGHT, {}).get("links", {}).get(there, 0.0)
                       for here, there in ((a, b), (b, a)))
            whole = bandwidth.get(frozenset(ends), 0.0)
        else:
            continue
        if held > 0 and whole > 0 and held / whole >= short:
            return True
    return False
