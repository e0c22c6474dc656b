"""Thin-peer tokens (``streamglobe token issue``): JSON Web Tokens signed with the backbone's
Ed25519 token key (``certs``), which every super-peer verifies (``superpeer.security.tls``)."""

from __future__ import annotations

import time
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization

from streamglobe import units
from superpeer.security.tokens import TOKEN_ALGORITHM, Grant, claims_of

from .certs import TOKEN_KEY, write_private

ADMIN_TOKEN_S = 7 * 86400  # the admin token a launcher writes at every start lasts a week


class TokenError(ValueError):
    pass


def parse_duration(text: str) -> float:
    """A token's lifetime: ``90s``, ``15m``, ``12h``, ``30d``, ``2w``, ``1d12h`` (a bare number is
    seconds; ``streamglobe.units.parse_duration``, as every duration), more than nothing."""
    try:
        seconds = units.parse_duration(text)
    except units.UnitError:
        found = units.quantity(text)
        kind = f" (that is {units.WHAT[found.kind]})" if found is not None else ""
        raise TokenError(f"{text!r} is not a duration{kind}: write e.g. 90s, 15m, 12h, 30d or 2w") from None
    if seconds <= 0:
        raise TokenError(f"{text!r}: a token lasts more than nothing (or 'never')")
    return seconds


def issue_token(directory: str | Path, user: str, publish: list[str] | tuple[str, ...] = (),
                subscribe: bool = False, admin: bool = False, expires_s: float | None = 30 * 86400,
                now: float | None = None) -> str:
    """A token for ``user``, signed with ``directory``'s token key."""
    if not user or not user.strip():
        raise TokenError("a token needs a user name (--user NAME)")
    path = Path(directory) / TOKEN_KEY
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except FileNotFoundError:
        raise TokenError(f"{path} does not exist: create the backbone's keys with "
                         "streamglobe certs init --topology FILE --out DIR") from None
    issued = time.time() if now is None else now
    grant = Grant(user.strip(), tuple(publish), subscribe, admin,
                  None if expires_s is None else issued + expires_s)
    return jwt.encode(claims_of(grant, issued), key, algorithm=TOKEN_ALGORITHM)


def write_admin_token(keys: str | Path, path: Path) -> str:
    """An admin token (valid ``ADMIN_TOKEN_S``) signed with ``keys``' token key, written to
    ``path`` for its owner only: what a launcher gives the user who started it."""
    token = issue_token(keys, "admin", ["*"], subscribe=True, admin=True, expires_s=ADMIN_TOKEN_S)
    write_private(path, (token + "\n").encode())
    return token
