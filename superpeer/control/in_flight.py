"""Whether a rejected plan would fit once the installations in flight have settled.

A peer's usage report counts the streams in-flight installations hold reserved (``PeerState.
usage_report``): a planner that did not see them would promise the same capacity twice. But a
reservation is not yet a stream. Forty subscriptions registered at once reserve a busy peer
to its capacity with plans that, once committed, the later ones would have reused at no
cost — registered one after the other, every one is admitted. So a registration refused
over usage that in-flight installations hold part of is planned once more as if they had let
go of it: if that plan is admitted, the registration is planned again for real once they have
settled (committed: their streams can be reused; aborted: their capacity is free), until the
installation deadline. Only a refusal that letting go would not change is final at once
(``ControlPlane._reserve``, ``remote_view.settled_view``).

That second plan is the test, not the rejected plan's overloads: the planner gives back its
cheapest plan, whose overloads may be at a peer nothing in flight holds (the photons filtered
at the subscriber's peer because their own peer is held), while the plan that fits once the
held peer is free is another one."""

from __future__ import annotations

from collections.abc import Collection, Mapping

IN_FLIGHT = "in_flight"  # the key of a usage report: that part's ``PeerUsage.to_json`` (load, links)


def settled(reports: Mapping[str, dict], peers: Collection[str]) -> dict[str, dict]:
    """The usage ``reports`` (peer -> report) without what in-flight installations hold at
    ``peers``."""
    out: dict[str, dict] = {}
    for peer, report in reports.items():
        held = report.get(IN_FLIGHT) if peer in peers else None
        if not held:
            out[peer] = dict(report)
            continue
        links = {n: max(0.0, bits - held.get("links", {}).get(n, 0.0))
                 for n, bits in report.get("links", {}).items()}
        out[peer] = {**{k: v for k, v in report.items() if k != IN_FLIGHT},
                     "load": max(0.0, report.get("load", 0.0) - held.get("load", 0.0)), "links": links}
    return out


def holds_any(reports: Mapping[str, dict], peers: Collection[str]) -> bool:
    return any(reports.get(peer, {}).get(IN_FLIGHT) for peer in peers)
