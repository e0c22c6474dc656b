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
from typing import NamedTuple

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
        insecure network takes no tokens, and a token in clear would be anyone's). The token
        goes as each call's metadata, added in the calling thread (``BearerToken``): gRPC's
        call credentials hand every call to a thread of their own for it, 0.2 ms a call."""
        if self.ca is None:
            return grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(self.ca), options=CHANNEL_OPTIONS)
        return grpc.intercept_channel(channel, BearerToken(self.token)) if self.token else channel

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


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: tuple | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call of a secure channel."""

    def __init__(self, token: str) -> None:
        self.metadata = (("authorization", f"Bearer {token}"),)

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return _CallDetails(d.method, d.timeout, tuple(d.metadata or ()) + self.metadata,  # type: ignore[return-value]
                            d.credentials, d.wait_for_ready, getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)
