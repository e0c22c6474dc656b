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

from sharing.cost_model import Overload

IN_FLIGHT = "in_flight"  # the key of a usage report: {"load": cores, "links": {neighbour: bit/s}}


def in_flight_report(load: float, links: Mapping[str, float]) -> dict:
    """The part of a usage report that in-flight installations hold (``usage_report``)."""
    return {"load": load, "links": dict(links)}


def held_in_flight(overloads: Iterable[Overload], reports: Mapping[str, dict]) -> bool:
    """Whether any resource of ``overloads`` is partly held by in-flight installations, as the
    peers' usage ``reports`` (peer -> report) said: a peer by its own reservations, a link
    (named ``"SPa–SPb"``, ``cost_model``) by either end's reservations towards the other."""
    for overload in overloads:
        if overload.kind == "peer":
            held = reports.get(overload.name, {}).get(IN_FLIGHT, {})
            if held.get("load", 0.0) > 0:
                return True
        elif overload.kind == "link":
            ends = overload.name.split("–")
            if len(ends) != 2:
                continue
            a, b = ends
            for here, there in ((a, b), (b, a)):
                held = reports.get(here, {}).get(IN_FLIGHT, {})
                if held.get("links", {}).get(there, 0.0) > 0:
                    return True
    return False
