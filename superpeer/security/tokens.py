"""Thin peers' tokens as the super-peer verifies them: a JSON Web Token signed with the
backbone's Ed25519 token key carries a ``Grant`` (who, what they may publish, whether they may
subscribe or administer, when it expires)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import jwt
from cryptography.hazmat.primitives import serialization

from ..errors import NodeError

ISSUER = "streamglobe"


TOKEN_ALGORITHM = "EdDSA"


AUTHORIZATION = "authorization"  # gRPC metadata key: "Bearer <token>"


LEEWAY_S = 60  # clocks of the issuing host and the super-peers may differ this much
VERIFIED_TOKENS = 1024  # tokens remembered as verified (``TokenVerifier``)
EXPIRED = "the token has expired: ask for a new one"


@dataclass(frozen=True)
class Grant:
    """What a thin peer's token allows."""

    user: str
    publish: tuple[str, ...] = ()  # stream names it may register and publish ("*": any)
    subscribe: bool = False
    admin: bool = False
    expires: float | None = None  # seconds since the epoch

    def may_publish(self, stream: str) -> bool:
        return self.admin or "*" in self.publish or stream in self.publish

    def owns(self, user: str) -> bool:
        """Whether what ``user`` created is this caller's to read, resume or end."""
        return self.admin or user == self.user


ANONYMOUS = Grant("", ("*",), subscribe=True, admin=True)  # every caller of an insecure network


def claims_of(grant: Grant, issued: float) -> dict:
    claims = {"iss": ISSUER, "sub": grant.user, "iat": int(issued), "publish": list(grant.publish),
              "subscribe": grant.subscribe, "admin": grant.admin}
    if grant.expires is not None:
        claims["exp"] = int(grant.expires)
    return claims


class TokenVerifier:
    """Checks thin peers' tokens against the backbone's public token key.

    A token verified once is remembered (up to ``VERIFIED_TOKENS`` of them, the least recently
    used forgotten first) with its grant: a client sends the same token with every call, and
    checking its signature again cost 0.13 ms a call. What can change for a remembered token is
    only its expiry, checked at every call as ``jwt.decode`` checks it."""

    def __init__(self, public_key_pem: bytes) -> None:
        self.key = serialization.load_pem_public_key(public_key_pem)
        self._verified: OrderedDict[str, Grant] = OrderedDict()
        self._lock = threading.Lock()

    def grant(self, metadata) -> Grant:
        token = ""
        for key, value in metadata or ():
            if key == AUTHORIZATION:
                token = value.removeprefix("Bearer ").strip()
        if not token:
            raise NodeError("UNAUTHENTICATED", "no token: give --token or STREAMGLOBE_TOKEN "
                                               "(streamglobe token issue --user NAME …)")
        with self._lock:
            known = self._verified.get(token)
            if known is not None:
                self._verified.move_to_end(token)
        if known is not None:
            if known.expires is not None and time.time() > known.expires + LEEWAY_S:
                with self._lock:
                    self._verified.pop(token, None)
                raise NodeError("UNAUTHENTICATED", EXPIRED)
            return known
        granted = self._verify(token)
        with self._lock:
            self._verified[token] = granted
            while len(self._verified) > VERIFIED_TOKENS:
                self._verified.popitem(last=False)
        return granted

    def _verify(self, token: str) -> Grant:
        try:
            claims = jwt.decode(token, self.key, algorithms=[TOKEN_ALGORITHM], issuer=ISSUER, leeway=LEEWAY_S,
                                options={"require": ["sub", "iat", "iss"]})
        except jwt.ExpiredSignatureError:
            raise NodeError("UNAUTHENTICATED", EXPIRED) from None
        except jwt.InvalidSignatureError:
            raise NodeError("UNAUTHENTICATED", "the token's signature does not verify: it was changed, "
                                               "or it was signed for another backbone") from None
        except jwt.InvalidTokenError as exc:
            raise NodeError("UNAUTHENTICATED", f"not a valid token: {exc}") from None
        publish = claims.get("publish", [])
        if not isinstance(publish, list) or not all(isinstance(s, str) for s in publish):
            raise NodeError("UNAUTHENTICATED", "not a valid token: 'publish' must be a list of stream names")
        return Grant(str(claims["sub"]), tuple(publish), bool(claims.get("subscribe")),
                     bool(claims.get("admin")), claims.get("exp"))
