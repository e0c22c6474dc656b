"""What a rejected plan is asked to fit in: the usage the peers reported, without what
in-flight installations hold (``in_flight``)."""

import pytest

from sharing.stream_table import PeerUsage
from superpeer.control.in_flight import IN_FLIGHT, holds_any, settled


def report(load: float, links: dict[str, float], held: PeerUsage | None = None) -> dict:
    out = {"load": load, "links": links, "version": 7, "measured_load": 0.01}
    if held is not None:
        out[IN_FLIGHT] = held.to_json("SPx")
    return out


def test_what_is_held_in_flight_is_let_go_of_a_peers_load_and_links():
    reports = {"SP4": report(0.9, {"SP5": 50e6, "SP3": 1e6}, PeerUsage(0.6, {"SP5": 40e6})),
               "SP5": report(0.2, {"SP4": 5e6})}
    out = settled(reports, {"SP4", "SP5"})
    assert out["SP4"]["load"] == pytest.approx(0.3)
    assert out["SP4"]["links"] == {"SP5": pytest.approx(10e6), "SP3": 1e6}
    assert IN_FLIGHT not in out["SP4"] and out["SP4"]["measured_load"] == 0.01  # (measured: as it is)
    assert out["SP5"] == reports["SP5"]
    assert IN_FLIGHT in reports["SP4"] and reports["SP4"]["load"] == 0.9  # (the reports are not changed)


def test_nothing_held_is_nothing_to_wait_for():
    assert not holds_any({"SP4": report(0.9, {})}, {"SP4"})
    assert not holds_any({}, {"SP4"})
    assert holds_any({"SP4": report(0.9, {}), "SP5": report(0.5, {}, PeerUsage(0.1, {}))}, {"SP4", "SP5"})


def test_only_what_the_peers_asked_now_hold_counts():
    """A peer not asked for this plan is known by its last report (a peer down keeps it for
    good): what it held in flight then is not waited for."""
    reports = {"SP4": report(0.9, {}), "SP6": report(0.5, {"SP5": 9.0}, PeerUsage(0.4, {"SP5": 9.0}))}
    assert not holds_any(reports, {"SP4"})
    out = settled(reports, {"SP4"})
    assert out["SP6"]["load"] == 0.5 and out["SP6"]["links"] == {"SP5": 9.0}


def test_rounding_never_makes_usage_negative():
    out = settled({"SP4": report(0.3, {"SP5": 1.0}, PeerUsage(0.30000001, {"SP5": 2.0}))}, {"SP4"})
    assert out["SP4"]["load"] == 0.0 and out["SP4"]["links"]["SP5"] == 0.0
