"""Photon sources: the seeded generator and the FITS event-list converter."""

from __future__ import annotations

import numpy as np
import pytest
from astropy.coordinates import SkyCoord
from lxml import etree

from conftest import photon_document, write_event_list
from photons.fits_events import ConversionReport, EventListError, photons_from_fits


def values(document: str, path: str) -> list[float]:
    root = etree.fromstring(document.encode())
    return [float(x) for x in root.xpath(f"/photons/photon/{path}/text()")]


def test_generator_is_seeded_and_ordered():
    a = photon_document(2000, seed=4)
    assert a == photon_document(2000, seed=4)
    assert a != photon_document(2000, seed=5)
    t = values(a, "det_time")
    assert len(t) == 2000 and all(x <= y for x, y in zip(t, t[1:]))
    ra, dec, en, phc = (values(a, p) for p in ("coord/cel/ra", "coord/cel/dec", "en", "phc"))
    assert all(0 <= x < 360 for x in ra) and all(-90 <= x <= 90 for x in dec)
    assert all(0.1 <= x <= 2.4 for x in en) and all(0 <= x <= 255 for x in phc)
    # a realistic share of the field lies in the paper's Vela region
    vela = sum(120 <= r <= 138 and -49 <= d <= -40 for r, d in zip(ra, dec))
    assert 0.2 < vela / 2000 < 0.9


def test_fits_conversion_uses_the_wcs(tmp_path):
    path = write_event_list(tmp_path / "evt.fits", n=300)
    report = ConversionReport()
    items = list(photons_from_fits(path, report))
    assert report.events_in == 300 and report.photons_out == 300
    assert report.sky_columns == ("x", "y") and report.energy_unit == "eV"
    document = "<photons>" + "".join(items) + "</photons>"
    ra, dec = values(document, "coord/cel/ra"), values(document, "coord/cel/dec")
    t = values(document, "det_time")
    assert all(x <= y for x, y in zip(t, t[1:]))
    # Independent check: gnomonic (TAN) projection by hand at the reference pixel and one more.
    from astropy.io import fits
    with fits.open(path) as hdus:
        ev = hdus["EVENTS"].data
        order = np.argsort(ev["time"], kind="stable")
        x, y = ev["x"][order].astype(float), ev["y"][order].astype(float)
        energy = ev["energy"][order]
    xi = np.radians((x - 4096.5) * -0.000136667)
    eta = np.radians((y - 4096.5) * 0.000136667)
    ra0, dec0 = np.radians(133.0), np.radians(-46.3)
    denom = np.cos(dec0) - eta * np.sin(dec0)
    ra_exp = np.degrees(ra0 + np.arctan2(xi, denom)) % 360
    dec_exp = np.degrees(np.arctan2(np.sin(dec0) + eta * np.cos(dec0), np.hypot(xi, denom)))
    assert np.allclose(ra, ra_exp, atol=2e-6) and np.allclose(dec, dec_exp, atol=2e-6)
    en = values(document, "en")
    assert np.allclose(en, energy / 1000.0, atol=1e-4)
    sep = SkyCoord(ra[0], dec[0], unit="deg").separation(SkyCoord(133.0, -46.3, unit="deg"))
    assert sep.deg < 1.0


def test_fits_errors_are_clear(tmp_path):
    bad = tmp_path / "not.fits"
    bad.write_text("hello")
    with pytest.raises(EventListError):
        list(photons_from_fits(bad))
    with pytest.raises(EventListError, match="no such file"):
        list(photons_from_fits(tmp_path / "missing.fits"))
    from astropy.io import fits
    img = tmp_path / "image.fits"
    fits.PrimaryHDU(np.zeros((4, 4))).writeto(img)
    with pytest.raises(EventListError, match="no event table"):
        list(photons_from_fits(img))


def test_xmm_style_energy_from_pi_in_ev(tmp_path):
    from astropy.io import fits

    n = 20
    cols = [
        fits.Column(name="TIME", format="D", array=np.arange(n) * 0.5 + 1e8),
        fits.Column(name="X", format="J", array=np.full(n, 25000), coord_type="RA---TAN",
                    coord_unit="deg", coord_ref_point=25000.5, coord_ref_value=10.0, coord_inc=-1.2e-5),
        fits.Column(name="Y", format="J", array=np.full(n, 25000), coord_type="DEC--TAN",
                    coord_unit="deg", coord_ref_point=25000.5, coord_ref_value=41.0, coord_inc=1.2e-5),
        fits.Column(name="PHA", format="I", array=np.arange(n)),
        fits.Column(name="PI", format="I", unit="eV", array=np.arange(n) * 100 + 200),
    ]
    path = tmp_path / "xmm.fits"
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols, name="EVENTS")]).writeto(path)
    report = ConversionReport()
    doc = "<photons>" + "".join(photons_from_fits(path, report)) + "</photons>"
    assert values(doc, "en")[:3] == [0.2, 0.3, 0.4] and values(doc, "phc")[:2] == [0.0, 1.0]
    assert report.energy_unit == "eV"
