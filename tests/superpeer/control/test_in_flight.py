"""A rejection is retried only while in-flight installations hold what could make room for it
(``in_flight``)."""

from sharing.cost_model import Overload
from sharing.scenarios import paper_example_backbone
from sharing.stream_table import PeerUsage
from superpeer.control.in_flight import IN_FLIGHT, held_in_flight

BACKBONE = paper_example_backbone(bandwidth=100e6, load_capacity=1.0)


def in_flight_report(load: float, links: dict[str, float]) -> dict:
    return PeerUsage(load, links).to_json("SPx")


def reports(**held: dict) -> dict[str, dict]:
    return {peer: {"load": 0.9, "links": {}, **({IN_FLIGHT: h} if h else {})} for peer, h in held.items()}


def test_a_peer_overload_is_held_in_flight_only_by_that_peers_own_reservations():
    overload = [Overload("peer", "SP4", 0.2, 0.1)]  # (short of 0.1 of its one core)
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.3, {})), BACKBONE)
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.1, {})), BACKBONE)
    assert not held_in_flight(overload, reports(SP4=None, SP5=in_flight_report(0.3, {})), BACKBONE)
    assert not held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 10.0})), BACKBONE)
    assert not held_in_flight(overload, {}, BACKBONE)


def test_a_plan_far_beyond_what_is_held_in_flight_is_not_retried():
    assert not held_in_flight([Overload("peer", "SP4", 0.2, 0.1)], reports(SP4=in_flight_report(0.05, {})), BACKBONE)
    assert not held_in_flight([Overload("peer", "SP4", 3.0, 0.1)], reports(SP4=in_flight_report(0.9, {})), BACKBONE)


def test_a_link_overload_is_held_in_flight_by_both_ends_reservations_towards_each_other():
    overload = [Overload("link", "SP4–SP5", 0.2, 0.1)]  # (short of 10 Mbit/s of 100)
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 20e6})), BACKBONE)
    assert held_in_flight(overload, reports(SP5=in_flight_report(0.0, {"SP4": 20e6})), BACKBONE)
    assert held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 6e6}),
                                            SP5=in_flight_report(0.0, {"SP4": 6e6})), BACKBONE)
    assert not held_in_flight(overload, reports(SP4=in_flight_report(0.0, {"SP5": 6e6})), BACKBONE)
    assert not held_in_flight(overload, reports(SP5=in_flight_report(0.5, {"SP6": 8e7})), BACKBONE)
