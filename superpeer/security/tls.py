"""How super-peers and thin peers prove who they are to a super-peer (issue 14; README "Security").

A super-peer listens twice (``rpc.server``):

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

from dataclasses import dataclass
from pathlib import Path

import grpc

from ..errors import NodeError
from .tokens import TokenVerifier

CA_FILE = "ca.pem"
TOKEN_PUBLIC = "token.pub"


def peer_files(directory: str | Path, peer: str) -> tuple[Path, Path]:
    """(certificate, key) of super-peer ``peer`` in a backbone directory."""
    return Path(directory) / f"{peer}.pem", Path(directory) / f"{peer}.key"


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


