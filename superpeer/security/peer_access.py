"""What one super-peer may ask of another: every authorisation decision on the backbone.

On a secure network a super-peer call carries its caller's certified id (the common name of its
backbone certificate, ``tls.peer_identity``); on an insecure one, and for a peer's calls to
itself, the caller is ``None`` and no check of who owns what applies (what a plan or an
announcement may hold at all — no new original stream, no replay held for anything but a new
copy of it — is checked for every caller). A super-peer plans and installs only its
own subscriptions (``SP1-1a2b3c4d``, re-plans ``…~5e6f7a``) with stream ids from its own range
(``SP1.12``), announces only the streams registered there, sends a stream only to the next peer
of its route, and cuts a route only back to the peer before it. Every refusal is logged
(``audit.deny``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol

from sharing.stream_table import NetworkStream

from .audit import deny


class Holder(Protocol):
    """Who a transaction belongs to (``control.transactions.Transaction``)."""

    coordinator: str | None
    subscription: str


def owner_of(plan_id: str) -> str:
    """The super-peer a subscription or plan id belongs to (``SP1-1a2b3c4d``, ``…~5e6f7a``)."""
    return plan_id.split("~", 1)[0].rpartition("-")[0]


def stream_owner(stream_id: str) -> str:
    """The super-peer that planned a derived stream (``SP1.12``)."""
    return stream_id.rpartition(".")[0]


def check_backbone_caller(caller: str | None, peers: Collection[str], method: str, where: str) -> None:
    """A super-peer call on a secure network must come with a certificate of this backbone
    naming one of its super-peers (``caller``; None: it had none)."""
    if caller is None or caller not in peers:
        raise deny(caller or "", f"{method} from {where}",
                   f"{method} is a super-peer call: it needs a certificate of this backbone "
                   "naming one of its super-peers, on the peer address")


def check_announce(caller: str | None, stream: NetworkStream, peers: Collection[str]) -> None:
    """A super-peer announces the streams registered there, and nothing else."""
    if (not stream.original or stream.parent is not None or stream.route != (stream.origin,)
            or stream.origin not in peers or (caller is not None and stream.origin != caller)):
        raise deny(caller or "", f"AnnounceStream {stream.id!r}",
                   f"{caller or 'a peer'} may announce only a stream registered there, not {stream.id!r} "
                   f"at {stream.origin}")


def check_reserve(caller: str | None, streams: list[NetworkStream], subscription: str, target: str,
                  attach: Mapping[str, Mapping]) -> None:
    """A peer reserves for its own subscriptions, with stream ids from its own range; a replay is
    held only for a new copy of it that the plan installs."""
    if caller is not None and (target != caller or owner_of(subscription) != caller
                               or any(stream_owner(s.id) != caller for s in streams)):
        raise deny(caller, f"Reserve for {subscription}", f"{caller} may reserve only for its own "
                                                          f"subscriptions ({caller}-…) and streams ({caller}.…)")
    parents = {s.id: s.parent for s in streams}
    wrong = sorted(new for new, spec in attach.items() if parents.get(new) != spec["copy"])
    if wrong:
        raise deny(caller or subscription, f"Reserve for {subscription}", f"{wrong[0]} is not a new copy "
                   f"of {attach[wrong[0]]['copy']} in the plan", "INVALID_ARGUMENT")


def check_transaction(caller: str | None, txn: str, holder: Holder | None, subscription: str, what: str) -> None:
    """Only the peer that planned a subscription commits or aborts its transactions (``holder``:
    the transaction as this peer knows it, None if it knows none)."""
    if caller is None:
        return
    if owner_of(subscription) != caller or (holder is not None
                                            and (holder.coordinator, holder.subscription) != (caller, subscription)):
        raise deny(caller, f"{what} {txn} for {subscription}", f"{caller} may {what.lower()} only "
                                                               "its own subscriptions' transactions")


def check_remove(caller: str | None, subscription: str) -> None:
    _check_own(caller, subscription, "Remove", "remove only its own subscriptions' streams")


def check_align(caller: str | None, stream: str) -> None:
    """Only the peer that planned a count window aligns it (``control.count_handover``)."""
    if caller is not None and stream_owner(stream) != caller:
        raise deny(caller, f"AlignCount {stream}", f"{caller} may align only the count windows of its own "
                                                   f"streams ({caller}.…)")


def check_claim(caller: str | None, subscription: str) -> None:
    """A peer claims a link's lowering only for its own subscriptions (``control.lowering_claims``)."""
    _check_own(caller, subscription, "ClaimLowering", "claim only for its own subscriptions")


def _check_own(caller: str | None, subscription: str, method: str, may: str) -> None:
    """A call about ``subscription`` only from the super-peer it belongs to (``SP1-…``)."""
    if caller is not None and owner_of(subscription) != caller:
        raise deny(caller, f"{method} {subscription}", f"{caller} may {may} ({caller}-…)")


def check_truncate(caller: str | None, stream: str, route: tuple[str, ...] | None, last: str) -> None:
    """A peer cuts a stream's route only back to the peer before it (``route``: the stream's as
    this peer has it, None if it has none)."""
    if caller is None or route is None:
        return
    if caller in route[1:]:
        previous = route[route.index(caller) - 1]
        if last != previous:
            raise deny(caller, f"Truncate {stream} to {last}",
                       f"{caller} may cut the route of {stream} only back to {previous}")
    elif route[-1] != last:  # (a peer cut away already asks the others too: a no-op, answered so)
        raise deny(caller, f"Truncate {stream}", f"{caller} is not on the route of {stream}")


def check_transfer_sender(caller: str | None, sender: str, stream: str) -> None:
    """A transfer names its sender truthfully."""
    if caller is not None and sender != caller:
        raise deny(caller, f"Transfer of {stream}", f"{caller} sent a transfer naming "
                                                    f"{sender or 'no sender'} as its sender")


def check_transfer_route(sender: str, stream: str, route: tuple[str, ...], here: str) -> None:
    """Only the peer before this one on the stream's route may send it here."""
    previous = route[route.index(here) - 1] if here in route[1:] else None
    if sender != previous:
        raise deny(sender, f"Transfer of {stream}", f"{sender or 'a transfer naming no sender'} is not "
                                                    f"the peer before {here} on the route of {stream} "
                                                    f"({previous or 'the stream is made here'})")

