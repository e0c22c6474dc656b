"""How a thin peer reaches a super-peer: TLS with the backbone's CA certificate and a token, or
plaintext for a network started with ``--insecure``.

The CLI takes ``--ca FILE`` / ``STREAMGLOBE_CA`` and ``--token TOKEN`` / ``STREAMGLOBE_TOKEN``
(a token may also be given as ``@FILE``). ``network up`` writes both for its user into its state
directory (``tls/ca.pem``, ``admin.token``) and says how to use them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import grpc

CA_ENV = "STREAMGLOBE_CA"
TOKEN_ENV = "STREAMGLOBE_TOKEN"
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]


class CredentialsError(ValueError):
    pass


@dataclass(frozen=True)
class Credentials:
    ca: bytes | None = None  # None: plaintext
    token: str | None = None

    @classmethod
    def resolve(cls, ca: str | Path | None = None, token: str | None = None) -> Credentials:
        """From the arguments, else the environment; no CA means plaintext."""
        ca = ca or os.environ.get(CA_ENV) or None
        token = token or os.environ.get(TOKEN_ENV) or None
        ca_bytes = None
        if ca:
            try:
                ca_bytes = Path(ca).read_bytes()
            except OSError as exc:
                raise CredentialsError(f"cannot read the CA certificate {ca}: {exc.strerror}") from None
        if token and token.startswith("@"):
            try:
                token = Path(token[1:]).read_text().strip()
            except OSError as exc:
                raise CredentialsError(f"cannot read the token file {token[1:]}: {exc.strerror}") from None
        return cls(ca_bytes, token)

    @property
    def secure(self) -> bool:
        return self.ca is not None

    def channel(self, address: str) -> grpc.Channel:
        """A secure channel sends the token with every call; a plaintext one never does (an
        insecure network takes no tokens, and a token in clear would be anyone's)."""
        if self.ca is None:
            return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        return grpc.secure_channel(address, self._channel_credentials(), options=CHANNEL_OPTIONS)

    def aio_channel(self, address: str) -> grpc.aio.Channel:
        """The same channel for ``asyncio`` (``grpc.aio``), for ``thinpeer.aio``."""
        if self.ca is None:
            return grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
        return grpc.aio.secure_channel(address, self._channel_credentials(), options=CHANNEL_OPTIONS)

    def _channel_credentials(self) -> grpc.ChannelCredentials:
        creds = grpc.ssl_channel_credentials(self.ca)
        if self.token:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(self.token))
        return creds
