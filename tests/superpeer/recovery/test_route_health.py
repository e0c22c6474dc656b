"""The path a subscription's items take, and when it is broken: a peer on it down, a link of
this peer down, or a link between two others that its sender no longer hears."""

from __future__ import annotations

from types import SimpleNamespace

from superpeer.recovery.failure_detector import FailureDetector
from superpeer.recovery.route_health import broken, data_paths


def _stream(sid, origin, route, parent=None):
    return SimpleNamespace(id=sid, origin=origin, route=tuple(route), parent=parent)


def test_the_path_follows_the_lineage_then_the_plans_route() -> None:
    # photons: SP4→SP5→SP1; derived SP1.3 computed at SP5 from it, routed SP5→SP1; reused at SP5
    streams = {"photons": _stream("photons", "SP4", ["SP4", "SP5", "SP1"]),
               "SP1.3": _stream("SP1.3", "SP5", ["SP5", "SP1"], parent="photons")}

    def lineage(sid):
        out = []
        while sid is not None:
            out.append(streams[sid])
            sid = streams[sid].parent
        return out

    part = SimpleNamespace(reused="SP1.3", reuse_peer="SP5", route=("SP5", "SP7"))
    assert data_paths(SimpleNamespace(parts=[part]), lineage) == (("SP4", "SP5", "SP7"),)


def test_what_breaks_a_path() -> None:
    path = (("SP4", "SP5", "SP1"),)
    d = FailureDetector("SP1", frozenset({"SP5"}))
    for p in ("SP4", "SP5"):
        d.heard(p, 0.0, frozenset({"SP1", "SP4", "SP5"}))
    assert broken(path, d) == ""
    d.heard("SP4", 1.0, frozenset({"SP1"}))  # SP4 no longer hears SP5: their link is cut
    assert "SP4–SP5 on its route is cut" in broken(path, d)
    d.heard("SP4", 2.0, frozenset({"SP1", "SP5"}))
    for t in (3.0, 4.0, 5.0):
        d.missed("SP5", t, "UNAVAILABLE")
    # SP4 still reports hearing SP5: only the link from SP5 to here is down
    assert "the link SP5–SP1 on its route is down" in broken(path, d)
    d.heard("SP4", 6.0, frozenset({"SP1"}))  # nobody hears SP5: it is down
    assert "SP5 on its route is down" in broken(path, d)
    d.heard("SP5", 7.0, frozenset({"SP1", "SP4"}))
    d.heard("SP4", 7.0, frozenset({"SP1", "SP5"}))
    assert broken(path, d) == ""
