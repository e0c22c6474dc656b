"""A window query over a sample and the whole-stream estimates its results must equal, shared by
the approximate-admission and crash-recovery tests."""

from __future__ import annotations

from lxml import etree

WINDOWS = """<photons>{ for $w in stream("photons")/photons/photon |det_time diff 50 step 50|
    return <w><n>{ count($w/en) }</n><s>{ sum($w/en) }</s></w> }</photons>"""


def scaled(items: list[str], rate: int) -> list[str]:
    """Window results of a 1/``rate`` sample, scaled to the whole stream's estimates."""
    out = []
    for text in items:
        el = etree.fromstring(text)
        el.find("n").text = str(int(el.findtext("n")) * rate)
        el.find("s").text = repr(float(el.findtext("s")) * rate)
        out.append(etree.tostring(el, encoding="unicode"))
    return out
