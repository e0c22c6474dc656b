"""The Spark executor driver's files in its checkpoint directory: the installed chains and the
driver state after the last merged micro-batch, each replaced atomically."""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path

from wxquery.operators.chains import Chain

from .driver_state import DriverState

log = logging.getLogger(__name__)


class DriverCheckpoint:
    def __init__(self, directory: Path, peer: str) -> None:
        self.directory = directory
        self.peer = peer
        (directory / "driver").mkdir(parents=True, exist_ok=True)
        self._saved = pickle.dumps(DriverState())  # the state as last written or read

    def chains(self) -> tuple[dict[int, Chain], int] | None:
        """The installed chains and the next chain id, if any were saved."""
        path = self.directory / "driver" / "chains.pkl"
        if not path.exists():
            return None
        saved = pickle.loads(path.read_bytes())
        return saved["chains"], saved["next"]

    def state(self) -> DriverState | None:
        path = self.directory / "driver" / "state.pkl"
        if not path.exists():
            return None
        self._saved = path.read_bytes()
        state = pickle.loads(self._saved)
        if not state.end and (self.directory / "spark" / "offsets").is_dir():
            log.warning("Spark executor of %s: a checkpoint from the streaming-query executor; it resumes "
                        "at the feed's base, and the outputs of its last batch may come again", self.peer)
        return state

    def write_chains(self, chains: dict[int, Chain], next_chain: int) -> None:
        self._write("chains.pkl", pickle.dumps({"chains": chains, "next": next_chain}))

    def write_state(self, state: DriverState) -> None:
        data = pickle.dumps(state)
        self._write("state.pkl", data)
        self._saved = data

    def remember(self, state: DriverState) -> None:
        """Takes ``state`` as the one to go back to (the state as loaded, adjusted)."""
        self._saved = pickle.dumps(state)

    def last_state(self) -> DriverState:
        """A fresh copy of the state as last written (what a failed merge goes back to)."""
        return pickle.loads(self._saved)

    def _write(self, name: str, data: bytes) -> None:
        path = self.directory / "driver" / name
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
