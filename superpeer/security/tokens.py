"""Thin peers' tokens as the super-peer verifies them: a JSON Web Token signed with the
backbone's Ed25519 token key carries a ``Grant`` (who, what they may publish, whether they may
subscribe or administer, when it expires)."""

from __future__ import annotations

from dataclasses import dataclass

import jwt

from ..errors import NodeError

ISSUER = "streamglobe"


TOKEN_ALGORITHM = "EdDSA"


AUTHORIZATION = "authorization"  # gRPC metadata key: "Bearer <token>"


LEEWAY_S = 60  # clocks of the issuing host and the super-peers may differ this much


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
    """Checks thin peers' tokens against the backbone's public token key."""

    def __init__(self, public_key_pem: bytes) -> None:
        self.key = public_key_pem

    def grant(self, metadata) -> Grant:
        token = ""
        for key, value in metadata or ():
            if key == AUTHORIZATION:
                token = value.removeprefix("Bearer ").strip()
        if not token:
            raise NodeError("UNAUTHENTICATED", "no token: give --token or STREAMGLOBE_TOKEN "
                                               "(streamglobe token issue --user NAME …)")
        try:
            claims = jwt.decode(token, self.key, algorithms=[TOKEN_ALGORITHM], issuer=ISSUER, leeway=LEEWAY_S,
                                options={"require": ["sub", "iat", "iss"]})
        except jwt.ExpiredSignatureError:
            raise NodeError("UNAUTHENTICATED", "the token has expired: ask for a new one") from None
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
