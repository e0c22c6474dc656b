"""The one error type the super-peer's parts raise towards its services."""

from __future__ import annotations

import logging

log = logging.getLogger("streamglobe.superpeer")


class NodeError(Exception):
    """A request the super-peer refuses or cannot serve: ``code`` is the name of a gRPC status
    code (``NOT_FOUND``, ``UNAVAILABLE``, …), ``message`` says what a person can do about it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def as_node_error(exc: BaseException, subscription: str) -> NodeError:
    """A failure while installing a subscription, as the status its client sees: a
    ``NodeError`` as it is, anything else (a bug) logged and reported as INTERNAL."""
    if isinstance(exc, NodeError):
        return exc
    log.error("installing %s failed", subscription, exc_info=exc)
    return NodeError("INTERNAL", f"installing subscription {subscription} failed: "
                                 f"{type(exc).__name__}: {exc}")
