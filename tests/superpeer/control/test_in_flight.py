"""A rejection is retried only while in-flight installations hold what it needs (``in_flight``)."""

from sharing.cost_model import Overload
from superpeer.control.in_flight import IN_FLIGHT, held_in_flight, in_flight_report


def reports(**held: dict) -> dict[str, dict]:
    return {peer: {"load": 0.9, "links": {}, **({IN_FLIGHT: h} if h else {})} for peer, h in held.items()}


def test_a_peer_overload_is_held_in_flight_only_by_that_peers_own_reservations():
    overload = [Overload("peer", "SP4", 0.2, 0.1)]
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.3, {})))
    assert not held_in_flight(overload, reports(SP4=None, SP5=in_flight_report(0.3, {})))
    assert not held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 10.0})))
    assert not held_in_flight(overload, {})


def test_a_link_overload_is_held_in_flight_by_either_ends_reservations_towards_the_other():
    overload = [Overload("link", "SP4–SP5", 0.2, 0.1)]
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 8e3})))
    assert held_in_flight(overload, reports(SP5=in_flight_report(0.0, {"SP4": 8e3})))
    assert not held_in_flight(overload, reports(SP5=in_flight_report(0.5, {"SP6": 8e3})))
