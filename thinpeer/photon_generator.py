"""Compatibility re-export: the generator lives in ``photons.generator``.

Kept because tests outside the thin peer still import ``thinpeer.photon_generator``; new code
imports ``photons.generator`` (the simulator in ``sharing`` must, to avoid an upward import).
"""

from photons.generator import Photon, generate, write_document

__all__ = ["Photon", "generate", "write_document"]
