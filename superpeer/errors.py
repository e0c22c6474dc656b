"""The one error type the super-peer's parts raise towards its services."""

from __future__ import annotations


class NodeError(Exception):
    """A request the super-peer refuses or cannot serve: ``code`` is the name of a gRPC status
    code (``NOT_FOUND``, ``UNAVAILABLE``, …), ``message`` says what a person can do about it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
