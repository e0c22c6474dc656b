"""Bytes of an input as they arrive: stdin or a pipe as soon as a write lands, a file to its end
or, followed, as it grows (``tail -f``).

Reading a pipe with ``read(n)`` waits for ``n`` bytes or the end; ``os.read`` returns what is
there, so an item written to the pipe is seen at once, however small.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

CHUNK = 1 << 16
FOLLOW_POLL_S = 0.05  # how often a followed file is looked at again at its end


class InputError(Exception):
    """The input cannot be read: the message names it and says why."""


def read_chunks(path: str, follow: bool = False, poll_s: float = FOLLOW_POLL_S,
                stop=None) -> Iterator[bytes]:
    """The input's bytes in pieces as they come. ``path`` "-" is stdin (it ends when the writer
    closes it). ``follow``: at the end of a file, wait for more until ``stop()`` says so (or for
    ever: Ctrl-C ends it)."""
    if path == "-":
        fd = 0
        while True:
            data = os.read(fd, CHUNK)
            if not data:
                return
            yield data
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc.strerror}") from None
    with f:
        while True:
            data = f.read(CHUNK)
            if data:
                yield data
                continue
            if not follow or (stop is not None and stop()):
                return
            time.sleep(poll_s)
