"""Seeded synthetic generator of the paper's ``photons`` stream (DESIGN.md §8).

Photons come from a simulated ROSAT-like pointing at the Vela supernova remnant, so that the
paper's Queries 1–4 select realistic fractions: sky positions scatter around the field centre,
the Vela/RX J0852 region is over-dense, energies follow a soft power law in the 0.1–2.4 keV band
with the pulse-height channel derived from the energy, and arrival times are a Poisson process
(``det_time`` strictly non-decreasing). The same seed always gives the same document.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Iterator, TextIO

FIELD_RA, FIELD_DEC = 129.0, -45.0  # around Vela SNR
FIELD_RADIUS_DEG = 12.0
HOTSPOT_RA, HOTSPOT_DEC, HOTSPOT_SIGMA = 133.0, -46.3, 1.2  # RX J0852.0-4622
DETECTOR_PIXELS = 8192
E_MIN_KEV, E_MAX_KEV = 0.1, 2.4
# The field holds a variable hard source: one flare of FLARE_LENGTH_S every FLARE_PERIOD_S
# seconds, during which most photons are hard (so windowed average energies do vary).
FLARE_PERIOD_S, FLARE_LENGTH_S = 600.0, 120.0


@dataclass(frozen=True)
class Photon:
    ra: float
    dec: float
    dx: int
    dy: int
    phc: int
    en: float
    det_time: float

    def to_xml(self) -> str:
        return (f"<photon><coord><cel><ra>{self.ra:.5f}</ra><dec>{self.dec:.5f}</dec></cel>"
                f"<det><dx>{self.dx}</dx><dy>{self.dy}</dy></det></coord>"
                f"<phc>{self.phc}</phc><en>{self.en:.4f}</en>"
                f"<det_time>{self.det_time:.4f}</det_time></photon>")


def generate(count: int | None, seed: int = 0, rate: float = 10.0, start_time: float = 0.0
             ) -> Iterator[Photon]:
    """``count`` photons (endless when None) at an average of ``rate`` photons per second of
    ``det_time``."""
    if count is not None and count < 0:
        raise ValueError("count must not be negative")
    if rate <= 0:
        raise ValueError("rate must be positive")
    rng = random.Random(seed)
    t = start_time
    produced = 0
    while count is None or produced < count:
        produced += 1
        t += rng.expovariate(rate)
        if rng.random() < 0.3:
            ra = rng.gauss(HOTSPOT_RA, HOTSPOT_SIGMA)
            dec = rng.gauss(HOTSPOT_DEC, HOTSPOT_SIGMA)
        else:
            r = FIELD_RADIUS_DEG * math.sqrt(rng.random())
            theta = rng.uniform(0, 2 * math.pi)
            dec = FIELD_DEC + r * math.sin(theta)
            ra = FIELD_RA + r * math.cos(theta) / math.cos(math.radians(dec))
        ra %= 360.0
        dec = max(-90.0, min(90.0, dec))
        en = _energy(rng, flaring=(t % FLARE_PERIOD_S) < FLARE_LENGTH_S)
        phc = min(255, max(0, int(round(en / E_MAX_KEV * 255 + rng.gauss(0, 3)))))
        dx = min(DETECTOR_PIXELS - 1, max(0, int(rng.gauss(4096, 1200))))
        dy = min(DETECTOR_PIXELS - 1, max(0, int(rng.gauss(4096, 1200))))
        # Round like the XML does, so that det_time stays non-decreasing after printing.
        yield Photon(ra, dec, dx, dy, phc, round(en, 4), round(t, 4))


def _energy(rng: random.Random, flaring: bool) -> float:
    """Soft power law N(E) ~ E^-1.5 in the band; during a flare most photons are hard."""
    if flaring and rng.random() < 0.85:
        return rng.triangular(0.8, E_MAX_KEV, 2.0)
    u = rng.random()
    a = 1 - 1.5
    return (E_MIN_KEV ** a + u * (E_MAX_KEV ** a - E_MIN_KEV ** a)) ** (1 / a)


def write_document(out: TextIO, photons: Iterator[Photon], root: str = "photons") -> int:
    out.write(f"<{root}>\n")
    n = 0
    for photon in photons:
        out.write(photon.to_xml())
        out.write("\n")
        n += 1
    out.write(f"</{root}>\n")
    return n
