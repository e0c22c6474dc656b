"""Compatibility re-export: the FITS converter lives in ``photons.fits_events``.

Kept because tests outside the thin peer still import ``thinpeer.fits_events``; new code
imports ``photons.fits_events``.
"""

from photons.fits_events import (ConversionReport, EventListError, photons_from_fits,
                                 read_columns, write_fits_document)

__all__ = ["ConversionReport", "EventListError", "photons_from_fits", "read_columns",
           "write_fits_document"]
