"""Photon streams: the synthetic ``photons`` generator and the FITS event-list converter.

A bottom-layer package (it imports no other StreamGlobe package) so that both the pure simulator
in ``sharing`` and the thin peer's publishers and CLI can produce the paper's example stream
without an upward import. Submodules are not imported here: ``fits_events`` pulls in astropy,
which the simulator never needs.
"""
