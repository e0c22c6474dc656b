"""What one super-peer may ask of another: whose subscriptions, plans and streams are whose."""

from __future__ import annotations


def owner_of(plan_id: str) -> str:
    """The super-peer a subscription or plan id belongs to (``SP1-1a2b3c4d``, ``…~5e6f7a``)."""
    return plan_id.split("~", 1)[0].rpartition("-")[0]


def stream_owner(stream_id: str) -> str:
    """The super-peer that planned a derived stream (``SP1.12``)."""
    return stream_id.rpartition(".")[0]
