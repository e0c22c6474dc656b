"""What each thin peer may do at this super-peer (issue 14; README "Security").

* a stream is registered and published only by a user whose token names it (or ``*``), and once
  registered only its registering user publishes to it (an admin may close it);
* a subscription belongs to the user who created it: reading its results, resuming and
  unsubscribing by anyone else is ``PERMISSION_DENIED``; ``status`` shows a non-admin user
  their own subscriptions and streams only;
* per user, at most ``UserQuotas.max_subscriptions`` subscriptions registered here and
  ``max_publish_rate`` items per second published here (``RESOURCE_EXHAUSTED``).

Every refusal is logged by ``security.audit.deny``. On an insecure network every caller is
``ANONYMOUS``, allowed everything and unlimited.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from ..errors import NodeError
from .audit import deny
from .tls import Security
from .tokens import ANONYMOUS, Grant

BURST_S = 2.0  # a publisher may send this many seconds' worth of items at once


@dataclass(frozen=True)
class UserQuotas:
    max_subscriptions: int = 1000
    max_publish_rate: float = 0.0  # items/s per user (0: unlimited)


@dataclass
class _Bucket:
    tokens: float
    at: float = field(default_factory=time.monotonic)


class Access:
    def __init__(self, node, security: Security | None, quotas: UserQuotas | None = None) -> None:
        self.node = node
        self.security = security
        self.quotas = quotas or UserQuotas()
        self._buckets: dict[str, _Bucket] = {}
        self._subscribing: dict[str, int] = {}  # user -> Subscribe calls in progress
        self._lock = threading.Lock()

    def grant(self, context, what: str) -> Grant:
        """The caller's token, verified (``what``: the call, for the log of a refusal)."""
        if self.security is None:
            return ANONYMOUS
        try:
            return self.security.tokens.grant(context.invocation_metadata())
        except NodeError as exc:
            raise deny("", f"{what} from {context.peer()}", exc.message, exc.code) from None

    # ------------------------------------------------------------------ streams

    def register(self, grant: Grant, name: str) -> None:
        if not grant.may_publish(name):
            raise deny(grant.user, f'register stream "{name}"',
                       f'user {grant.user} may not publish stream "{name}" (its token allows '
                       f'{", ".join(grant.publish) or "no stream"})')
        self._publisher(grant, name, "register")

    def publish(self, grant: Grant, name: str, items: int) -> None:
        if not grant.may_publish(name):
            raise deny(grant.user, f'publish to "{name}"', f'user {grant.user} may not publish stream "{name}"')
        self._publisher(grant, name, "publish to")
        self._take(grant, name, items)

    def close(self, grant: Grant, name: str) -> None:
        original = self.node.state.originals.get(name)
        if original is not None and not grant.owns(original.publisher):
            raise deny(grant.user, f'close stream "{name}"',
                       f'stream "{name}" was registered by another user: only they (or an admin) may close it')

    def _publisher(self, grant: Grant, name: str, what: str) -> None:
        original = self.node.state.originals.get(name)
        unowned = original is not None and not original.publisher and grant.admin  # (from an --insecure run)
        if original is not None and original.publisher != grant.user and grant is not ANONYMOUS and not unowned:
            raise deny(grant.user, f'{what} stream "{name}"',
                       f'stream "{name}" was registered by another user: only they may publish to it')

    def _take(self, grant: Grant, name: str, items: int) -> None:
        rate = self.quotas.max_publish_rate
        if rate <= 0 or grant is ANONYMOUS:
            return
        with self._lock:
            now = time.monotonic()
            bucket = self._buckets.setdefault(grant.user, _Bucket(rate * BURST_S, now))
            bucket.tokens = min(rate * BURST_S, bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            if items > bucket.tokens and bucket.tokens < rate * BURST_S:  # (a full bucket takes any batch)
                raise deny(grant.user, f'publish {items} items to "{name}"',
                           f"user {grant.user} may publish {rate:g} items/s at {self.node.id} "
                           f"(bursts of {rate * BURST_S:g}): slow down and send the batch again",
                           "RESOURCE_EXHAUSTED")
            bucket.tokens -= items

    # ------------------------------------------------------------------ subscriptions

    def subscribe(self, grant: Grant) -> None:
        if not (grant.subscribe or grant.admin):
            raise deny(grant.user, "subscribe", f"user {grant.user} may not subscribe (its token does not allow it)")
        if grant is ANONYMOUS:
            return
        with self._lock:  # (subscriptions being analysed and planned count too)
            mine = sum(1 for r in list(self.node.control.subscriptions.values()) if r.user == grant.user)
            mine += self._subscribing.get(grant.user, 0)
            if mine >= self.quotas.max_subscriptions:
                raise deny(grant.user, "subscribe", f"user {grant.user} has {mine} subscriptions at {self.node.id}, "
                                                    f"the most allowed: unsubscribe one first", "RESOURCE_EXHAUSTED")
            self._subscribing[grant.user] = self._subscribing.get(grant.user, 0) + 1

    def subscribed(self, grant: Grant) -> None:
        """A subscription call that passed ``subscribe`` has ended (registered or failed)."""
        if grant is not ANONYMOUS:
            with self._lock:
                self._subscribing[grant.user] -= 1

    def subscription(self, grant: Grant, sid: str, what: str) -> None:
        """Whether the caller may read, resume or end subscription ``sid`` (unknown ones are
        left to the call itself: NOT_FOUND)."""
        record = self.node.control.subscriptions.get(sid)
        if record is not None and not grant.owns(record.user):
            raise deny(grant.user, f"{what} subscription {sid}",
                       f"subscription {sid} belongs to another user")

    def administer(self, grant: Grant, what: str) -> None:
        """What only an admin may do (fault injection: ``network cut``)."""
        if not grant.admin:
            raise deny(grant.user, what, f"user {grant.user} may not {what}: it needs an admin's token")

    def status(self, grant: Grant, status: dict) -> dict:
        """What ``status`` shows the caller: everything to an admin, else their own."""
        if grant.admin:
            return status
        subs = self.node.control.subscriptions
        mine = {sid: s for sid, s in status.get("subscriptions", {}).items()
                if sid in subs and subs[sid].user == grant.user}
        streams = {name: s for name, s in status.get("streams_registered_here", {}).items()
                   if name in self.node.state.originals and self.node.state.originals[name].publisher == grant.user}
        # the backbone is no one's secret: a user's view draws their streams on it
        return {"superpeer": status.get("superpeer"), "user": grant.user, "subscriptions": mine,
                "streams_registered_here": streams, "backbone": status.get("backbone")}

