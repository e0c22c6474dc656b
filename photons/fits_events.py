"""Convert FITS X-ray event lists (Chandra, XMM, ROSAT style) into the ``photons`` stream shape.

An event list is a binary table (usually the ``EVENTS`` extension) with one row per detected
photon. Sky pixel columns carry a per-column WCS (``TCTYPn = 'RA---TAN'`` …); astropy turns
them into RA/Dec. Energies are converted to keV from the column's unit (Chandra and XMM store
eV). Events are emitted ordered by time, so that time windows over ``det_time`` are valid.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, TextIO

import numpy as np
from astropy.io import fits
from astropy.wcs import WCS, FITSFixedWarning

TIME_COLUMNS = ("time",)
ENERGY_COLUMNS = ("energy", "pi_energy", "en")
PHC_COLUMNS = ("pha", "pi", "phc", "pha_ro")
DETECTOR_COLUMNS = (("detx", "dety"), ("chipx", "chipy"), ("rawx", "rawy"), ("dx", "dy"))


class EventListError(Exception):
    """The file is not a usable event list; the message says what is missing."""


@dataclass
class ConversionReport:
    events_in: int = 0
    photons_out: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    sky_columns: tuple[str, str] | None = None
    energy_unit: str = ""

    def skip(self, reason: str, n: int) -> None:
        if n:
            self.skipped[reason] = self.skipped.get(reason, 0) + n


@dataclass
class _Columns:
    ra: np.ndarray
    dec: np.ndarray
    time: np.ndarray
    energy_kev: np.ndarray | None
    phc: np.ndarray | None
    dx: np.ndarray | None
    dy: np.ndarray | None


def _find_events_hdu(hdus: fits.HDUList) -> fits.BinTableHDU:
    for hdu in hdus:
        if isinstance(hdu, fits.BinTableHDU) and hdu.name.upper() == "EVENTS":
            return hdu
    for hdu in hdus:
        if isinstance(hdu, fits.BinTableHDU):
            names = {n.lower() for n in hdu.columns.names}
            if "time" in names:
                return hdu
    raise EventListError("no event table found (expected a binary table extension 'EVENTS' "
                         "with a TIME column)")


def _column(hdu: fits.BinTableHDU, candidates: tuple[str, ...]) -> str | None:
    by_lower = {n.lower(): n for n in hdu.columns.names}
    for c in candidates:
        if c in by_lower:
            return by_lower[c]
    return None


def _sky(hdu: fits.BinTableHDU, report: ConversionReport) -> tuple[np.ndarray, np.ndarray]:
    header = hdu.header
    ra_col = dec_col = None
    for i in range(1, header.get("TFIELDS", 0) + 1):
        ctype = str(header.get(f"TCTYP{i}", "")).upper()
        if ctype.startswith("RA--"):
            ra_col = i
        elif ctype.startswith("DEC-"):
            dec_col = i
    data = hdu.data
    if ra_col is not None and dec_col is not None:
        with warnings.catch_warnings():
            # Mission headers carry keywords WCSLIB "fixes" (dates, obsolete forms) and says so.
            warnings.simplefilter("ignore", FITSFixedWarning)
            wcs = WCS(header, keysel=["pixel"], colsel=[ra_col, dec_col])
        x = np.asarray(data.field(ra_col - 1), dtype=float)
        y = np.asarray(data.field(dec_col - 1), dtype=float)
        ra, dec = wcs.all_pix2world(x, y, 1)
        report.sky_columns = (header[f"TTYPE{ra_col}"], header[f"TTYPE{dec_col}"])
        return np.asarray(ra) % 360.0, np.asarray(dec)
    ra_name = _column(hdu, ("ra",))
    dec_name = _column(hdu, ("dec",))
    if ra_name and dec_name:
        report.sky_columns = (ra_name, dec_name)
        return np.asarray(data[ra_name], float) % 360.0, np.asarray(data[dec_name], float)
    raise EventListError("no sky coordinates: expected pixel columns with a celestial WCS "
                         "(TCTYPn = 'RA---TAN' / 'DEC--TAN') or RA/DEC columns")


def _unit(hdu: fits.BinTableHDU, name: str) -> str:
    index = [n.lower() for n in hdu.columns.names].index(name.lower()) + 1
    return str(hdu.header.get(f"TUNIT{index}", "")).strip().lower()


def _energy_kev(hdu: fits.BinTableHDU, report: ConversionReport) -> np.ndarray | None:
    name = _column(hdu, ENERGY_COLUMNS)
    if name is None:
        pi = _column(hdu, ("pi",))
        if pi is not None and _unit(hdu, pi) == "ev":  # XMM: PI is the energy in eV
            name = pi
        else:
            return None
    values = np.asarray(hdu.data[name], dtype=float)
    unit = _unit(hdu, name)
    finite = values[np.isfinite(values)]
    if unit == "kev" or (not unit and finite.size and np.nanmax(finite) < 100):
        report.energy_unit = "keV"
        return values
    report.energy_unit = "eV"
    return values / 1000.0


def read_columns(path: str | Path, report: ConversionReport) -> _Columns:
    try:
        hdus = fits.open(path, memmap=True)
    except FileNotFoundError:
        raise EventListError(f"no such file: {path}") from None
    except OSError as exc:
        raise EventListError(f"not a FITS file: {exc}") from None
    with hdus:
        hdu = _find_events_hdu(hdus)
        if hdu.data is None or len(hdu.data) == 0:
            return _Columns(*(np.empty(0),) * 3, None, None, None, None)
        ra, dec = _sky(hdu, report)
        time_name = _column(hdu, TIME_COLUMNS)
        assert time_name is not None
        time = np.asarray(hdu.data[time_name], dtype=float)
        energy = _energy_kev(hdu, report)
        phc_name = _column(hdu, PHC_COLUMNS)
        phc = np.asarray(hdu.data[phc_name]) if phc_name else None
        dx = dy = None
        for xname, yname in DETECTOR_COLUMNS:
            xc, yc = _column(hdu, (xname,)), _column(hdu, (yname,))
            if xc and yc:
                dx, dy = np.asarray(hdu.data[xc]), np.asarray(hdu.data[yc])
                break
        return _Columns(np.array(ra), np.array(dec), time, energy,
                        None if phc is None else np.array(phc),
                        None if dx is None else np.array(dx), None if dy is None else np.array(dy))


def _fmt(value: object, decimals: int) -> str:
    if isinstance(value, (np.integer, int)):
        return str(int(value))
    v = float(value)  # type: ignore[arg-type]
    if v.is_integer() and decimals == 0:
        return str(int(v))
    return f"{v:.{decimals}f}"


def photons_from_fits(path: str | Path, report: ConversionReport | None = None,
                      limit: int | None = None) -> Iterator[str]:
    """Photon XML items of an event list, in time order."""
    report = report if report is not None else ConversionReport()
    cols = read_columns(path, report)
    n = len(cols.time)
    report.events_in = n
    ok = np.isfinite(cols.time) & np.isfinite(cols.ra) & np.isfinite(cols.dec)
    report.skip("no finite time or sky position", int(n - ok.sum()))
    order = np.argsort(cols.time, kind="stable")
    order = order[ok[order]]
    if limit is not None:
        order = order[:limit]
    for i in order:
        parts = [f"<photon><coord><cel><ra>{cols.ra[i]:.6f}</ra><dec>{cols.dec[i]:.6f}</dec></cel>"]
        if cols.dx is not None and cols.dy is not None:
            parts.append(f"<det><dx>{_fmt(cols.dx[i], 2)}</dx><dy>{_fmt(cols.dy[i], 2)}</dy></det>")
        parts.append("</coord>")
        if cols.phc is not None:
            parts.append(f"<phc>{_fmt(cols.phc[i], 2)}</phc>")
        if cols.energy_kev is not None and math.isfinite(cols.energy_kev[i]):
            parts.append(f"<en>{cols.energy_kev[i]:.4f}</en>")
        parts.append(f"<det_time>{cols.time[i]:.6f}</det_time></photon>")
        report.photons_out += 1
        yield "".join(parts)


def write_fits_document(path: str | Path, out: TextIO, limit: int | None = None,
                        progress: Callable[[int], None] | None = None) -> ConversionReport:
    report = ConversionReport()
    out.write("<photons>\n")
    for k, item in enumerate(photons_from_fits(path, report, limit), start=1):
        out.write(item)
        out.write("\n")
        if progress is not None and k % 10000 == 0:
            progress(k)
    out.write("</photons>\n")
    return report
