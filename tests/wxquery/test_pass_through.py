"""Which subscriptions take their input's items as results unchanged (``wxquery.pass_through``):
only those whose every condition the network applies and that return the bound item itself.
Anything post-processing would still compute must keep the evaluator."""

from __future__ import annotations

import pytest

from sharing.analysis import analyze
from wxquery.pass_through import passed_through

FOR = 'for $p in stream("photons")/photons/photon'


def through(query: str, applied: bool = True) -> str | None:
    a = analyze(query)
    props = a.properties
    return passed_through(a.checked, props.applied_upstream if applied else frozenset(),
                          props.aggregated_upstream, props.inputs[0].input.items)


@pytest.mark.parametrize("query", [
    f"<all>{{ {FOR} return $p }}</all>",
    f"{FOR} return $p",
    f"<all>{{ {FOR} where $p/en >= 1.2 and $p/coord/cel/ra < 130 return $p }}</all>",
    '<all>{ for $p in stream("photons")/photons/photon[en > 1] return $p }</all>',
])
def test_the_items_themselves_pass_through(query: str) -> None:
    assert through(query) == "p"


@pytest.mark.parametrize("query", [
    f"<all>{{ {FOR} return $p/en }}</all>",
    f"<all>{{ {FOR} return <x>{{ $p }}</x> }}</all>",
    f"<all><head/>{{ {FOR} return $p }}</all>",
    '<all>{ for $p in stream("photons")/photons/photon/coord return $p }</all>',
    f"<all>{{ {FOR} |count 5| return $p }}</all>",
    f"<all>{{ {FOR} |count 5| let $a := avg($p/en) return <w>{{ $a }}</w> }}</all>",
    f"<all>{{ {FOR} where $p/en > 1 return if ($p/en > 2) then $p else () }}</all>",
    ('<all>{ for $p in stream("photons")/photons/photon for $q in stream("photons")/photons/photon '
     'where $p/det_time = $q/det_time return $p }</all>'),
])
def test_what_post_processing_still_computes_does_not(query: str) -> None:
    assert through(query) is None


def test_a_condition_left_to_post_processing_keeps_the_evaluator() -> None:
    assert through(f"<all>{{ {FOR} where $p/en >= 1.2 return $p }}</all>", applied=False) is None
    assert through(f"<all>{{ {FOR} return $p }}</all>", applied=False) == "p"  # (nothing to apply)
