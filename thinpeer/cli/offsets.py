"""How far ``streamglobe subscribe`` has read each subscription, kept per user, so that
``subscribe --resume ID`` goes on from there after the client stopped (its results up to that
offset were written and released)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from thinpeer.cli.command import CliError

SUBSCRIPTION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def state_dir() -> Path:
    """Where this user's thin-peer state lives, whatever the working directory."""
    explicit = os.environ.get("STREAMGLOBE_STATE_DIR")
    if explicit:
        if not Path(explicit).is_absolute():
            raise CliError(f"error: STREAMGLOBE_STATE_DIR must be an absolute path, not {explicit!r}")
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "streamglobe"


def _offset_file(subscription: str) -> Path:
    if not SUBSCRIPTION_ID.fullmatch(subscription):
        raise CliError(f"error: {subscription!r} is not a subscription id")
    return state_dir() / "offsets" / f"{subscription}.offset"


def save_offset(subscription: str, offset: int) -> None:
    """After each read: ``subscribe --resume`` goes on from here."""
    path = _offset_file(subscription)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(str(offset))
    partial.replace(path)  # never a half-written offset


def saved_offset(subscription: str) -> int:
    path = _offset_file(subscription)
    try:
        return int(path.read_text())
    except FileNotFoundError:
        raise CliError(f"error: no saved offset for subscription {subscription} in {path.parent} "
                       "(saved there by 'streamglobe subscribe' for this user); give --offset N, "
                       "the number of result items already read") from None
    except ValueError:
        raise CliError(f"error: {path} does not hold an offset; give --offset N") from None
