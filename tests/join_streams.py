"""The two streams the join tests publish: photons every 0.1 s of ``t`` from two sources, and a
rare alert (one per 37 photons) by one of the same sources — what a selective band join with a
key on the source (``$a/author = $p/src``) is placed upstream for."""

from __future__ import annotations

import random

SOURCES = ["ivo://nasa.gsfc.gcn/SWIFT", "ivo://nasa.gsfc.gcn/Fermi"]


def photons_and_alerts(n: int, seed: int = 5) -> tuple[list[str], list[tuple[float, str]]]:
    """``n`` photons (each padded to about 270 bytes), and the alerts with their times."""
    rng = random.Random(seed)
    photons, alerts = [], []
    for k in range(n):
        t = k * 0.1
        photons.append(f"<photon><t>{t:.1f}</t><src>{rng.choice(SOURCES)}</src>"
                       f"<en>{rng.uniform(0, 2):.3f}</en><pad>{'x' * 200}</pad></photon>")
        if k % 37 == 0:
            alerts.append((t, f"<alert><ivorn>ivo://x#{k}</ivorn><t>{t:.1f}</t>"
                              f"<author>{rng.choice(SOURCES)}</author></alert>"))
    return photons, alerts
