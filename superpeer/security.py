"""Who may call a super-peer, and what they may do (issue 14; README "Security").

A super-peer listens twice (``server``):

* on its **backbone** address, for the other super-peers only: mutual TLS, where the caller must
  present a certificate of the backbone's CA naming a super-peer of the topology
  (``peer_identity``), and a super-peer dialling another checks the certificate names the peer
  it meant to reach (``channel_options``). gRPC's Python server either requires a client
  certificate or never asks for one, hence the second listener;
* on its **client** address, for thin peers: TLS, and a signed token per call (a JSON Web Token
  signed with the backbone's Ed25519 token key, verified here with ``token.pub``): a ``Grant``
  naming the user, the streams they may publish, whether they may subscribe, whether they are
  an admin, and when it expires.

With ``--insecure`` both listeners are plaintext and every caller is ``ANONYMOUS`` (allowed
everything): for a network on one trusted host only.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import grpc
import jwt

from .errors import NodeError

CA_FILE = "ca.pem"
TOKEN_PUBLIC = "token.pub"
ISSUER = "streamglobe"
TOKEN_ALGORITHM = "EdDSA"
AUTHORIZATION = "authorization"  # gRPC metadata key: "Bearer <token>"
LEEWAY_S = 60  # clocks of the issuing host and the super-peers may differ this much
audit = logging.getLogger("streamglobe.audit")


def owner_of(plan_id: str) -> str:
    """The super-peer a subscription or plan id belongs to (``SP1-1a2b3c4d``, ``…~5e6f7a``)."""
    return plan_id.split("~", 1)[0].rpartition("-")[0]


def stream_owner(stream_id: str) -> str:
    """The super-peer that planned a derived stream (``SP1.12``)."""
    return stream_id.rpartition(".")[0]


def peer_files(directory: str | Path, peer: str) -> tuple[Path, Path]:
    """(certificate, key) of super-peer ``peer`` in a backbone directory."""
    return Path(directory) / f"{peer}.pem", Path(directory) / f"{peer}.key"


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


@dataclass(frozen=True)
class Security:
    """A super-peer's TLS material and token key, from its backbone directory."""

    peer: str
    ca: bytes
    cert: bytes
    key: bytes
    tokens: TokenVerifier

    @classmethod
    def load(cls, directory: str | Path, peer: str) -> "Security":
        cert, key = peer_files(directory, peer)
        files = {"the CA certificate": Path(directory) / CA_FILE, "its certificate": cert, "its key": key,
                 "the token key": Path(directory) / TOKEN_PUBLIC}
        missing = [f"{what} ({path.name})" for what, path in files.items() if not path.is_file()]
        if missing:
            raise NodeError("FAILED_PRECONDITION", f"{directory} lacks {', '.join(missing)} for {peer}: "
                                                   "create it with streamglobe certs init --topology FILE --out DIR")
        return cls(peer, files["the CA certificate"].read_bytes(), cert.read_bytes(), key.read_bytes(),
                   TokenVerifier(files["the token key"].read_bytes()))

    def backbone_credentials(self) -> grpc.ServerCredentials:
        """Mutual TLS: callers must present a certificate of the backbone's CA."""
        return grpc.ssl_server_credentials([(self.key, self.cert)], root_certificates=self.ca,
                                           require_client_auth=True)

    def client_credentials(self) -> grpc.ServerCredentials:
        """TLS for thin peers (they prove who they are with tokens)."""
        return grpc.ssl_server_credentials([(self.key, self.cert)])

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """Dialling another super-peer: this peer's certificate, the backbone's CA."""
        return grpc.ssl_channel_credentials(self.ca, self.key, self.cert)


def channel_options(peer: str) -> list[tuple[str, str]]:
    """The dialled peer's certificate must name ``peer`` (whatever address it was reached at)."""
    return [("grpc.ssl_target_name_override", peer)]


def peer_identity(context) -> str | None:
    """The super-peer a backbone call comes from: the common name of its verified client
    certificate (None on a plaintext connection)."""
    auth = context.auth_context() or {}
    names = auth.get("x509_common_name") or []
    return names[0].decode() if names else None


def deny(who: str, what: str, why: str, code: str = "PERMISSION_DENIED") -> NodeError:
    """Log a refusal (who, what, when — never a token) and return the error to raise."""
    audit.warning("denied %r: %r at %s (%r)", who or "an unknown caller", what,
                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), why)
    return NodeError(code, why)
