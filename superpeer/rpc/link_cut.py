"""A link cut on purpose (``streamglobe network cut``): every call and transfer from this
super-peer to a neighbour fails at once, as if the link were down.

Super-peers on one host talk over loopback, where no link can be unplugged; a container's link is
cut with ``iptables`` instead (``thinpeer.ops.containers``). Here a client interceptor on the
channel to the neighbour answers every call with ``UNAVAILABLE`` while the link is cut, so the
forwarders hold their items and retry, the heartbeats miss, and required calls fail — exactly
what a dropped link does. Both ends are told (``network cut`` asks each of the two peers), so
nothing passes either way; ``restore`` lets the calls through again. A call already on its way
when the link is cut (a transfer, a heartbeat) still completes, as one the wire had carried.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc


class CutLink(grpc.UnaryUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, is_cut: Callable[[], bool], why: str) -> None:
        self.is_cut = is_cut
        self.why = why

    def intercept_unary_unary(self, continuation, client_call_details, request):
        if self.is_cut():
            return Refused(self.why)
        return continuation(client_call_details, request)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        """A link's stream of batches: refused while the link is cut (one open when the link
        is cut is broken by its sender, ``Forwarder.interrupt``)."""
        if self.is_cut():
            return Refused(self.why)
        return continuation(client_call_details, request_iterator)


class Refused(grpc.RpcError, grpc.Call, grpc.Future):
    """A call the cut link never carried: failed at once with ``UNAVAILABLE``, as a blocking call,
    a future, a ``with_call`` and a stream of replies alike."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def __iter__(self):
        return self

    def __next__(self):
        raise self

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self.why

    def initial_metadata(self):
        return None

    def trailing_metadata(self):
        return None

    def is_active(self) -> bool:
        return False

    def time_remaining(self):
        return None

    def add_callback(self, callback) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        return True

    def result(self, timeout=None):
        raise self

    def exception(self, timeout=None):
        return self

    def traceback(self, timeout=None):
        return None

    def add_done_callback(self, fn) -> None:
        fn(self)
