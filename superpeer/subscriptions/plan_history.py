"""Each re-plan of a running subscription, as ``status`` and the web view show it: when, why,
the old and the new plan's cost, and the streams the new plan reuses (DESIGN.md §12)."""

from __future__ import annotations

from datetime import datetime, timezone

from sharing.planner import Plan

from .record import SubscriptionRecord

MAX_ENTRIES = 100  # the oldest re-plans are dropped beyond this many


def note_replan(record: SubscriptionRecord, why: str, old_cost: float | None, new_cost: float,
                plan: Plan, old: Plan | None = None) -> dict:
    """Record a re-plan (the entry is returned: a migration fills in how its switch went)."""
    entry = {"at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "why": why,
             "old_cost": None if old_cost is None else round(old_cost, 6), "new_cost": round(new_cost, 6),
             "plan": plan.subscription,
             "reused": sorted({p.reused for p in plan.parts}),
             "old_reused": sorted({p.reused for p in old.parts}) if old is not None else [],
             "parts": [p.describe() for p in plan.parts]}
    record.plan_history.append(entry)
    del record.plan_history[:-MAX_ENTRIES]
    return entry
