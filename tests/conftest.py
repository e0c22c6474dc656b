"""Shared fixtures: photon documents (synthetic and FITS-converted) for the test suite."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from photons.generator import generate, write_document  # noqa: E402


# Tests that start nothing — no process, port, container, Spark or browser: the pure packages'.
# On pytest-xdist's workers (the README's ``-n 2``) they run on one while every other test runs
# on the other, one after another in their order as without xdist (``SystemTestsTogether``): the
# daemons, containers and timings of those tests never share the machine with another such test,
# and a module's fixtures (a deployment of containers) are set up once.
BESIDE_THE_SYSTEM = ("wxquery", "sharing", "photons", "streamglobe", "test_import_cycles.py",
                     "test_package_boundaries.py")


def _scope(nodeid: str) -> str:
    """``system`` for every test that does not start nothing; a pure test is a scope of its own."""
    top = nodeid.split("::", 1)[0].split("/")
    return nodeid if len(top) > 1 and top[0] == "tests" and top[1] in BESIDE_THE_SYSTEM else "system"


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SystemTestsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return SystemTestsTogether(config, log)


def photon_document(count: int, seed: int, rate: float = 10.0, start_time: float = 0.0) -> str:
    buf = io.StringIO()
    write_document(buf, generate(count, seed, rate, start_time))
    return buf.getvalue()


def write_event_list(path: Path, n: int = 1500, seed: int = 3) -> Path:
    """A Chandra-like ACIS event list: sky pixels with a TAN WCS, eV energies, mission time."""
    from astropy.io import fits

    rng = np.random.default_rng(seed)
    time = 6.3e8 + np.sort(rng.uniform(0, 400, n))
    x = rng.normal(4096.5, 300, n)
    y = rng.normal(4096.5, 300, n)
    energy = rng.uniform(300, 8000, n).astype(np.float32)
    cols = [
        fits.Column(name="time", format="D", unit="s", array=time),
        fits.Column(name="ccd_id", format="I", array=rng.integers(0, 4, n)),
        fits.Column(name="chipx", format="I", array=rng.integers(1, 1024, n)),
        fits.Column(name="chipy", format="I", array=rng.integers(1, 1024, n)),
        fits.Column(name="detx", format="E", array=rng.uniform(3000, 5000, n).astype(np.float32)),
        fits.Column(name="dety", format="E", array=rng.uniform(3000, 5000, n).astype(np.float32)),
        fits.Column(name="x", format="E", unit="pixel", array=x.astype(np.float32),
                    coord_type="RA---TAN", coord_unit="deg", coord_ref_point=4096.5,
                    coord_ref_value=133.0, coord_inc=-0.000136667),
        fits.Column(name="y", format="E", unit="pixel", array=y.astype(np.float32),
                    coord_type="DEC--TAN", coord_unit="deg", coord_ref_point=4096.5,
                    coord_ref_value=-46.3, coord_inc=0.000136667),
        fits.Column(name="energy", format="E", unit="eV", array=energy),
        fits.Column(name="pha", format="J", array=(energy / 14.6).astype(np.int32)),
    ]
    events = fits.BinTableHDU.from_columns(cols, name="EVENTS")
    fits.HDUList([fits.PrimaryHDU(), events]).writeto(path, overwrite=True)
    return path


@pytest.fixture(scope="session")
def photons_small() -> str:
    return photon_document(1500, seed=11)


@pytest.fixture(scope="session")
def event_list(tmp_path_factory) -> Path:
    return write_event_list(tmp_path_factory.mktemp("fits") / "acis_evt2.fits")


@pytest.fixture
def thin_peer_state(tmp_path_factory, monkeypatch) -> Path:
    """A fresh thin-peer state directory (saved offsets) for the CLI runs of a test, never the
    user's own: modules that run the CLI use it for every test (``usefixtures``)."""
    state = tmp_path_factory.mktemp("thinpeer-state")
    monkeypatch.setenv("STREAMGLOBE_STATE_DIR", str(state))
    return state
